//! Archive text made inert for a terminal (invariant `inert-text`): an id or any text derived
//! from the archive or typed by someone else is printed with its control characters, bidi
//! controls and line separators escaped, so it stays on its line and cannot drive the terminal or
//! reorder what surrounds it (`evt-1\u{202e}…` would show reversed).

/// Compares two identifiers as people read them: runs of digits by their value, the rest by
/// character, so `ped-2` comes before `ped-10`. Equal readings (`ped-02`, `ped-2`) fall back to
/// plain order, so the order is total and stable.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let run = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (n, m) = (run(x), run(y));
                let trim = |s: &[u8]| {
                    let z = s.iter().take_while(|c| **c == b'0').count();
                    s[z..].to_vec()
                };
                let (dx, dy) = (trim(&x[..n]), trim(&y[..m]));
                let by = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(&dy));
                if by != Ordering::Equal {
                    return by;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(q);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

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

/// `text` as one segment of a URL's path: unreserved characters (and `:`) kept, every other
/// byte percent-encoded, so an id cannot add a segment, a query or a fragment.
pub fn url_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
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
    fn a_url_segment_cannot_add_a_segment_a_query_or_a_fragment() {
        assert_eq!(url_segment("replay-x:simulacao"), "replay-x:simulacao");
        assert_eq!(url_segment("a/b?c#d é"), "a%2Fb%3Fc%23d%20%C3%A9");
    }

    #[test]
    fn ordinary_text_is_kept_as_it_is() {
        assert_eq!(
            inert("pedido ação 42:notificar-vendedor"),
            "pedido ação 42:notificar-vendedor"
        );
    }
}

#[cfg(test)]
mod natural_tests {
    use super::natural_cmp;

    #[test]
    fn ids_sort_as_people_read_them() {
        let mut ids = vec![
            "ped-10", "ped-2", "ped-1", "ped-100", "abc", "ped-02", "ped-9x", "ped-9",
        ];
        ids.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            ids,
            ["abc", "ped-1", "ped-02", "ped-2", "ped-9", "ped-9x", "ped-10", "ped-100"]
        );
    }
}
