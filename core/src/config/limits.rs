//! Bounds on a configuration file, checked before the YAML parser sees it. Job files are a few
//! kilobytes; these bounds are far above that and keep a hostile or broken file (a huge one, or
//! flow collections nested thousands deep, which the YAML parser handles in time quadratic in
//! the depth) from stalling `check`, `run` or `serve`.
//!
//! Only a regular file (or a symlink to one) is read: a FIFO would block the open, `/dev/zero`
//! would read forever, a directory or a dangling symlink is a mistake. The path is checked before
//! it is opened (opening a device may do something), and the opened file again (it may have been
//! replaced in between), the open itself not waiting for a FIFO's writer.

use std::io::Read;
use std::path::Path;

/// The largest configuration file read.
pub(super) const MAX_FILE_BYTES: u64 = 1 << 20;

/// The most `[` and `{` one file may hold (an upper bound on its flow nesting that no quoting
/// can hide: every level opens with one).
pub(super) const MAX_FLOW_OPENERS: usize = 1_000;

/// Why a file was refused: the 1-based line and column, when one character is to blame.
pub(super) type Refusal = (Option<(usize, usize)>, String);

/// Reads a regular file of at most [`MAX_FILE_BYTES`] (never more from it, whatever it is).
pub(super) fn read_bounded(path: &Path) -> std::io::Result<Result<String, Refusal>> {
    let file = match open_regular(path)? {
        Ok(file) => file,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        let message = format!(
            "file larger than {} KiB: a job or effects file is a few kilobytes",
            MAX_FILE_BYTES / 1024
        );
        return Ok(Err((None, message)));
    }
    // A UTF-8 byte order mark (some Windows editors write one) is no content: YAML would read it
    // as the start of a second document.
    if bytes.starts_with("\u{feff}".as_bytes()) {
        bytes.drain(..3);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(check_text(&text).map(|()| text)),
        Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
    }
}

/// Opens `path` if it is a regular file or a symlink to one; refuses anything else unopened.
fn open_regular(path: &Path) -> std::io::Result<Result<std::fs::File, Refusal>> {
    let kind = match std::fs::metadata(path) {
        Ok(meta) => meta.file_type(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                let message = "a symlink to nothing (its target does not exist): a job file must \
                               be a regular file or a symlink to one";
                return Ok(Err((None, message.to_owned())));
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    if let Some(refusal) = not_regular(kind) {
        return Ok(Err(refusal));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        (nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits(),
    );
    let file = options.open(path)?;
    Ok(match not_regular(file.metadata()?.file_type()) {
        Some(refusal) => Err(refusal),
        None => Ok(file),
    })
}

/// The refusal of a file type other than a regular file.
fn not_regular(kind: std::fs::FileType) -> Option<Refusal> {
    if kind.is_file() {
        return None;
    }
    let what = if kind.is_dir() {
        "a directory"
    } else {
        special_kind(kind)
    };
    let message = format!(
        "not a regular file but {what}: a job file must be a regular file or a symlink to one"
    );
    Some((None, message))
}

#[cfg(unix)]
fn special_kind(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: std::fs::FileType) -> &'static str {
    "a special file"
}

/// Refuses a text with more than [`MAX_FLOW_OPENERS`] flow-collection openers, naming the first
/// one over the limit.
pub(super) fn check_text(text: &str) -> Result<(), Refusal> {
    let mut openers = 0;
    for (line_no, line) in text.split('\n').enumerate() {
        for (col, c) in line.chars().enumerate() {
            if matches!(c, '[' | '{') {
                openers += 1;
                if openers > MAX_FLOW_OPENERS {
                    let message = format!(
                        "more than {MAX_FLOW_OPENERS} `[` and `{{` in one file: flow collections \
                         nested this deep are refused (the YAML parser slows down quadratically)"
                    );
                    return Err((Some((line_no + 1, col + 1)), message));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_flow_collections_pass() {
        assert!(check_text("headers: { Authorization: \"Bearer ${T}\" }\nto: [a@b]\n").is_ok());
    }

    #[test]
    fn the_first_opener_over_the_limit_is_named() {
        let text = format!("name: x\nk: {}", "[".repeat(MAX_FLOW_OPENERS + 5));
        let (position, message) = check_text(&text).unwrap_err();
        assert_eq!(position, Some((2, MAX_FLOW_OPENERS + 4)));
        assert!(message.contains("nested"), "{message}");
    }

    #[test]
    fn a_file_over_the_size_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, vec![b'#'; MAX_FILE_BYTES as usize + 1]).unwrap();
        let (position, message) = read_bounded(&path).unwrap().unwrap_err();
        assert_eq!(position, None);
        assert!(message.contains("larger than 1024 KiB"), "{message}");
    }
}
