//! What a person may write beside an authenticated identity: a note, never a name that stands
//! for who they are (that is the database role, or the console's logged-in user).

/// The longest note kept with an approval or a review decision.
pub const MAX_NOTE_CHARS: usize = 500;

/// Why a note was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("the note is longer than {MAX_NOTE_CHARS} characters")]
    TooLong,
    #[error("the note holds a control or direction-changing character (at character {0}); write plain text")]
    Control(usize),
}

/// A note as given, checked: at most [`MAX_NOTE_CHARS`] characters, no control characters (C0,
/// C1, DEL) and no bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F), which
/// could forge or hide text where the note is shown. Surrounding space is trimmed.
pub fn check_note(note: &str) -> Result<String, NoteError> {
    let note = note.trim();
    if let Some((i, _)) = note.chars().enumerate().find(|(_, c)| is_forbidden(*c)) {
        return Err(NoteError::Control(i + 1));
    }
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(NoteError::TooLong);
    }
    Ok(note.to_string())
}

fn is_forbidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escape_sequence_or_a_bidi_override_is_refused() {
        assert_eq!(check_note("ok \u{1b}[2J"), Err(NoteError::Control(4)));
        assert_eq!(check_note("a\u{202e}b"), Err(NoteError::Control(2)));
    }

    #[test]
    fn a_long_note_is_refused_and_a_plain_one_kept() {
        assert_eq!(check_note(&"x".repeat(501)), Err(NoteError::TooLong));
        assert_eq!(
            check_note("  conferido com o extrato "),
            Ok("conferido com o extrato".into())
        );
    }
}
