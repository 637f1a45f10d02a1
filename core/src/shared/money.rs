//! Money as finance reads it: BRL from integer cents (`R$ 1.234,56`), never through floating point.

/// `R$ 1.234,56`; negative amounts as `-R$ 1.234,56`.
pub fn brl(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}R$ {},{:02}", group_thousands(abs / 100), abs % 100)
}

/// A difference with its sign always shown: `+R$ 38.211,40`, `-R$ 0,50`, `R$ 0,00`.
pub fn brl_signed(cents: i64) -> String {
    if cents > 0 {
        format!("+{}", brl(cents))
    } else {
        brl(cents)
    }
}

/// `4812` → `4.812`, as counts are written in Portuguese.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('.');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cents_render_as_reais_with_thousands_separators() {
        assert_eq!(brl(0), "R$ 0,00");
        assert_eq!(brl(5), "R$ 0,05");
        assert_eq!(brl(123_456), "R$ 1.234,56");
        assert_eq!(brl(-50), "-R$ 0,50");
        assert_eq!(brl(i64::MIN), "-R$ 92.233.720.368.547.758,08");
        assert_eq!(brl_signed(3_821_140), "+R$ 38.211,40");
        assert_eq!(group_thousands(4812), "4.812");
    }
}
