//! Who did it is proven, not claimed (invariant `who-is-proven`). An approval or a review decision
//! is recorded under the authenticated identity — the session's database role (`session_user`),
//! later the console's logged-in user — never under a name given on the command line. What a person
//! types (`--note`, the old `--by`) is kept as a note, and checked here first: bounded, and free of
//! control characters, so it cannot forge another line or drive a terminal when shown.

use crate::shared::text::is_hazard;

/// The longest note, in characters (`efeito_revisao.nota` and `reprocessamento_aprovacao.nota`
/// check the same bound).
pub const MAX_NOTE_CHARS: usize = 500;

/// Why a note is refused. The message never quotes the note.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("the note has {chars} characters; at most {MAX_NOTE_CHARS} are kept")]
    TooLong { chars: usize },
    #[error("the note has a control character (U+{code:04X}) at character {position}: write it on one line, in plain text")]
    ControlCharacter { code: u32, position: usize },
}

/// The note as it will be recorded, or why it is refused: at most [`MAX_NOTE_CHARS`] characters,
/// none of them a C0/C1 control, a bidi control or a line separator ([`is_hazard`]).
pub fn check_note(note: &str) -> Result<String, NoteError> {
    let chars = note.chars().count();
    if chars > MAX_NOTE_CHARS {
        return Err(NoteError::TooLong { chars });
    }
    if let Some((i, c)) = note.chars().enumerate().find(|(_, c)| is_hazard(*c)) {
        return Err(NoteError::ControlCharacter {
            code: u32::from(c),
            position: i + 1,
        });
    }
    Ok(note.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_note_is_kept_as_given() {
        assert_eq!(
            check_note("ana@financeiro: conferido com o vendedor, ação ok").as_deref(),
            Ok("ana@financeiro: conferido com o vendedor, ação ok")
        );
    }

    #[test]
    fn a_note_over_the_bound_is_refused() {
        assert_eq!(
            check_note(&"x".repeat(100_000)),
            Err(NoteError::TooLong { chars: 100_000 })
        );
        assert!(check_note(&"é".repeat(MAX_NOTE_CHARS)).is_ok());
    }

    #[test]
    fn escape_sequences_newlines_and_bidi_overrides_are_refused() {
        for (note, code) in [
            ("ok\u{1b}[2J", 0x1b),
            ("ok\nforged line", 0x0a),
            ("ok\u{9b}31m", 0x9b),
            ("ok\u{202e}gnp.exe", 0x202e),
        ] {
            assert_eq!(
                check_note(note),
                Err(NoteError::ControlCharacter { code, position: 3 }),
                "{note:?}"
            );
        }
    }

    #[test]
    fn the_refusal_does_not_quote_the_note() {
        let err = check_note("secret\u{1b}").unwrap_err().to_string();

        assert!(!err.contains("secret"), "{err}");
    }
}
