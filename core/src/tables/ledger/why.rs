//! Why an effect is `incerto` (`efeito_aplicado.motivo_incerto`, with `status_http_incerto` for
//! an HTTP answer): what the human who triages the review queue needs first — a timeout or a
//! connection cut mid-call may well have gone out, a refused connection almost surely did not.

use crate::shared::words::db_words;

db_words! {
    /// The reason an effect's outcome is unknown.
    pub enum Reason("reason for incerto") {
        /// The provider did not answer within the type's `timeout`.
        Timeout = "tempo-esgotado",
        /// The provider answered an HTTP status that is not a success (with the status).
        HttpStatus = "resposta-http",
        /// The provider answered a redirect, which is never followed.
        Redirect = "redirecionamento",
        /// No connection could be made (refused, TLS): most likely not sent.
        ConnectFailed = "falha-de-conexao",
        /// The connection was cut while the call was under way.
        ConnectionCut = "conexao-interrompida",
        /// Any other failure the provider reported.
        ProviderError = "erro-do-provedor",
        /// The process died with the call in flight (settled by the rerun or the sweeper).
        CrashInFlight = "queda-durante-chamada",
        /// A retry would come after the provider's `dedup_window`: it may have forgotten the key.
        PastDedupWindow = "fora-da-janela-de-dedup",
        /// The effect's type is not declared in `effects.yaml` any more: nobody can retake it.
        UndeclaredType = "tipo-nao-declarado",
        /// The archived event is gone or no longer asks for this effect: it cannot be rebuilt.
        EventGone = "evento-indisponivel",
    }
}

/// A [`Reason`], and the HTTP status when the reason is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Why {
    pub reason: Reason,
    pub http_status: Option<u16>,
}

impl From<Reason> for Why {
    fn from(reason: Reason) -> Self {
        Why {
            reason,
            http_status: None,
        }
    }
}

impl Why {
    /// From a failed call's error class, as providers name them (`timeout`, `http 503`,
    /// `connect`, `transport`, `redirect`; the mailer's `network`, `refused`, …).
    pub fn of_failure(class: &str) -> Why {
        if let Some(status) = class
            .strip_prefix("http ")
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|s| (100..=599).contains(s))
        {
            return Why {
                reason: Reason::HttpStatus,
                http_status: Some(status),
            };
        }
        Why::from(match class {
            "timeout" => Reason::Timeout,
            "redirect" => Reason::Redirect,
            "connect" | "refused" => Reason::ConnectFailed,
            "transport" | "body" | "network" => Reason::ConnectionCut,
            _ => Reason::ProviderError,
        })
    }
}

/// The two columns of `why`, as arrays to bind for `unnest`.
pub(super) fn columns(why: &[Why]) -> (Vec<Reason>, Vec<Option<i32>>) {
    why.iter()
        .map(|w| (w.reason, w.http_status.map(i32::from)))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_status_is_kept_with_its_reason() {
        let why = Why::of_failure("http 500");

        assert_eq!(why.reason, Reason::HttpStatus);
        assert_eq!(why.http_status, Some(500));
    }

    #[test]
    fn the_classes_of_the_providers_map_to_their_reasons() {
        for (class, reason) in [
            ("timeout", Reason::Timeout),
            ("connect", Reason::ConnectFailed),
            ("transport", Reason::ConnectionCut),
            ("network", Reason::ConnectionCut),
            ("redirect", Reason::Redirect),
            ("http teapot", Reason::ProviderError),
            ("smtp 554", Reason::ProviderError),
        ] {
            assert_eq!(Why::of_failure(class), Why::from(reason), "{class}");
        }
    }
}
