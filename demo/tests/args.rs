//! The demo program's command line, run as the built binary. (These tests are also what has cargo
//! build `replay-ledger-demo` beside `replay-ledger` during the README's test command: the root
//! package's tests run `replay-ledger demo`, which runs this program from its own directory.)

use std::process::Command;

const DEMO: &str = env!("CARGO_BIN_EXE_replay-ledger-demo");

#[test]
fn help_says_what_the_demo_does_and_where_its_database_comes_from() {
    let output = Command::new(DEMO)
        .arg("--help")
        .output()
        .expect("run --help");
    let text = String::from_utf8_lossy(&output.stdout);

    assert!(output.status.success(), "{output:?}");
    for said in [
        "--events",
        "--console",
        "--console-addr",
        "DATABASE_URL",
        "throwaway cluster",
    ] {
        assert!(text.contains(said), "--help names {said}:\n{text}");
    }
}

#[test]
fn a_bad_option_exits_2_naming_it_before_touching_any_database() {
    // An unreachable server: were the arguments not checked first, this would fail on connect.
    let output = Command::new(DEMO)
        .args(["--events", "many"])
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .expect("run with a bad --events");
    let text = String::from_utf8_lossy(&output.stderr);

    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(text.contains("--events"), "{text}");
    assert!(!text.contains("connect"), "{text}");
}
