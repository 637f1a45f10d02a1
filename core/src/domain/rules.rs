//! The commission rules a job may name (`rule:` in a replay job's YAML): the one in force —
//! the seed's `calcularComissao`, [`RULE_VERSION`] — and candidate rules finance may want to try
//! on all of history before anyone changes the rule in force. Each has a name (what the YAML
//! says) and a version (what an approval binds: a change to a rule's computation changes its
//! version, so an approval given for the old computation no longer holds).
//!
//! A candidate is only ever simulated: its run writes a diff against today's table and nothing
//! else. Putting one in force is a release (the live consumer, `verify` and every replay compute
//! with the rule in force), not a job setting.
//!
//! - `teto-10pct` — the percentage capped at 10 %: `min(percentual, 10)`, then the seed's
//!   computation and rounding unchanged.
//! - `arredondamento-bancario` — the seed's computation, with halves rounded to the even
//!   neighbour (banker's rounding) instead of `Math.round`'s toward +∞: `0.5 → 0`, `1.5 → 2`,
//!   `-0.5 → 0`, `2.5 → 2`.
//!
//! Both upcast older payload shapes first, as the rule in force does.

use serde_json::Value;

use super::{calcular, js_math_round, upcast, InvalidPayload, RULE_VERSION};

/// A commission rule, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Rule {
    /// `calcularComissao`: the seed's rule, in force.
    #[default]
    CalcularComissao,
    /// `teto-10pct`: the percentage capped at 10 %.
    Teto10Pct,
    /// `arredondamento-bancario`: halves rounded to even.
    ArredondamentoBancario,
}

impl Rule {
    /// The rule in force: what the live consumer, `verify`, `explain` and every replay use.
    pub const IN_FORCE: Rule = Rule::CalcularComissao;
    /// Every rule, the one in force first.
    pub const ALL: [Rule; 3] = [
        Rule::CalcularComissao,
        Rule::Teto10Pct,
        Rule::ArredondamentoBancario,
    ];

    /// The name a job's `rule:` gives.
    pub fn name(self) -> &'static str {
        match self {
            Rule::CalcularComissao => "calcularComissao",
            Rule::Teto10Pct => "teto-10pct",
            Rule::ArredondamentoBancario => "arredondamento-bancario",
        }
    }

    /// Name and version: what an approval binds.
    pub fn version(self) -> &'static str {
        match self {
            Rule::CalcularComissao => RULE_VERSION,
            Rule::Teto10Pct => "teto-10pct/1",
            Rule::ArredondamentoBancario => "arredondamento-bancario/1",
        }
    }

    /// The rule named `name`.
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether this is the rule in force (a real run may apply it).
    pub fn in_force(self) -> bool {
        self == Rule::IN_FORCE
    }

    /// The commission a `pedido.pago` payload implies under this rule, whatever its shape:
    /// `Ok((cents, upcast))`.
    pub fn commission_of(self, payload: &Value) -> Result<(i64, bool), InvalidPayload> {
        let current = upcast::to_current(payload)?;
        let upcast = matches!(current, std::borrow::Cow::Owned(_));
        let cents = match self {
            Rule::CalcularComissao => calcular(&current, None, js_math_round)?,
            Rule::Teto10Pct => calcular(&current, Some(10.0), js_math_round)?,
            Rule::ArredondamentoBancario => calcular(&current, None, round_half_even)?,
        };
        Ok((cents, upcast))
    }
}

/// Halves to the even neighbour; `-0` stored as `0`, as `Math.round`'s is.
fn round_half_even(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    x.round_ties_even() + 0.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cents(rule: Rule, valor: i64, percentual: f64) -> i64 {
        let payload = json!({"valorCentavos": valor, "percentual": percentual});
        rule.commission_of(&payload).unwrap().0
    }

    #[test]
    fn the_rule_in_force_is_the_seeds_and_keeps_its_version() {
        assert_eq!(Rule::IN_FORCE.version(), RULE_VERSION);
        assert_eq!(cents(Rule::IN_FORCE, 12_345, 2.5), 309);
        assert_eq!(cents(Rule::IN_FORCE, 5, 10.0), 1);
    }

    #[test]
    fn the_cap_limits_the_percentage_to_ten_and_nothing_else() {
        assert_eq!(cents(Rule::Teto10Pct, 10_000, 15.0), 1_000);
        assert_eq!(cents(Rule::Teto10Pct, 10_000, 5.0), 500);
        assert_eq!(cents(Rule::Teto10Pct, 12_345, 2.5), 309);
    }

    #[test]
    fn bankers_rounding_sends_halves_to_the_even_neighbour() {
        assert_eq!(cents(Rule::ArredondamentoBancario, 5, 10.0), 0); // 0.5
        assert_eq!(cents(Rule::ArredondamentoBancario, 15, 10.0), 2); // 1.5
        assert_eq!(cents(Rule::ArredondamentoBancario, 25, 10.0), 2); // 2.5
        assert_eq!(cents(Rule::ArredondamentoBancario, -5, 10.0), 0); // -0.5
        assert_eq!(cents(Rule::ArredondamentoBancario, 12_345, 2.5), 309); // 308.625
    }

    #[test]
    fn every_rule_is_found_by_its_name_and_an_unknown_name_by_none() {
        for rule in Rule::ALL {
            assert_eq!(Rule::from_name(rule.name()), Some(rule));
        }
        assert_eq!(Rule::from_name("calcularcomissao"), None);
    }

    #[test]
    fn older_payload_shapes_are_upcast_by_every_rule() {
        let older = json!({"valor": "159.90", "percentual": "15"});
        assert_eq!(
            Rule::Teto10Pct.commission_of(&older).unwrap(),
            (1_599, true)
        );
    }
}
