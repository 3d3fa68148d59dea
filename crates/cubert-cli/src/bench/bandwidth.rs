//! Memory bandwidth: the f32 vector add, `cubert_vadd_f32_256M` (16M quick), GB/s counting
//! 3 arrays × 4 bytes per element, like the anchors' vector add; then the device-to-device
//! copy (`copy`).
//!
//! Inputs are counter-based pseudo-random floats in [-1, 1) (so any element can be
//! recomputed without keeping the inputs). The output is poisoned with NaN, one add runs and
//! every element is checked bit for bit against `a + b`; then, after a warm-up of at least
//! [`WARM_UP`](super::timing::WARM_UP) (GPUs idle at low clocks), two timings
//! of 10 runs each (5 quick), reported as medians:
//!
//! - `cubert_vadd_f32_256M`: the device time of one `ops::add`, measured by `client.profile`
//!   (CUDA events on CUDA, as the anchors time their kernels; the host clock around the
//!   finished launch on the CPU);
//! - `cubert_vadd_f32_256M_wall`: the wall time of `ops::add` + `sync`;
//! - `cubert_vadd_f32_256M_language`: the device time of the same add written once in the
//!   kernel language ([`add_lines`], four elements per unit: one `float4` on CUDA), every
//!   element checked first: what a user's own kernel reaches next to the standard one.
//!
//! Then a strided sample of the output is checked again.

use super::copy;
use super::recorder::Recorder;
use super::timing::{gb_per_s, median, profile_clock, profiled_seconds, warm_up};
use super::units::{MIB, count_label};
use crate::error::CliResult;
use crate::rng::mix_f32;
use cubert::lang::prelude::*;
use cubert::{Bytes, ComputeClient, CubeDim, ElemType, Handle, Runtime, ops};
use std::time::Instant;

/// Figures this group measures.
pub const FIGURES: u64 = 3 + copy::FIGURES;

/// The vector add in the kernel language: unit `i` adds line `i` (elements `4i .. 4i + 4`).
#[cubert::kernel]
fn add_lines(a: &Array<f32>, b: &Array<f32>, out: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    // The grid may overshoot where it spills into y (`ops::elementwise_grid`).
    if i * 4 < out.len() {
        let x = a.line::<4>(i);
        let y = b.line::<4>(i);
        let mut z = x;
        for k in 0..4u32 {
            z[k] = x[k] + y[k];
        }
        out.set_line(i, z);
    }
}

const SEED_A: u64 = 0xa;
const SEED_B: u64 = 0xb;
/// Elements checked after the timed runs.
const SAMPLES: usize = 4096;

fn expected(index: usize) -> f32 {
    mix_f32(SEED_A, index as u64) + mix_f32(SEED_B, index as u64)
}

fn describe(index: usize, got: f32) -> String {
    format!(
        "element {index} is {got:?}, expected {:?} = {:?} + {:?}",
        expected(index),
        mix_f32(SEED_A, index as u64),
        mix_f32(SEED_B, index as u64)
    )
}

/// Checks every element of `out`.
fn check_all<R: Runtime>(
    client: &ComputeClient<R>,
    out: &Handle,
    len: usize,
) -> CliResult<Option<String>> {
    let bytes = client.read_one(out.clone())?;
    let copied;
    let got: &[f32] = match bytes.as_elems::<f32>() {
        Some(elems) => elems,
        None => {
            copied = bytes.to_elems::<f32>();
            &copied
        }
    };
    if got.len() != len {
        return Ok(Some(format!("read {} elements, expected {len}", got.len())));
    }
    let mut wrong = 0usize;
    let mut first = None;
    for (i, value) in got.iter().enumerate() {
        if value.to_bits() != expected(i).to_bits() {
            wrong += 1;
            first.get_or_insert((i, *value));
        }
    }
    Ok(first.map(|(i, value)| format!("{wrong} wrong element(s); {}", describe(i, value))))
}

/// Checks `SAMPLES` elements spread over `out` (the last one included).
fn check_sample<R: Runtime>(
    client: &ComputeClient<R>,
    out: &Handle,
    len: usize,
) -> CliResult<Option<String>> {
    let stride = (len / SAMPLES).max(1);
    let indices: Vec<usize> = (0..len).step_by(stride).chain([len - 1]).collect();
    let mut views = Vec::with_capacity(indices.len());
    for &i in &indices {
        views.push(out.view(i as u64 * 4, 4)?);
    }
    let got = client.read(views)?;
    for (i, bytes) in indices.into_iter().zip(got) {
        let value = bytes.to_elems::<f32>().first().copied().unwrap_or(f32::NAN);
        if value.to_bits() != expected(i).to_bits() {
            return Ok(Some(describe(i, value)));
        }
    }
    Ok(None)
}

