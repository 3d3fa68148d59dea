//! Launch overhead: `cubert_empty_launch_us`, `cubert_empty_submit_us`,
//! `cubert_empty_launch_sync_us` and `cubert_add1_launch_us`, then graph replay (`graph`).
//!
//! - empty launch: 100k (10k quick) back-to-back `ops::noop`, then `sync`; wall time per
//!   launch including the sync;
//! - empty submit: the caller-thread time of those launches only (until the last returned);
//! - launch + sync: one `ops::noop` and `sync`, median of 2000 (200 quick) round trips;
//! - add1: 10k (1k quick) back-to-back `x[0] += 1` (`ops::add` in place on one f32), then
//!   `sync`: the check that launches really run, once each and in order (x must count them);
//! - read 4 B: `read_one` of a 4-byte handle on an idle device, median of 2000 (200 quick):
//!   what reading a scalar (a loss, a flag) costs;
//! - add1 + read: `x[0] += 1` then `read_one` of x, the same count: a step that reads its
//!   result (every value read is checked).
//!
//! Median of 5 runs (3 quick) after a warm-up. The empty launches are checked by the sync
//! (no launch reported an error) and by the add1 count.

use super::graph;
use super::recorder::Recorder;
use super::timing::median;
use crate::error::CliResult;
use cubert::{Bytes, ComputeClient, ElemType, Handle, Runtime, ops};
use std::time::Instant;

/// Figures this group measures.
pub const FIGURES: u64 = 6 + graph::FIGURES;

/// Measures launch overhead, then graph replay.
///
/// # Errors
/// A runtime error (a launch or sync that fails) that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    launches(client, quick, recorder)?;
    graph::run(client, quick, recorder)
}

fn launches<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let (count, reps, trips, adds) = if quick {
        (10_000, 3, 200, 1_000)
    } else {
        (100_000, 5, 2_000, 10_000)
    };

    recorder.start("cubert_empty_launch_us");
    for _ in 0..count.min(1_000) {
        ops::noop(client)?;
    }
    client.sync()?;
    let mut totals = Vec::with_capacity(reps);
    let mut submits = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        for _ in 0..count {
            ops::noop(client)?;
        }
        let submitted = start.elapsed();
        client.sync()?;
        let total = start.elapsed();
        submits.push(submitted.as_secs_f64() * 1e6 / count as f64);
        totals.push(total.as_secs_f64() * 1e6 / count as f64);
    }
    recorder.emit(
        "cubert_empty_launch_us",
        median(&totals),
        "us/launch",
        &format!("{count} back-to-back ops::noop, wall/count incl. sync, median of {reps}"),
    );
    recorder.emit(
        "cubert_empty_submit_us",
        median(&submits),
        "us/launch",
        "caller-thread time until the last launch returned",
    );

    recorder.start("cubert_empty_launch_sync_us");
    for _ in 0..trips.min(100) {
        ops::noop(client)?;
        client.sync()?;
    }
    let mut round_trips = Vec::with_capacity(trips);
    for _ in 0..trips {
        let start = Instant::now();
        ops::noop(client)?;
        client.sync()?;
        round_trips.push(start.elapsed().as_secs_f64() * 1e6);
    }
    recorder.emit(
        "cubert_empty_launch_sync_us",
        median(&round_trips),
        "us",
        &format!("one ops::noop + sync, median of {trips}"),
    );

    recorder.start("cubert_add1_launch_us");
    let one = client.create(Bytes::from_elems(vec![1.0f32]))?;
    let mut per_launch = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let counter = client.create(Bytes::from_elems(vec![0.0f32]))?;
        client.sync()?;
        let start = Instant::now();
        for _ in 0..adds {
            ops::add(client, &counter, &one, &counter, 1, ElemType::F32)?;
        }
        client.sync()?;
        let elapsed = start.elapsed();
        let value = client.read_one(counter)?.to_elems::<f32>();
        if value != [adds as f32] {
            recorder.skip(
                "cubert_add1_launch_us",
                &format!("after {adds} launches of x[0] += 1 (run {rep}), x = {value:?}"),
            );
            return Ok(());
        }
        if rep > 0 {
            per_launch.push(elapsed.as_secs_f64() * 1e6 / adds as f64);
        }
    }
    recorder.emit(
        "cubert_add1_launch_us",
        median(&per_launch),
        "us/launch",
        &format!(
            "{adds} back-to-back x[0] += 1 (ops::add in place), wall/count incl. sync, \
             median of {reps} (count checked)"
        ),
    );
    reads(client, trips, &one, recorder)
}

/// `cubert_read_4B_us` and `cubert_add1_read_us`: small reads on an idle device, alone and
/// right behind the launch that computed them.
fn reads<R: Runtime>(
    client: &ComputeClient<R>,
    trips: usize,
    one: &Handle,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let name = "cubert_read_4B_us";
    recorder.start(name);
    let scalar = client.create(Bytes::from_elems(vec![0.5f32]))?;
    client.sync()?;
    record_median_trip_us(
        recorder,
        name,
        &format!("read_one of 4 bytes on an idle device, median of {trips}"),
        trips,
        |_| Ok(client.read_one(scalar.clone())?),
        |_, value| (value.to_elems::<f32>() != [0.5]).then(|| format!("read {value:?}, not 0.5")),
    )?;

    let name = "cubert_add1_read_us";
    recorder.start(name);
    let counter = client.create(Bytes::from_elems(vec![0.0f32]))?;
    client.sync()?;
    record_median_trip_us(
        recorder,
        name,
        &format!(
            "x[0] += 1 (ops::add in place) then read_one of x, median of {trips} (values checked)"
        ),
        trips,
        |_| {
            ops::add(client, &counter, one, &counter, 1, ElemType::F32)?;
            Ok(client.read_one(counter.clone())?)
        },
        |trip, value| {
            (value.to_elems::<f32>() != [(trip + 1) as f32])
                .then(|| format!("after {} launches of x[0] += 1, read {value:?}", trip + 1))
        },
    )
}

/// Records figure `name` (`note`): the median microseconds of `trips` calls of `trip(i)`
/// (wall clock, around each call), after `trips / 10` unmeasured ones. `check(i, &result)`,
/// outside the clock, says what was wrong with a trip's result, if anything; the first
/// wrong trip skips the figure with it.
fn record_median_trip_us<T>(
    recorder: &mut Recorder,
    name: &str,
    note: &str,
    trips: usize,
    mut trip: impl FnMut(usize) -> CliResult<T>,
    mut check: impl FnMut(usize, &T) -> Option<String>,
) -> CliResult<()> {
    let warm = trips / 10;
    let mut times = Vec::with_capacity(trips);
    for index in 0..warm + trips {
        let start = Instant::now();
        let result = trip(index)?;
        let elapsed = start.elapsed();
        if let Some(wrong) = check(index, &result) {
            recorder.skip(name, &wrong);
            return Ok(());
        }
        if index >= warm {
            times.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    recorder.emit(name, median(&times), "us", note);
    Ok(())
}
