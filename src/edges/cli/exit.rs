//! One way out: every command returns `Result<(), Failure>`, and [`Failure::code`] is the one map
//! from what went wrong to the exit status of the contract — 2 invalid input or configuration
//! (a job of the wrong kind included), 1 refused or failed, 130 stopped by a signal, 3 differences
//! found. `main` prints a failure once, as inert text, and exits with its code; no command decides
//! an exit status itself.

use std::fmt::Display;
use std::process::ExitCode;

use replay_ledger_core::config::{ConfigErrors, Job};
use replay_ledger_core::tables::db::ConnectError;

/// The class of a failure, which gives its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 2: the input or the configuration can never work as given.
    Invalid,
    /// 1: refused (an approval that no longer holds, a report not accepted) or failed (a database
    /// lost past every retry, an effect that kept failing).
    Failed,
    /// 130: stopped by SIGINT or SIGTERM between batches; a rerun resumes.
    Interrupted,
    /// 3: a reconciliation found differences.
    Differences,
}

impl Class {
    /// Every class, for the reference page of exit statuses (`docs/src/commands.md`), which a test
    /// holds equal to these.
    pub const ALL: [Class; 4] = [
        Class::Invalid,
        Class::Failed,
        Class::Interrupted,
        Class::Differences,
    ];

    /// The exit status of the contract for this class.
    pub fn status(self) -> u8 {
        match self {
            Class::Invalid => 2,
            Class::Failed => 1,
            Class::Interrupted => 130,
            Class::Differences => 3,
        }
    }
}

/// Why a command did not succeed: its class, and what to tell the operator (`None` when the
/// command already said it, e.g. a run's summary before its interruption).
#[derive(Debug)]
pub struct Failure {
    pub class: Class,
    pub error: Option<anyhow::Error>,
}

impl Failure {
    /// Input or configuration that can never work as given (exit 2).
    pub fn invalid(message: impl Display) -> Failure {
        Failure::new(Class::Invalid, message)
    }

    /// Refused or failed (exit 1).
    pub fn failed(message: impl Display) -> Failure {
        Failure::new(Class::Failed, message)
    }

    /// A failure of `class` the command has already told (nothing more is printed).
    pub fn said(class: Class) -> Failure {
        Failure { class, error: None }
    }

    /// A job given to a command that needs another kind of job (exit 2).
    pub fn wrong_kind(job: &Job, wanted: &str, why: &str) -> Failure {
        Failure::invalid(format_args!(
            "job {} is a {} job, not a {wanted} one: {why}",
            job.name,
            job.kind.label()
        ))
    }

    fn new(class: Class, message: impl Display) -> Failure {
        Failure {
            class,
            error: Some(anyhow::anyhow!("{message}")),
        }
    }

    /// The exit status of the contract for this failure.
    pub fn code(&self) -> ExitCode {
        ExitCode::from(self.class.status())
    }
}

/// An error raised with `?` is classified by what it is: a configuration error, or a database URL
/// that can never work, is invalid input; anything else a failure.
impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(err: E) -> Failure {
        let error: anyhow::Error = err.into();
        let invalid = error.downcast_ref::<ConfigErrors>().is_some()
            || error
                .downcast_ref::<ConnectError>()
                .is_some_and(ConnectError::is_bad_url);
        Failure {
            class: if invalid {
                Class::Invalid
            } else {
                Class::Failed
            },
            error: Some(error),
        }
    }
}

/// What a command returns.
pub type Outcome = Result<(), Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_the_contracts_exit_status() {
        let codes = [
            (Class::Invalid, ExitCode::from(2)),
            (Class::Failed, ExitCode::from(1)),
            (Class::Interrupted, ExitCode::from(130)),
            (Class::Differences, ExitCode::from(3)),
        ];
        for (class, code) in codes {
            assert_eq!(Failure::said(class).code(), code, "{class:?}");
        }
    }

    #[test]
    fn a_configuration_error_raised_with_a_question_mark_is_invalid_input() {
        let config = || -> Result<(), ConfigErrors> { Err(ConfigErrors(Vec::new())) };
        let run = || -> Outcome { Ok(config()?) };

        assert_eq!(run().unwrap_err().class, Class::Invalid);
    }

    #[test]
    fn any_other_error_raised_with_a_question_mark_is_a_failure() {
        let lost = || -> Result<(), sqlx::Error> { Err(sqlx::Error::PoolClosed) };
        let run = || -> Outcome { Ok(lost()?) };

        assert_eq!(run().unwrap_err().class, Class::Failed);
    }
}
