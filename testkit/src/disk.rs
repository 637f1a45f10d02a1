//! A small disk for a test: a tmpfs of a few megabytes mounted on a temporary directory, which the
//! test fills to the last byte and frees again, so PostgreSQL meets `No space left on device`
//! for real. Mounting needs root (CAP_SYS_ADMIN); without it [`SmallDisk::mount`] says so.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A mounted tmpfs; unmounted when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `megabytes` on a new directory owned by `uid:gid`, mode 0711 (others may
    /// pass through to what the owner puts there).
    pub fn mount(megabytes: u32, uid: u32, gid: u32) -> io::Result<SmallDisk> {
        let dir = tempfile::Builder::new()
            .prefix("replay-ledger-disk.")
            .tempdir_in("/tmp")?;
        let options = format!("size={megabytes}m,uid={uid},gid={gid},mode=0711");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(dir.path())
            .status()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "mounting a tmpfs on {} failed ({status}): this test needs root (CAP_SYS_ADMIN)",
                dir.path().display()
            )));
        }
        Ok(SmallDisk { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn filler(&self) -> PathBuf {
        self.dir.path().join("filler")
    }

    /// Takes every free byte; returns how many it took.
    pub fn fill(&self) -> io::Result<u64> {
        let mut file = File::create(self.filler())?;
        let block = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&block) {
                Ok(0) => return Ok(written),
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => return Ok(written), // ENOSPC
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives back what [`SmallDisk::fill`] took.
    pub fn free(&self) -> io::Result<()> {
        match fs::remove_file(self.filler()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
