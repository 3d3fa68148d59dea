//! End-to-end tests of the `cubert` binary: `info`, `demo`, `bench` and backend selection.
//!
//! Each run happens in an empty temporary directory with every `CUBERT_*` variable removed,
//! so no configuration of the machine leaks in. The fixtures (`tests/fixtures/`: peer
//! figure files of an H200 run and a small allocation trace) are compiled in and written
//! into that directory, so the tests also run away from the source tree.

use std::path::Path;
use std::process::Output;

mod common;

use common::cubert;

/// Writes the fixture `name` into `dir` and returns its path as a string.
fn fixture(dir: &Path, name: &str) -> std::io::Result<String> {
    let text = match name {
        "bench.json" => include_str!("fixtures/bench.json"),
        "peers.json" => include_str!("fixtures/peers.json"),
        "native.json" => include_str!("fixtures/native.json"),
        "alloc_trace_small.txt" => include_str!("fixtures/alloc_trace_small.txt"),
        _ => return Err(std::io::Error::other(format!("no fixture {name}"))),
    };
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path.to_string_lossy().into_owned())
}

fn read_json(path: &Path) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
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
        "wgpu backend: ",
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
fn quick_launch_bench_writes_the_anchor_json_format_and_compares() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let json_arg = json.to_str().unwrap();
    let native = fixture(dir.path(), "native.json").unwrap();
    let output = cubert(
        dir.path(),
        &[
            "bench",
            "--quick",
            "--only",
            "launch",
            "--json",
            json_arg,
            "--compare",
            &native,
        ],
    )
    .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    // The CPU backend has no graphs: said once, not a failure.
    assert!(
        stdout.contains("# not measured: cubert_graph_per_kernel_us, ")
            && stdout.contains("has no graphs"),
        "{stdout}"
    );
    // The comparison with the peer file follows the run.
    assert!(
        stdout.contains("native_empty_launch_us") && stdout.contains("best peer"),
        "{stdout}"
    );
    // No sweep ran: no plot.
    assert!(!dir.path().join("bench.transfer_sweep.svg").exists());
    let report = read_json(&json).unwrap();
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
    assert!(!figures.contains_key("cubert_graph_per_kernel_us"));
    assert_eq!(report["series"], serde_json::json!({}));
}

#[test]
fn trace_bench_replays_a_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture(dir.path(), "alloc_trace_small.txt").unwrap();
    let json = dir.path().join("trace.json");
    let output = cubert(
        dir.path(),
        &[
            "bench",
            "--only",
            "trace",
            "--trace",
            &trace,
            "--json",
            json.to_str().unwrap(),
        ],
    )
    .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("10 events, 5 allocations"), "{stdout}");
    let report = read_json(&json).unwrap();
    let figures = &report["figures"];
    let value = |name: &str| figures[name]["value"].as_f64().unwrap();
    let live = value("cubert_trace_peak_live");
    assert!(
        (live * (1u64 << 30) as f64 - 35_655_680.0).abs() < 1.0,
        "{live}"
    );
    assert_eq!(figures["cubert_trace_peak_live"]["unit"], "GiB");
    let ratio = value("cubert_trace_reserved_over_live");
    assert!((1.0..100.0).contains(&ratio), "{ratio}");
    assert!((value("cubert_trace_peak_reserved") / live - ratio).abs() < 1e-9);
    assert!(value("cubert_trace_replay_s") > 0.0);
    assert!(value("cubert_trace_replay_warm_s") > 0.0);
}

#[test]
fn a_malformed_trace_is_a_failed_check() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.txt");
    std::fs::write(&trace, "alloc 1 100\nfree 2\n").unwrap();
    let output = cubert(
        dir.path(),
        &[
            "bench",
            "--only",
            "trace",
            "--trace",
            trace.to_str().unwrap(),
        ],
    )
    .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("FAIL cubert_trace_peak_reserved") && stdout.contains("line 2"),
        "{stdout}"
    );
}

