//! The soak as CI runs it: `bench/soak.py` for 3 minutes (the bench run takes 30) with the
//! binary under test. Postgres → embedded log → JDBC sink and S3 sink at 500 changes/s, a
//! fault every 50 s (the source's replication connection killed, the sink's warehouse
//! connections killed, S3 unreachable for 10 s). The script fails when a change is lost, a
//! table differs, a fault does not recover within 60 s, RSS or descriptors grow past the
//! first third's, or retention and compaction do not keep the log's disk use bounded; the
//! test also reads its JSON summary.

use std::path::PathBuf;
use std::process::Command;

use sluice_tests::Json;

#[test]
fn three_minutes_of_load_and_faults_lose_nothing_and_grow_nothing() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    // The S3 server's venv has boto3, which the script reads the bucket with.
    let venv = Command::new("bash").arg(root.join("tests/services/s3.sh")).arg("install").output().expect("run s3.sh install");
    assert!(venv.status.success(), "s3.sh install: {}", String::from_utf8_lossy(&venv.stderr));
    let python = PathBuf::from(String::from_utf8_lossy(&venv.stdout).trim()).join("bin/python");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("soak.json");
    let out = Command::new(&python)
        .arg(root.join("bench/soak.py"))
        .arg("--binary")
        .arg(sluice_tests::binary())
        .args(["--minutes", "3", "--fault-every", "50", "--json"])
        .arg(&summary)
        .current_dir(dir.path())
        .output()
        .expect("run bench/soak.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the soak failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let s: Json = serde_json::from_str(&std::fs::read_to_string(&summary).expect("the soak's summary")).unwrap();
    assert_eq!(s["ok"], true, "{stdout}");
    assert_eq!(s["s3"]["lost"], 0, "{}", s["s3"]);
    assert!(s["tables"].as_object().unwrap().values().all(|t| t["equal"] == true), "{}", s["tables"]);
    let faults = s["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 3, "three faults in three minutes: {faults:?}");
    assert!(faults.iter().all(|f| f["recovered_s"].as_f64().is_some()), "every fault recovered: {faults:?}");
    eprintln!("{}", stdout.lines().filter(|l| l.starts_with('|') || l.starts_with("changes")).collect::<Vec<_>>().join("\n"));
}
