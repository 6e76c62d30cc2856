//! The binary answers on its own. (Having an integration test also makes `cargo test` build
//! the `sluice` executable with the workspace's feature set, which the end-to-end tests in
//! `tests/` then drive.)

use std::process::Command;

#[test]
fn prints_its_version_and_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("sluice {}", env!("CARGO_PKG_VERSION")));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).arg("no-such-command").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command 'no-such-command'"));
}
