//! Graph replay, part of the launch group: `cubert_graph_per_kernel_us`,
//! `cubert_graph_per_kernel_wall_us`, `cubert_graph_launch_call_us`,
//! `cubert_graph_noop_per_kernel_us` and `cubert_graph_add_by_address_{min,median,max}_us`.
//!
//! 1000 launches of `x[0] += 1` (`ops::add` in place on one f32) are captured with
//! `client.start_capture` / `end_capture`, and the graph is replayed with `client.replay`:
//!
//! - per kernel: one replay timed by `client.profile` (CUDA events, as the anchors time
//!   theirs) / 1000, median of 30 (10 quick);
//! - per kernel, wall: 100 (20 quick) back-to-back replays then `sync`, wall / (replays ×
//!   1000);
//! - launch call: the caller-thread time of `client.replay` during those replays, median
//!   (the call queues the replay; the runner thread makes the driver call);
//! - per empty kernel: a graph of 1000 `ops::noop`, timed as the first figure. A node of
//!   `x[0] += 1` waits for the previous node's store to reach the L2 slice holding `x`, and
//!   that latency depends on the address: in plain CUDA the same graph runs 0.72 to 0.85 µs
//!   per node depending only on where `x` lies (`scripts/anchors/graph_kernels.cu`, H200).
//!   Empty kernels touch no memory, so this figure compares launch paths alone (the anchor
//!   script measures plain CUDA's);
//! - per kernel by address: the first figure's graph with `x` at 32 addresses 512 KiB apart
//!   in one 16 MiB buffer and its `1.0` 256 KiB past it, median of 10 replays each; the
//!   least, median and largest over the addresses (the anchor script sweeps plain CUDA's
//!   two-buffer add the same way).
//!
//! After 3 warm-up replays. Check: x counts every kernel of every replay exactly (the empty
//! kernels' graph has nothing to count: its launches are counted at capture). Backends
//! without graphs (the CPU) answer `start_capture` with `ServerError::Unsupported`: the
//! figures are then "not measured", with the reason, and no failure.

use super::recorder::Recorder;
use super::timing::{median, profile_clock, profiled_seconds};
use crate::error::CliResult;
use cubert::client::Graph;
use cubert::{Bytes, ComputeClient, ElemType, LaunchError, Runtime, ServerError, ops};
use std::time::Instant;

/// Figures this part of the launch group measures.
pub const FIGURES: u64 = 7;

const PER_KERNEL: &str = "cubert_graph_per_kernel_us";
const PER_KERNEL_WALL: &str = "cubert_graph_per_kernel_wall_us";
const LAUNCH_CALL: &str = "cubert_graph_launch_call_us";
const NOOP_PER_KERNEL: &str = "cubert_graph_noop_per_kernel_us";
const BY_ADDRESS: [&str; 3] = [
    "cubert_graph_add_by_address_min_us",
    "cubert_graph_add_by_address_median_us",
    "cubert_graph_add_by_address_max_us",
];
const NAMES: [&str; 7] = [
    PER_KERNEL,
    PER_KERNEL_WALL,
    LAUNCH_CALL,
    NOOP_PER_KERNEL,
    BY_ADDRESS[0],
    BY_ADDRESS[1],
    BY_ADDRESS[2],
];
/// Addresses of the sweep, and the bytes between them.
const ADDRESSES: u64 = 32;
const ADDRESS_STEP: u64 = 512 << 10;
/// Replays timed per address.
const REPS_PER_ADDRESS: usize = 10;

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
    let Some(graph) = capture(client, recorder, &NAMES, || {
        ops::add(client, &counter, &one, &counter, 1, ElemType::F32)
    })?
    else {
        return Ok(());
    };
    let per_kernel = profiled_per_kernel(client, &graph, profiled_reps)?;
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
    noop_per_kernel(client, profiled_reps, recorder)?;
    add_by_address(client, recorder)
}

