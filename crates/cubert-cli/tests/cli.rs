//! End-to-end tests of the `cubert` binary: `info`, `demo`, `bench` and backend selection.
//!
//! Each run happens in an empty temporary directory with every `CUBERT_*` variable removed,
//! so no configuration of the machine leaks in.

use std::path::Path;
use std::process::{Command, Output};

fn cubert(dir: &Path, args: &[&str]) -> std::io::Result<Output> {
    // CUBERT_BIN points at the binary when the tests run away from the build tree
    // (scripts/gpu-test bundles both).
    let binary =
        std::env::var_os("CUBERT_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_cubert").into());
    let mut command = Command::new(binary);
    command.args(args).current_dir(dir);
    for (name, _) in std::env::vars() {
        if name.starts_with("CUBERT_") {
            command.env_remove(name);
        }
    }
    command.output()
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn info_lists_backends_devices_and_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let output = cubert(dir.path(), &["info"]).unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in [
        "cpu",
        "cuda",
        "cuda backend: ",
        "nvrtc",
        "CPU device 0",
        "max cube dim",
        "shared memory",
        "timing",
        "memory usage",
        "device handle mode",
        "file                none",
    ] {
        assert!(
            stdout.contains(expected),
            "missing `{expected}` in:\n{stdout}"
        );
    }
}

#[test]
fn demo_verifies_every_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let output = cubert(dir.path(), &["demo", "--size", "4096"]).unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("all 15 results verified"), "{stdout}");
    assert!(!stdout.contains("MISMATCH"), "{stdout}");
    for kernel in [
        "fill_i32",
        "cast_i32_f32",
        "mul_i32",
        "reduce_sum_f32",
        "matmul_f64",
    ] {
        assert!(stdout.contains(kernel), "missing `{kernel}` in:\n{stdout}");
    }
    // The profile table and the memory report follow the checks.
    assert!(stdout.contains("launches"), "{stdout}");
    assert!(stdout.contains("peak reserved"), "{stdout}");
}

#[test]
fn quick_launch_bench_writes_the_anchor_json_format() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let json_arg = json.to_str().unwrap();
    let output = cubert(
        dir.path(),
        &["bench", "--quick", "--only", "launch", "--json", json_arg],
    )
    .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["tool"], "cubert");
    assert_eq!(report["backend"], "cpu");
    assert_eq!(report["failures"], 0);
    assert!(report["device"].as_str().unwrap().contains("CPU"));
    assert!(report["date"].as_str().unwrap().ends_with('Z'));
    let figures = report["figures"].as_object().unwrap();
    for name in [
        "cubert_empty_launch_us",
        "cubert_empty_submit_us",
        "cubert_empty_launch_sync_us",
    ] {
        let figure = &figures[name];
        let value = figure["value"].as_f64().unwrap();
        assert!(value > 0.0 && value.is_finite(), "{name}: {figure}");
        assert!(
            figure["unit"].as_str().unwrap().starts_with("us"),
            "{figure}"
        );
        assert!(!figure["note"].as_str().unwrap().is_empty(), "{figure}");
    }
    // Only the launch group ran.
    assert!(
        figures.keys().all(|name| !name.contains("alloc")),
        "{figures:?}"
    );
}

/// Whether this machine can run the CUDA backend.
fn cuda_available() -> bool {
    cubert::cuda::driver_status().is_available()
}

#[test]
fn cuda_backend_runs_where_there_is_a_gpu_and_says_why_not_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let output = cubert(dir.path(), &["--backend", "cuda", "demo", "--size", "4096"]).unwrap();
    let (stdout, stderr) = text(&output);
    if cuda_available() {
        assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(stdout.contains("verified"), "{stdout}");
    } else {
        assert_eq!(output.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(
            stderr.contains("the CUDA backend can't run here")
                && stderr.contains(&cubert::cuda::driver_status().describe()),
            "{stderr}"
        );
        assert!(!stdout.contains("verified"), "{stdout}");
    }
}

#[test]
fn configured_cuda_backend_is_used_and_backend_flag_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cubert.toml"),
        "[runtime]\nbackend = \"cuda\"\n",
    )
    .unwrap();
    let output = cubert(dir.path(), &["demo", "--size", "64"]).unwrap();
    let (stdout, stderr) = text(&output);
    if cuda_available() {
        assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(stdout.contains("backend cuda"), "{stdout}");
    } else {
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("CUDA backend"), "{stderr}");
    }
    // `--backend cpu` overrides the configuration.
    let output = cubert(dir.path(), &["--backend", "cpu", "demo", "--size", "64"]).unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["demo", "--size", "0"][..],
        &["bench", "--only", "everything"],
        &["--backend", "tpu", "info"],
    ] {
        let output = cubert(dir.path(), args).unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}