/// Measures the vector add, then the copy.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    vector_add(client, quick, recorder)?;
    copy::run(client, quick, recorder)
}

fn vector_add<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let (len, reps) = if quick {
        (16 * MIB, 5)
    } else {
        (256 * MIB, 10)
    };
    // Smaller where the device's buffers are (the figure's name says the size).
    let largest = client.properties().memory.max_allocation_size;
    let len = super::units::fit(len * 4, largest, MIB) / 4;
    let name = format!("cubert_vadd_f32_{}", count_label(len));
    let wall_name = format!("{name}_wall");
    recorder.start(&name);
    let generate = |seed| -> Vec<f32> { (0..len).map(|i| mix_f32(seed, i as u64)).collect() };
    let a = client.create(Bytes::from_elems(generate(SEED_A)))?;
    let b = client.create(Bytes::from_elems(generate(SEED_B)))?;
    let out = client.empty(len * 4)?;
    ops::fill(client, &out, len, f32::NAN)?;
    ops::add(client, &a, &b, &out, len, ElemType::F32)?;
    client.sync()?;
    if let Some(problem) = check_all(client, &out, len)? {
        recorder.skip(&name, &problem);
        recorder.skip(
            &wall_name,
            "the result of the first add is wrong (see above)",
        );
        return Ok(());
    }
    warm_up(client, || {
        ops::add(client, &a, &b, &out, len, ElemType::F32)
    })?;
    let mut device = Vec::with_capacity(reps);
    for _ in 0..reps {
        device.push(profiled_seconds(client, "vadd", || {
            ops::add(client, &a, &b, &out, len, ElemType::F32)
        })?);
    }
    recorder.start(&wall_name);
    let mut wall = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        ops::add(client, &a, &b, &out, len, ElemType::F32)?;
        client.sync()?;
        wall.push(start.elapsed().as_secs_f64());
    }
    if let Some(problem) = check_sample(client, &out, len)? {
        recorder.skip(&name, &format!("after the timed runs: {problem}"));
        recorder.skip(&wall_name, &format!("after the timed runs: {problem}"));
        return Ok(());
    }
    let bytes = 3 * len * 4;
    recorder.emit(
        &name,
        gb_per_s(bytes, median(&device)),
        "GB/s",
        &format!(
            "ops::add f32, bytes = 3*N*4, device time by client.profile ({}), median of {reps} \
             (all elements checked, then a sample)",
            profile_clock(client)
        ),
    );
    recorder.emit(
        &wall_name,
        gb_per_s(bytes, median(&wall)),
        "GB/s",
        &format!("ops::add f32 + sync, bytes = 3*N*4, wall time, median of {reps}"),
    );
    language_add(
        client,
        (&a, &b, &out),
        len,
        reps,
        &format!("{name}_language"),
        recorder,
    )
}

/// The add of [`add_lines`]: checked in full, then timed like `ops::add`.
fn language_add<R: Runtime>(
    client: &ComputeClient<R>,
    (a, b, out): (&Handle, &Handle, &Handle),
    len: usize,
    reps: usize,
    name: &str,
    recorder: &mut Recorder,
) -> CliResult<()> {
    recorder.start(name);
    let grid = ops::elementwise_grid(client.properties(), (len / 4) as u64, 256);
    let launch = || add_lines::launch::<R>(client, grid.clone(), CubeDim::new_1d(256), a, b, out);
    ops::fill(client, out, len, f32::NAN)?;
    launch()?;
    client.sync()?;
    if let Some(problem) = check_all(client, out, len)? {
        recorder.skip(name, &problem);
        return Ok(());
    }
    warm_up(client, launch)?;
    let mut device = Vec::with_capacity(reps);
    for _ in 0..reps {
        device.push(profiled_seconds(client, "vadd_language", launch)?);
    }
    recorder.emit(
        name,
        gb_per_s(3 * len * 4, median(&device)),
        "GB/s",
        &format!(
            "#[kernel] add by lines of 4 f32, bytes = 3*N*4, device time by client.profile \
             ({}), median of {reps} (all elements checked first)",
            profile_clock(client)
        ),
    );
    Ok(())
}