/// The per-node time of the one-element add's graph with the counter at [`ADDRESSES`]
/// places, each with its `1.0` half a step past it ([`BY_ADDRESS`]); each counter is
/// checked after its replays.
fn add_by_address<R: Runtime>(client: &ComputeClient<R>, recorder: &mut Recorder) -> CliResult<()> {
    recorder.start(BY_ADDRESS[0]);
    let len = (ADDRESSES * ADDRESS_STEP) as usize / 4;
    let area = client.empty(len * 4)?;
    ops::fill(client, &area, len, 0.0f32)?;
    let mut medians = Vec::with_capacity(ADDRESSES as usize);
    for index in 0..ADDRESSES {
        let counter = area.view(index * ADDRESS_STEP, 4)?;
        let one = area.view(index * ADDRESS_STEP + ADDRESS_STEP / 2, 4)?;
        ops::fill(client, &one, 1, 1.0f32)?;
        client.start_capture()?;
        let Some(graph) = capture(client, recorder, &BY_ADDRESS, || {
            ops::add(client, &counter, &one, &counter, 1, ElemType::F32)
        })?
        else {
            return Ok(());
        };
        medians.push(median(&profiled_per_kernel(
            client,
            &graph,
            REPS_PER_ADDRESS,
        )?));
        let want = ((WARM_UP + REPS_PER_ADDRESS) * KERNELS) as f32;
        let got = client.read_one(counter)?.to_elems::<f32>();
        if got != [want] {
            let problem = format!(
                "the counter at offset {} holds {got:?} after its replays, expected {want}",
                index * ADDRESS_STEP
            );
            for name in BY_ADDRESS {
                recorder.skip(name, &problem);
            }
            return Ok(());
        }
    }
    medians.sort_by(f64::total_cmp);
    let picks = [0, medians.len() / 2, medians.len() - 1];
    for (name, (pick, what)) in BY_ADDRESS
        .into_iter()
        .zip(picks.into_iter().zip(["least", "median", "largest"]))
    {
        recorder.emit(
            name,
            medians[pick],
            "us/kernel",
            &format!(
                "the {what} over {ADDRESSES} counters {} KiB apart of the per-kernel time of \
                 a graph of {KERNELS} x[0] += 1 (median of {REPS_PER_ADDRESS} profiled \
                 replays each, counts checked)",
                ADDRESS_STEP >> 10
            ),
        );
    }
    Ok(())
}

/// The per-node time of a graph of [`KERNELS`] empty kernels ([`NOOP_PER_KERNEL`]).
fn noop_per_kernel<R: Runtime>(
    client: &ComputeClient<R>,
    profiled_reps: usize,
    recorder: &mut Recorder,
) -> CliResult<()> {
    recorder.start(NOOP_PER_KERNEL);
    client.start_capture()?;
    let Some(graph) = capture(client, recorder, &[NOOP_PER_KERNEL], || ops::noop(client))? else {
        return Ok(());
    };
    let per_kernel = profiled_per_kernel(client, &graph, profiled_reps)?;
    recorder.emit(
        NOOP_PER_KERNEL,
        median(&per_kernel),
        "us/kernel",
        &format!(
            "graph of {KERNELS} ops::noop, one client.replay timed by client.profile ({}) / \
             {KERNELS}, median of {profiled_reps}",
            profile_clock(client)
        ),
    );
    Ok(())
}

/// Makes [`KERNELS`] launches with `launch` into the capture started on `client`, ends it
/// (even after a failed launch, so the stream is usable again) and returns the graph;
/// `None` when it doesn't hold every launch, after skipping the figures `names` with the
/// problem.
///
/// # Errors
/// The failed launch, or the error ending the capture.
fn capture<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    names: &[&str],
    mut launch: impl FnMut() -> Result<(), LaunchError>,
) -> CliResult<Option<Graph<R>>> {
    let mut captured = Ok(());
    for _ in 0..KERNELS {
        captured = launch();
        if captured.is_err() {
            break;
        }
    }
    let graph = client.end_capture();
    captured?;
    let graph = graph?;
    if graph.launches() != KERNELS {
        let problem = format!(
            "the graph holds {} launches, {KERNELS} were captured",
            graph.launches()
        );
        for name in names {
            recorder.skip(name, &problem);
        }
        return Ok(None);
    }
    Ok(Some(graph))
}

/// After [`WARM_UP`] replays of `graph`, `reps` replays each timed by `client.profile`, in
/// microseconds per kernel.
///
/// # Errors
/// A failed replay or profile.
fn profiled_per_kernel<R: Runtime>(
    client: &ComputeClient<R>,
    graph: &Graph<R>,
    reps: usize,
) -> CliResult<Vec<f64>> {
    for _ in 0..WARM_UP {
        client.replay(graph)?;
    }
    client.sync()?;
    let mut per_kernel = Vec::with_capacity(reps);
    for _ in 0..reps {
        let seconds = profiled_seconds(client, "graph replay", || client.replay(graph))?;
        per_kernel.push(seconds * 1e6 / KERNELS as f64);
    }
    Ok(per_kernel)
}
