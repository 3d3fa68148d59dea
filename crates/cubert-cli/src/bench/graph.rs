//! Graph replay, part of the launch group: `cubert_graph_per_kernel_us`,
//! `cubert_graph_per_kernel_wall_us` and `cubert_graph_launch_call_us`.
//!
//! 1000 launches of `x[0] += 1` (`ops::add` in place on one f32) are captured with
//! `client.start_capture` / `end_capture`, and the graph is replayed with `client.replay`:
//!
//! - per kernel: one replay timed by `client.profile` (CUDA events, as the anchors time
//!   theirs) / 1000, median of 30 (10 quick);
//! - per kernel, wall: 100 (20 quick) back-to-back replays then `sync`, wall / (replays ×
//!   1000);
//! - launch call: the caller-thread time of `client.replay` during those replays, median
//!   (the call queues the replay; the runner thread makes the driver call).
//!
//! After 3 warm-up replays. Check: x counts every kernel of every replay exactly. Backends
//! without graphs (the CPU) answer `start_capture` with `ServerError::Unsupported`: the
//! figures are then "not measured", with the reason, and no failure.

use super::recorder::Recorder;
use super::timing::{median, profile_clock, profiled_seconds};
use crate::error::CliResult;
use cubert::{Bytes, ComputeClient, ElemType, Runtime, ServerError, ops};
use std::time::Instant;

/// Figures this part of the launch group measures.
pub const FIGURES: u64 = 3;

const PER_KERNEL: &str = "cubert_graph_per_kernel_us";
const PER_KERNEL_WALL: &str = "cubert_graph_per_kernel_wall_us";
const LAUNCH_CALL: &str = "cubert_graph_launch_call_us";
const NAMES: [&str; 3] = [PER_KERNEL, PER_KERNEL_WALL, LAUNCH_CALL];

/// Kernels in the graph.
const KERNELS: usize = 1000;
const WARM_UP: usize = 3;

/// Measures graph replay.
///
/// # Errors
/// A runtime error (other than graphs being unsupported) that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let (profiled_reps, wall_reps) = if quick { (10, 20) } else { (30, 100) };
    recorder.start(PER_KERNEL);
    let one = client.create(Bytes::from_elems(vec![1.0f32]))?;
    let counter = client.create(Bytes::from_elems(vec![0.0f32]))?;
    client.sync()?;
    match client.start_capture() {
        Ok(()) => {}
        Err(error @ ServerError::Unsupported { .. }) => {
            recorder.not_measured(
                &NAMES,
                &format!(
                    "the {} backend has no graphs (start_capture: {error})",
                    R::name()
                ),
            );
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    }
    let mut captured = Ok(());
    for _ in 0..KERNELS {
        captured = ops::add(client, &counter, &one, &counter, 1, ElemType::F32);
        if captured.is_err() {
            break;
        }
    }
    // End the capture even if a launch failed, so the stream is usable again.
    let graph = client.end_capture();
    captured?;
    let graph = graph?;
    if graph.launches() != KERNELS {
        let problem = format!(
            "the graph holds {} launches, {KERNELS} were captured",
            graph.launches()
        );
        for name in NAMES {
            recorder.skip(name, &problem);
        }
        return Ok(());
    }
    for _ in 0..WARM_UP {
        client.replay(&graph)?;
    }
    client.sync()?;
    let mut per_kernel = Vec::with_capacity(profiled_reps);
    for _ in 0..profiled_reps {
        let seconds = profiled_seconds(client, "graph replay", || client.replay(&graph))?;
        per_kernel.push(seconds * 1e6 / KERNELS as f64);
    }
    recorder.start(PER_KERNEL_WALL);
    let mut calls = Vec::with_capacity(wall_reps);
    let start = Instant::now();
    for _ in 0..wall_reps {
        let call = Instant::now();
        client.replay(&graph)?;
        calls.push(call.elapsed().as_secs_f64() * 1e6);
    }
    client.sync()?;
    let wall = start.elapsed().as_secs_f64() * 1e6 / (wall_reps * KERNELS) as f64;
    let replays = WARM_UP + profiled_reps + wall_reps;
    let want = (replays * KERNELS) as f32;
    let got = client.read_one(counter)?.to_elems::<f32>();
    if got != [want] {
        let problem =
            format!("after {replays} replays of {KERNELS} x[0] += 1, x = {got:?}, expected {want}");
        for name in NAMES {
            recorder.skip(name, &problem);
        }
        return Ok(());
    }
    recorder.emit(
        PER_KERNEL,
        median(&per_kernel),
        "us/kernel",
        &format!(
            "graph of {KERNELS} x[0] += 1, one client.replay timed by client.profile ({}) / \
             {KERNELS}, median of {profiled_reps} (count checked)",
            profile_clock(client)
        ),
    );
    recorder.emit(
        PER_KERNEL_WALL,
        wall,
        "us/kernel",
        &format!("{wall_reps} back-to-back replays + sync, wall / ({wall_reps}*{KERNELS})"),
    );
    recorder.emit(
        LAUNCH_CALL,
        median(&calls),
        "us/launch",
        &format!("caller-thread time of client.replay (queues the replay), median of {wall_reps}"),
    );
    Ok(())
}
