//! End-to-end tests of `cubert bench tune` on the CPU: the table and the JSON report show
//! the tuned variant against the default per shape, and bad shapes are usage errors.
//!
//! Runs happen in an empty temporary directory with every `CUBERT_*` variable removed.

mod common;

use common::cubert;

#[test]
fn bench_tune_reports_tuned_against_default_per_shape() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tune.json");
    let output = cubert(
        dir.path(),
        &[
            "--backend",
            "cpu",
            "bench",
            "tune",
            "--quick",
            "--level",
            "minimal",
            "--shapes",
            "32x32x32,48x16x40",
            "--verbose",
            "--json",
            json.to_str().unwrap(),
        ],
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in [
        "tuned variant",
        "speed-up",
        "tuning ms",
        "32x32x32",
        "48x16x40",
        "# candidates for 48x16x40",
        "all checks passed",
    ] {
        assert!(stdout.contains(expected), "missing `{expected}`:\n{stdout}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["backend"], "cpu");
    assert_eq!(report["level"], "minimal");
    let shapes = report["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 2);
    for shape in shapes {
        assert_eq!(shape["default_variant"], "default");
        let tuned = shape["tuned_variant"].as_str().unwrap();
        let candidates = shape["candidates"].as_array().unwrap();
        assert!(
            candidates
                .iter()
                .any(|c| c["name"] == tuned && c["outcome"] == "measured"),
            "the tuned variant was measured: {shape}"
        );
        assert!(shape["speedup"].as_f64().unwrap() > 0.0);
        assert!(shape["tuned_seconds"].as_f64().unwrap() > 0.0);
        assert!(shape["benchmark_runs"].as_u64().unwrap() > 0);
    }
    assert_eq!(report["failures"].as_array().unwrap().len(), 0);
}

#[test]
fn bench_tune_refuses_a_malformed_shape() {
    let dir = tempfile::tempdir().unwrap();
    let output = cubert(
        dir.path(),
        &["--backend", "cpu", "bench", "tune", "--shapes", "32x32"],
    )
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("MxKxN"));
}
