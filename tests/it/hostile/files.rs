//! Odd entries in the jobs directory: a `*.yaml` that is a dangling symlink, a FIFO, a symlink to
//! a device or a directory is an error naming its path (never skipped, never opened so that it
//! blocks or reads forever); symlinks to regular files work, as Kubernetes mounts ConfigMaps.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use crate::helpers::*;

/// Far above what `check` of a small directory takes; far below a blocked read.
const CHECK_LIMIT: Duration = Duration::from_secs(30);

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// Makes an odd entry at a path.
type MakeEntry = fn(&Path);

/// `check` of `jobs`, bounded by [`CHECK_LIMIT`].
async fn check(db: &TestDb, jobs: &Path) -> std::process::Output {
    let mut cmd = command(&db.url, jobs);
    cmd.arg("check");
    tokio::time::timeout(CHECK_LIMIT, output_of(cmd, "replay-ledger check"))
        .await
        .unwrap_or_else(|_| panic!("check of {} blocked", jobs.display()))
}

#[tokio::test]
async fn a_dangling_symlink_a_fifo_a_device_or_a_directory_named_yaml_is_an_error_naming_it() {
    let db = TestDb::new().await;
    let odd: [(&str, MakeEntry); 4] = [
        ("gone.yaml", |p| {
            symlink("/nonexistent/replay-ledger/x.yaml", p).expect("symlink");
        }),
        ("pipe.yaml", mkfifo),
        ("zero.yaml", |p| symlink("/dev/zero", p).expect("symlink")),
        ("dir.yaml", |p| std::fs::create_dir(p).expect("mkdir")),
    ];
    for (name, make) in odd {
        for file in [name.to_string(), "effects.yaml".to_string()] {
            let jobs = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
            let path = jobs.path().join(&file);
            let _ = std::fs::remove_file(&path);
            make(&path);

            let out = check(&db, jobs.path()).await;

            assert_eq!(
                out.status.code(),
                Some(2),
                "{name} as {file}: {}",
                stdout(&out)
            );
            let err = stderr(&out);
            assert!(
                err.starts_with(&format!("{}: ", path.display())),
                "{name} as {file}:\n{err}"
            );
        }
    }
}

#[tokio::test]
async fn symlinked_files_load_as_kubernetes_mounts_a_config_map() {
    let db = TestDb::new().await;
    let source = jobs_dir("http://127.0.0.1:9/", &JobSpec::default());
    let jobs = tempfile::tempdir().expect("tempdir");
    // `x.yaml -> ..data/x.yaml`, `..data -> ..2026_10_14_00_00_00.1`: the kubelet's layout.
    let version = jobs.path().join("..2026_10_14_00_00_00.1");
    std::fs::create_dir(&version).expect("mkdir");
    for entry in std::fs::read_dir(source.path()).expect("read the source") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), version.join(entry.file_name())).expect("copy");
        symlink(
            Path::new("..data").join(entry.file_name()),
            jobs.path().join(entry.file_name()),
        )
        .expect("symlink");
    }
    symlink("..2026_10_14_00_00_00.1", jobs.path().join("..data")).expect("symlink");

    let out = check(&db, jobs.path()).await;

    assert_success(&out, "check of a ConfigMap mount");
    assert_eq!(stdout(&out).trim(), "ok: 1 jobs");
}
