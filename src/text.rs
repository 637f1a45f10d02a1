//! Archive text made inert for a terminal (DESIGN.md invariant 13): an id or any text derived
//! from the archive or typed by someone else is printed with its control characters, bidi
//! controls and line separators escaped, so it stays on its line and cannot drive the terminal or
//! reorder what surrounds it (`evt-1\u{202e}…` would show reversed).

/// Whether `c` must never reach a terminal as itself: C0 and C1 controls (and DEL), the Unicode
/// bidirectional controls (embeddings, overrides, isolates, marks) and the line and paragraph
/// separators.
pub fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

/// `text` with every [`is_hazard`] character escaped as Rust writes it (`\n`, `\u{1b}`,
/// `\u{202e}`); anything else, non-ASCII letters included, is kept.
pub fn inert(text: &str) -> String {
    if !text.chars().any(is_hazard) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hazard(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(
            inert("evt-1\u{1b}[2J\n\u{202e}fdp.exe\u{85}"),
            "evt-1\\u{1b}[2J\\n\\u{202e}fdp.exe\\u{85}"
        );
    }

    #[test]
    fn ordinary_text_is_kept_as_it_is() {
        assert_eq!(
            inert("pedido ação 42:notificar-vendedor"),
            "pedido ação 42:notificar-vendedor"
        );
    }
}
