//! Configuration errors: each one names the file and, where known, the line and column.

use std::fmt;
use std::path::{Path, PathBuf};

/// One configuration error. Display: `file:line:col: message`, or `file: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    pub message: String,
}

impl ConfigError {
    pub fn new(file: &Path, position: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_path_buf(),
            position,
            message: one_line(&message.into()),
        }
    }
}

/// `text` with its control characters (and Unicode line separators) escaped: a message may quote
/// a value from the file or the environment, and must stay on its one line of `check`'s output
/// without driving the terminal.
fn one_line(text: &str) -> String {
    crate::shared::text::inert(text)
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = one_line(&self.file.display().to_string());
        match self.position {
            Some((line, col)) => write!(f, "{file}:{line}:{col}: {}", self.message),
            None => write!(f, "{file}: {}", self.message),
        }
    }
}

/// Every error found in a jobs directory. Display: one error per line.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
