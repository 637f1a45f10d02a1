//! The one escaping function for every human-facing text output: CLI tables and summaries, log
//! field values in the plain format, the report's text part, mail headers (the HTML part and
//! `/metrics` labels have escapings of their own, for their own syntax).
//!
//! Archive text (event ids, `pedido_id`, errors that quote them) is hostile: an ESC sequence can
//! drive a terminal, a BEL ring it, a newline or `\r\n` forge a line of a summary or of a mail
//! body, a bidirectional override (U+202E) make text read backwards. [`inert`] writes every such
//! character as a visible escape (`\u{1b}`, `\n`, `\u{202e}`), so the text stays on its line and
//! means what its bytes say.

/// `text` with every control, line-separator, bidirectional-control and zero-width character
/// written as a visible escape; everything else as it is.
pub fn inert(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(c, '\n' | '\r' | '\t') {
            out.extend(c.escape_default());
        } else if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that must not reach a terminal or a line-oriented format as they are.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}'             // line and paragraph separators
            | '\u{200b}'..='\u{200f}'           // zero-width characters, LRM, RLM
            | '\u{202a}'..='\u{202e}'           // bidirectional embeddings and overrides
            | '\u{2066}'..='\u{2069}'           // bidirectional isolates
            | '\u{feff}'                        // zero-width no-break space (BOM)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(inert("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(inert("x\r\ny\u{7}"), "x\\r\\ny\\u{7}");
    }

    #[test]
    fn a_bidi_override_is_shown_not_obeyed() {
        assert_eq!(inert("ped-\u{202e}321"), "ped-\\u{202e}321");
    }

    #[test]
    fn ordinary_text_and_accents_are_left_alone() {
        assert_eq!(inert("pedido ação ✓"), "pedido ação ✓");
    }
}
