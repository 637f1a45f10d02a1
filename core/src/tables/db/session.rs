//! What every session this program opens asks of the server, whoever opens it (worker, consumer,
//! sweeper, scheduler, console): the server gives up a silent client in about 30 s instead of
//! the operating system's two hours, so the advisory locks of a host cut off by the network are
//! freed and another process can take its executions.
//!
//! The four settings are PostgreSQL's per-session `tcp_keepalives_idle`,
//! `tcp_keepalives_interval`, `tcp_keepalives_count` and `tcp_user_timeout`, sent as startup
//! options. Each can be changed by an environment variable, or set to `default` to leave the
//! server's own value:
//!
//! | variable | default |
//! | --- | --- |
//! | `REPLAY_LEDGER_TCP_KEEPALIVES_IDLE` | `10s` |
//! | `REPLAY_LEDGER_TCP_KEEPALIVES_INTERVAL` | `5s` |
//! | `REPLAY_LEDGER_TCP_KEEPALIVES_COUNT` | `3` |
//! | `REPLAY_LEDGER_TCP_USER_TIMEOUT` | `30s` |
//!
//! The client's own sockets keep the operating system's keepalive: sqlx 0.8 does not expose its
//! socket. The client side is covered by the ownership lease instead (the execution lock's
//! lease, which builds on this module: it is not named here, so the dependency goes one way).

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

/// The variables of the session settings with their defaults, in order: what the edge's settings
/// read and list.
pub fn variables() -> impl Iterator<Item = (&'static str, &'static str)> {
    SETTINGS.iter().map(|s| (s.variable, s.default))
}

/// One server setting: its name, the variable that changes it, its default, and its unit.
struct Setting {
    name: &'static str,
    variable: &'static str,
    default: &'static str,
    unit: Unit,
}

#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Milliseconds,
    Count,
}

const SETTINGS: [Setting; 4] = [
    Setting {
        name: "tcp_keepalives_idle",
        variable: "REPLAY_LEDGER_TCP_KEEPALIVES_IDLE",
        default: "10s",
        unit: Unit::Seconds,
    },
    Setting {
        name: "tcp_keepalives_interval",
        variable: "REPLAY_LEDGER_TCP_KEEPALIVES_INTERVAL",
        default: "5s",
        unit: Unit::Seconds,
    },
    Setting {
        name: "tcp_keepalives_count",
        variable: "REPLAY_LEDGER_TCP_KEEPALIVES_COUNT",
        default: "3",
        unit: Unit::Count,
    },
    Setting {
        name: "tcp_user_timeout",
        variable: "REPLAY_LEDGER_TCP_USER_TIMEOUT",
        default: "30s",
        unit: Unit::Milliseconds,
    },
];

/// The value to send for `raw` (`None`: leave the server's default), or why it cannot be used.
fn value_of(setting: &Setting, raw: &str) -> Result<Option<u64>, String> {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case("default") {
        return Ok(None);
    }
    let bad = |why: String| format!("{}={raw:?}: {why}", setting.variable);
    let value = match setting.unit {
        Unit::Count => raw
            .parse::<u64>()
            .map_err(|e| bad(format!("{e} (a whole number, or `default`)")))?,
        Unit::Seconds | Unit::Milliseconds => {
            let d: Duration = humantime::parse_duration(raw)
                .map_err(|e| bad(format!("{e} (e.g. `10s`, or `default`)")))?;
            match setting.unit {
                Unit::Seconds => d.as_secs(),
                _ => d.as_millis() as u64,
            }
        }
    };
    if value > i32::MAX as u64 {
        return Err(bad("too large".into()));
    }
    Ok(Some(value))
}

/// The startup options every session sends, from the variables the edge installed
/// ([`crate::shared::process`]; defaults when unset).
pub fn server_settings() -> Result<Vec<(&'static str, u64)>, String> {
    server_settings_of(&crate::shared::process::settings().session)
}

/// The startup options for these variables (by name; a missing one takes its default), or why
/// one cannot be used.
pub fn server_settings_of(
    given: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(&'static str, u64)>, String> {
    let mut out = Vec::new();
    for setting in &SETTINGS {
        let raw = given
            .get(setting.variable)
            .map_or(setting.default, String::as_str);
        if let Some(value) = value_of(setting, raw)? {
            out.push((setting.name, value));
        }
    }
    Ok(out)
}

/// `options` with the session settings of [`server_settings`].
pub fn tuned(options: PgConnectOptions) -> Result<PgConnectOptions, String> {
    let settings = server_settings()?;
    if settings.is_empty() {
        return Ok(options);
    }
    Ok(options.options(settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_give_up_a_silent_peer_in_about_thirty_seconds() {
        let got: Vec<_> = SETTINGS
            .iter()
            .map(|s| value_of(s, s.default).unwrap().unwrap())
            .collect();
        assert_eq!(got, vec![10, 5, 3, 30_000]);
        let (idle, interval, count) = (got[0], got[1], got[2]);
        assert!(idle + interval * count <= 30);
    }

    #[test]
    fn a_setting_may_be_left_to_the_server_or_refused_naming_its_variable() {
        assert_eq!(value_of(&SETTINGS[0], "default"), Ok(None));
        assert_eq!(value_of(&SETTINGS[3], "2s"), Ok(Some(2000)));
        let said = value_of(&SETTINGS[2], "many").unwrap_err();
        assert!(
            said.starts_with("REPLAY_LEDGER_TCP_KEEPALIVES_COUNT"),
            "{said}"
        );
    }
}
