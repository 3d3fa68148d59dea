//! `cubert launch`: every rank gets its environment, a failing rank stops the others and
//! its status comes back, and ranks in separate processes meet through the TCP rendezvous
//! (this test binary plays the ranks). `cubert bench collective` runs among virtual CPU
//! devices with every result checked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert::distributed::ProcessGroup;
use std::process::Stdio;
use std::time::{Duration, Instant};

const RANK_CHILD: &str = "CUBERT_TEST_LAUNCH_RANK";

mod common;

use common::cubert_command as cubert;

/// Waits for `child` at most `limit`, killing it (and failing) past that.
fn wait_within(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("cubert launch still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_rank_gets_its_rank_world_size_address_and_nvls_off() {
    let output = cubert()
        .args([
            "launch",
            "--nproc",
            "3",
            "--timeout",
            "30",
            "--",
            "sh",
            "-c",
        ])
        .arg(
            "echo rank=$CUBERT_RANK world=$CUBERT_WORLD_SIZE local=$CUBERT_LOCAL_RANK \
             nvls=$NCCL_NVLS_ENABLE timeout=$CUBERT_COLLECTIVE_TIMEOUT addr=$CUBERT_MASTER_ADDR",
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 3, "{text}");
    for (rank, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!(
                "rank={rank} world=3 local={rank} nvls=0 timeout=30 addr=127.0.0.1:"
            )),
            "{line}"
        );
    }
    let addresses: Vec<&str> = lines
        .iter()
        .map(|l| l.rsplit('=').next().unwrap())
        .collect();
    assert!(addresses.windows(2).all(|w| w[0] == w[1]), "{addresses:?}");
}

#[test]
fn a_failing_rank_stops_the_others_and_its_status_is_returned() {
    let child = cubert()
        .args(["launch", "--nproc", "3", "--", "sh", "-c"])
        .arg("if [ \"$CUBERT_RANK\" = 1 ]; then exit 7; fi; exec sleep 600")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_within(child, Duration::from_secs(120));
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("rank 1 failed"), "{stderr}");
}

#[test]
fn bad_invocations_are_usage_errors() {
    for args in [
        vec!["launch", "--nproc", "2"],
        vec!["launch", "--nproc", "2", "--nnodes", "2", "--", "true"],
        vec![
            "launch",
            "--nproc",
            "2",
            "--nnodes",
            "2",
            "--node-rank",
            "2",
            "--master-addr",
            "127.0.0.1:1",
            "--",
            "true",
        ],
        vec!["launch", "--nproc", "0", "--", "true"],
        // Used to panic converting to a `Duration` (issue: hostile input, crash 2).
        vec!["launch", "--nproc", "2", "--timeout", "1e300", "--", "true"],
        vec!["launch", "--nproc", "2", "--timeout", "inf", "--", "true"],
    ] {
        let output = cubert().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    }
    let output = cubert()
        .args(["launch", "--nproc", "1", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

/// The rank half of `ranks_started_by_launch_meet_through_the_rendezvous`.
#[test]
#[ignore = "run as a rank by ranks_started_by_launch_meet_through_the_rendezvous"]
fn rendezvous_rank() {
    let Some(markers) = std::env::var_os(RANK_CHILD) else {
        return;
    };
    let group = ProcessGroup::from_env().unwrap().unwrap();
    let rendezvous = group.rendezvous().unwrap();
    let mine = format!("from rank {}", group.rank());
    let got = rendezvous
        .broadcast("launch-test", mine.as_bytes())
        .unwrap();
    assert_eq!(got, b"from rank 0".to_vec());
    assert_eq!(group.world_size(), 4);
    rendezvous.barrier("done").unwrap();
    std::fs::write(
        std::path::Path::new(&markers).join(format!("rank-{}", group.rank())),
        b"ok",
    )
    .unwrap();
}

#[test]
fn ranks_started_by_launch_meet_through_the_rendezvous() {
    let exe = std::env::current_exe().unwrap();
    // Each rank leaves a marker file once it passed the barrier: the ranks share one
    // stdout, so their test-harness lines interleave and can't be counted.
    let markers = tempfile::tempdir().unwrap();
    let child = cubert()
        .args(["launch", "--nproc", "4", "--timeout", "60", "--"])
        .arg(exe)
        .args(["--ignored", "--exact", "rendezvous_rank"])
        .env(RANK_CHILD, markers.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_within(child, Duration::from_secs(120));
    assert!(output.status.success(), "{output:?}");
    for rank in 0..4 {
        let marker = markers.path().join(format!("rank-{rank}"));
        assert!(marker.exists(), "rank {rank} did not finish: {output:?}");
    }
}

#[test]
fn bench_collective_on_virtual_cpu_devices_checks_every_result() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("collective.json");
    let output = cubert()
        .args([
            "--backend",
            "cpu",
            "bench",
            "collective",
            "--quick",
            "--devices",
            "3",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{output:?}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["failures"], 0);
    let figures = report["figures"].as_object().unwrap();
    for name in [
        "cubert_allreduce_busbw_1MiB",
        "cubert_allreduce_time_1MiB",
        "cubert_peer_copy_64MiB",
    ] {
        let value = figures[name]["value"].as_f64().unwrap();
        assert!(value > 0.0, "{name}: {value}");
    }
    let points = report["series"]["cubert_allreduce_busbw_sweep"]["points"]
        .as_array()
        .unwrap();
    assert_eq!(points.len(), 2);
}