#[test]
fn an_earlier_run_is_compared_with_the_peers_without_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture(dir.path(), "bench.json").unwrap();
    let peers = fixture(dir.path(), "peers.json").unwrap();
    let native = fixture(dir.path(), "native.json").unwrap();
    let output = cubert(
        dir.path(),
        &[
            "bench",
            "--from",
            &run,
            "--compare",
            &peers,
            "--compare",
            &native,
        ],
    )
    .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = |figure: &str, peer: &str| {
        stdout
            .lines()
            .find(|line| line.starts_with(figure) && line.contains(peer))
            .unwrap_or_else(|| panic!("no {figure} / {peer} row in:\n{stdout}"))
            .to_string()
    };
    // Higher is better for bandwidth: 20.69 / 9.770 GB/s.
    let row = line("cubert_h2d_pageable_1GiB", "native_h2d_pageable_1GiB");
    assert!(
        row.contains("2.117") && row.contains("cubert 2.117x ahead"),
        "{row}"
    );
    // Lower is better for times: 21.63 µs against 7.476 µs.
    let row = line("cubert_empty_launch_sync_us", "native_empty_launch_sync_us");
    assert!(
        row.contains("peer 2.893x ahead") && row.contains("best peer"),
        "{row}"
    );
    // Names that differ: the pool against cudaMallocAsync and CuPy's pool, the vector add
    // against the float4 kernels, the old d2h name against the pinned reads.
    line("cubert_alloc_free_4KiB", "native_mallocasync_free_4KiB");
    line("cubert_alloc_free_1GiB", "cupy_pool_alloc_free_1GiB");
    line("cubert_vadd_f32_256M", "native_vadd_f32_256M_float4");
    line("cubert_d2h_1GiB", "torch_d2h_pinned_1GiB");
    assert!(
        stdout.contains("against the best peer of each of 12 figures")
            && stdout.contains("no peer figure for: cubert_h2d_file_1GiB"),
        "{stdout}"
    );
    // Nothing was measured.
    assert!(!stdout.contains("# group"), "{stdout}");
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
        // --from compares an earlier run: it needs peers and measures nothing.
        &["bench", "--from", "run.json"],
        &[
            "bench",
            "--from",
            "run.json",
            "--compare",
            "p.json",
            "--quick",
        ],
        &[
            "bench",
            "--from",
            "run.json",
            "--compare",
            "p.json",
            "--only",
            "trace",
        ],
    ] {
        let output = cubert(dir.path(), args).unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
    // A peer file that can't be read stops the run before anything is measured.
    let output = cubert(dir.path(), &["bench", "--compare", "missing.json"]).unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("missing.json"), "{stderr}");
    assert!(!stdout.contains("# group"), "{stdout}");
}

/// A variable that isn't UTF-8 (ours or anybody's) used to panic every subcommand at its
/// first configuration load (exit 101).
#[test]
fn environment_that_is_not_utf8_does_not_crash_the_cli() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let output = common::cubert_command()
        .args(["info"])
        .env("FOO", OsStr::from_bytes(b"caf\xe9"))
        .env("CUBERT_CPU_THREADS", OsStr::from_bytes(b"\xff"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("CUBERT_CPU_THREADS"), "{stdout}");
    assert!(stdout.contains("not valid UTF-8"), "{stdout}");
}

/// Shapes whose buffers can't exist are an error, not an abort of the process (an
/// unchecked host allocation used to abort `bench tune`).
#[test]
fn impossible_tune_shapes_are_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    for shape in ["99999999x99999999x99999999", "4000000x4000000x1"] {
        let output = cubert(dir.path(), &["bench", "tune", "--quick", "--shapes", shape]).unwrap();
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(1), "{shape}: {stdout}\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Out-of-range settings are refused with a warning naming the range (100000 worker
/// threads used to be spawned), and a log file that can't be opened is said once on
/// stderr, with every line going there instead of being dropped.
#[test]
fn unbounded_settings_are_refused_and_unwritable_log_output_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let output = common::cubert_command()
        .args(["info"])
        .env("CUBERT_CPU_THREADS", "100000")
        .env("CUBERT_MEMORY_ROUNDING", "9223372036854775807")
        .env("CUBERT_LOGGING_OUTPUT", "/nonexistent-dir/cubert.log")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("CUBERT_CPU_THREADS=100000"), "{stdout}");
    assert!(stdout.contains("0 to 1024"), "{stdout}");
    assert!(stdout.contains("(1 GiB)"), "{stdout}");
    assert!(
        stderr.contains("/nonexistent-dir/cubert.log") && stderr.contains("logging to stderr"),
        "{stderr}"
    );
}

/// A trace that is a device, a FIFO or a directory is refused before a byte is read
/// (`/dev/zero` used to grow memory without limit, a FIFO to block forever).
#[test]
fn trace_files_that_are_not_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for path in ["/dev/zero", "/"] {
        let output = cubert(dir.path(), &["bench", "--only", "trace", "--trace", path]).unwrap();
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(1), "{path}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("not a regular file") && stdout.contains("FAIL"),
            "{path}: {stdout}\n{stderr}"
        );
    }
}
