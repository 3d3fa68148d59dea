//! `cubert demo`: runs every standard kernel on the default device and checks each result.
//!
//! Inputs are deterministic pseudo-random values (never zeros). Each kernel runs once
//! through `cubert::ops`, timed with `client.profile` around launch + sync and recorded in
//! the device's logger; its result is read back and compared with a plain Rust reference:
//! exactly for fill, copy, casts and elementwise arithmetic (integers wrap), with a relative
//! error of at most 1e-4 (f32) or 1e-12 (f64) for reductions and matrix products. Then the
//! per-kernel profile and the memory report are printed. Any mismatch or error makes the
//! exit code 1.

use crate::backend::{Backend, ClientJob, run_on_default_device};
use crate::error::{CliResult, EXIT_FAILURE};
use crate::rng::Draw;
use crate::verify::{self, Comparison, Exact};
use cubert::properties::TimingMethod;
use cubert::{Bytes, ComputeClient, ElemType, Element, Handle, LaunchError, Runtime, ops};
use fastrand::Rng;
use std::process::ExitCode;

/// Largest relative error accepted for f32 reductions and matrix products.
pub const F32_TOLERANCE: f64 = 1e-4;
/// Largest relative error accepted for f64 matrix products.
pub const F64_TOLERANCE: f64 = 1e-12;

/// Runs the demo on the default device of `backend` with `size` elements per elementwise
/// kernel.
///
/// # Errors
/// A usage error if the backend isn't built in; a runtime error that stops the demo early
/// (starting the device, reading the memory report).
pub fn run(backend: Backend, size: usize) -> CliResult<ExitCode> {
    let verified = run_on_default_device(backend, Demo { size })?;
    Ok(if verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

struct Demo {
    size: usize,
}

impl ClientJob for Demo {
    type Output = bool;

    fn run<R: Runtime>(self, client: &ComputeClient<R>) -> CliResult<bool> {
        demo(client, self.size)
    }
}

/// The result of one check.
enum Outcome {
    Checked(Comparison, Tolerance),
    Failed(anyhow::Error),
}

#[derive(Clone, Copy)]
enum Tolerance {
    Exact,
    Relative(f64),
}

/// The tally of the checks, printed as a table row per check.
#[derive(Default)]
struct Checks {
    total: usize,
    failed: usize,
}

impl Checks {
    /// Prints the row of `kernel` on `shape` and counts its outcome.
    fn report(&mut self, kernel: &str, shape: &str, outcome: CliResult<Outcome>) {
        self.total += 1;
        let outcome = outcome.unwrap_or_else(Outcome::Failed);
        let line = match outcome {
            Outcome::Checked(comparison, tolerance) => {
                let error = match tolerance {
                    Tolerance::Exact if comparison.max_error == 0.0 => "0 (exact)".to_string(),
                    Tolerance::Exact => format!("{:.3e} abs", comparison.max_error),
                    Tolerance::Relative(_) if comparison.max_error == 0.0 => "0 rel".to_string(),
                    Tolerance::Relative(_) => format!("{:.3e} rel", comparison.max_error),
                };
                let limit = match tolerance {
                    Tolerance::Exact => "exact".to_string(),
                    Tolerance::Relative(limit) => format!("<= {limit:.0e}"),
                };
                if comparison.ok() {
                    format!("{error:<14} {limit:<9} OK")
                } else {
                    self.failed += 1;
                    format!(
                        "{error:<14} {limit:<9} MISMATCH ({} element(s), first at index {})",
                        comparison.mismatches,
                        comparison
                            .first_mismatch
                            .map_or_else(|| "?".to_string(), |i| i.to_string())
                    )
                }
            }
            Outcome::Failed(error) => {
                self.failed += 1;
                format!("ERROR: {error:#}")
            }
        };
        outln!("  {kernel:<15} {shape:<24} {line}");
    }
}

/// Seed of the generator of every input of the demo.
const SEED: u64 = 0x00C0_FFEE;

/// The demo, step by step; `Ok(true)` when every result was verified.
fn demo<R: Runtime>(client: &ComputeClient<R>, size: usize) -> CliResult<bool> {
    print_header(client, size);
    let mut rng = Rng::with_seed(SEED);
    let mut checks = Checks::default();
    check_elementwise(client, &mut rng, size, &mut checks);
    check_reduction(client, &mut rng, size, &mut checks);
    check_matmuls(client, &mut rng, &mut checks);
    print_kernel_times(client);
    print_memory_report(client, &mut checks);
    print_verdict(&checks);
    Ok(checks.failed == 0)
}

/// Prints the device, what the demo does, and the header of the table of checks.
fn print_header<R: Runtime>(client: &ComputeClient<R>, size: usize) {
    outln!(
        "cubert demo on {} [{:?}], backend {}",
        client.properties().name,
        client.device_id(),
        R::name()
    );
    outln!(
        "{size} elements per elementwise kernel; deterministic pseudo-random inputs; \
         results read back and compared with a Rust reference"
    );
    outln!();
    outln!(
        "  {:<15} {:<24} {:<14} {:<9} result",
        "kernel",
        "shape",
        "max error",
        "limit"
    );
}

/// The inputs of the elementwise kernels, `n` elements each.
struct ElementwiseInputs {
    f32_a: Vec<f32>,
    f32_b: Vec<f32>,
    f64_a: Vec<f64>,
    f64_b: Vec<f64>,
    i32_a: Vec<i32>,
    i32_b: Vec<i32>,
    /// Floats up to ±1e6, for the cast to i32.
    wide_f32: Vec<f32>,
}

impl ElementwiseInputs {
    /// Draws every input from `rng`, in a fixed order (so the inputs, and the checks after
    /// them, are the same on every run).
    fn draw(rng: &mut Rng, n: usize) -> Self {
        let f32_a = rng.draws(n, |r| r.range_f32(-100.0, 100.0));
        let f32_b = rng.draws(n, |r| r.range_f32(-100.0, 100.0));
        let f64_a = rng.draws(n, |r| r.range_f64(-1e3, 1e3));
        let f64_b = rng.draws(n, |r| r.range_f64(-1e3, 1e3));
        let i32_a = rng.draws(n, Draw::any_i32);
        let i32_b = rng.draws(n, Draw::any_i32);
        let wide_f32 = rng.draws(n, |r| r.range_f32(-1e6, 1e6));
        Self {
            f32_a,
            f32_b,
            f64_a,
            f64_b,
            i32_a,
            i32_b,
            wide_f32,
        }
    }
}

/// Checks the elementwise kernels (fills, copy, casts, additions and multiplications) on
/// `n` elements. Their inputs are freed before the function returns.
fn check_elementwise<R: Runtime>(
    client: &ComputeClient<R>,
    rng: &mut Rng,
    n: usize,
    checks: &mut Checks,
) {
    let inputs = ElementwiseInputs::draw(rng, n);
    let flat = format!("[{n}]");
    check_fills(client, n, &flat, checks);
    check_copy_and_casts(client, &inputs, &flat, checks);
    check_arithmetic(client, &inputs, &flat, checks);
}

/// Checks `fill_f32` and `fill_i32` on `n` elements.
fn check_fills<R: Runtime>(client: &ComputeClient<R>, n: usize, flat: &str, checks: &mut Checks) {
    checks.report("fill_f32", flat, fill(client, "fill_f32", n, 0.1f32));
    checks.report(
        "fill_i32",
        flat,
        fill(client, "fill_i32", n, -123_456_789i32),
    );
}

/// Checks `copy_f32` and the casts between f32, f64 and i32.
fn check_copy_and_casts<R: Runtime>(
    client: &ComputeClient<R>,
    inputs: &ElementwiseInputs,
    flat: &str,
    checks: &mut Checks,
) {
    checks.report(
        "copy_f32",
        flat,
        unary(
            client,
            "copy_f32",
            &inputs.f32_a,
            ElemType::F32,
            |x| x,
            |c, s, d, len| ops::copy(c, s, d, len, ElemType::F32),
        ),
    );
    checks.report(
        "cast_f32_f64",
        flat,
        unary(
            client,
            "cast_f32_f64",
            &inputs.f32_a,
            ElemType::F64,
            f64::from,
            |c, s, d, len| ops::cast(c, s, d, len, ElemType::F32, ElemType::F64),
        ),
    );
    checks.report(
        "cast_f32_i32",
        flat,
        unary(
            client,
            "cast_f32_i32",
            &inputs.wide_f32,
            ElemType::I32,
            |x| x as i32,
            |c, s, d, len| ops::cast(c, s, d, len, ElemType::F32, ElemType::I32),
        ),
    );
    checks.report(
        "cast_i32_f32",
        flat,
        unary(
            client,
            "cast_i32_f32",
            &inputs.i32_a,
            ElemType::F32,
            |x| x as f32,
            |c, s, d, len| ops::cast(c, s, d, len, ElemType::I32, ElemType::F32),
        ),
    );
}

/// Checks `add` and `mul` on f32, f64 and i32 (integers wrap).
fn check_arithmetic<R: Runtime>(
    client: &ComputeClient<R>,
    inputs: &ElementwiseInputs,
    flat: &str,
    checks: &mut Checks,
) {
    let ElementwiseInputs {
        f32_a,
        f32_b,
        f64_a,
        f64_b,
        i32_a,
        i32_b,
        ..
    } = inputs;
    let add = ops::add::<R>;
    let mul = ops::mul::<R>;
    checks.report(
        "add_f32",
        flat,
        binary(client, "add_f32", f32_a, f32_b, |a, b| a + b, add),
    );
    checks.report(
        "add_f64",
        flat,
        binary(client, "add_f64", f64_a, f64_b, |a, b| a + b, add),
    );
    checks.report(
        "add_i32",
        flat,
        binary(client, "add_i32", i32_a, i32_b, i32::wrapping_add, add),
    );
    checks.report(
        "mul_f32",
        flat,
        binary(client, "mul_f32", f32_a, f32_b, |a, b| a * b, mul),
    );
    checks.report(
        "mul_f64",
        flat,
        binary(client, "mul_f64", f64_a, f64_b, |a, b| a * b, mul),
    );
    checks.report(
        "mul_i32",
        flat,
        binary(client, "mul_i32", i32_a, i32_b, i32::wrapping_mul, mul),
    );
}

/// Checks `reduce_sum_f32` over rows of 1000 elements, about `size` elements in all (1 to
/// 4096 rows).
fn check_reduction<R: Runtime>(
    client: &ComputeClient<R>,
    rng: &mut Rng,
    size: usize,
    checks: &mut Checks,
) {
    let cols = 1000;
    let rows = (size / cols).clamp(1, 4096);
    checks.report(
        "reduce_sum_f32",
        &format!("[{rows}×{cols}] -> [{rows}]"),
        reduce_sum(client, rng, rows, cols),
    );
}

/// Checks `matmul_f32` and `matmul_f64`, each on fixed shapes.
fn check_matmuls<R: Runtime>(client: &ComputeClient<R>, rng: &mut Rng, checks: &mut Checks) {
    let (m, k, n) = (256, 192, 320);
    checks.report(
        "matmul_f32",
        &format!("[{m}×{k}]×[{k}×{n}]"),
        matmul::<R, f32>(client, "matmul_f32", rng, (m, k, n), F32_TOLERANCE),
    );
    let (m, k, n) = (129, 77, 163);
    checks.report(
        "matmul_f64",
        &format!("[{m}×{k}]×[{k}×{n}]"),
        matmul::<R, f64>(client, "matmul_f64", rng, (m, k, n), F64_TOLERANCE),
    );
}

/// Prints the time of every kernel, from the device's logger: what `launch_timed` recorded,
/// or what the runtime's own profiler did when it is on.
fn print_kernel_times<R: Runtime>(client: &ComputeClient<R>) {
    outln!();
    let logger = &client.utilities().logger;
    let timing = match client.properties().timing_method {
        TimingMethod::System => "host clock",
        TimingMethod::Device => "device timestamps",
    };
    match logger.profile_level() {
        None => outln!(
            "time per kernel (client.profile around one launch after a warm-up launch, {timing}):"
        ),
        Some(level) => outln!(
            "device time per kernel (recorded by the runtime's profiler, level {level:?}, {timing}):"
        ),
    }
    let summary = logger.summary();
    if summary.kernels.is_empty() && summary.executions.is_empty() {
        outln!("  (no kernel was timed)");
    } else {
        out!("{summary}");
    }
}

/// Prints the device's memory report; a report that can't be read counts as a failed check.
fn print_memory_report<R: Runtime>(client: &ComputeClient<R>, checks: &mut Checks) {
    outln!();
    outln!("memory of {:?}:", client.device_id());
    match client.memory_report() {
        Ok(report) => outln!("{report}"),
        Err(error) => {
            checks.failed += 1;
            checks.total += 1;
            outln!("ERROR: can't read the memory report: {error}");
        }
    }
}

/// Prints whether every result was verified, or how many were not.
fn print_verdict(checks: &Checks) {
    outln!();
    if checks.failed == 0 {
        outln!("all {} results verified", checks.total);
    } else {
        outln!("{} of {} results MISMATCHED", checks.failed, checks.total);
    }
}

/// Launches with `launch` once to warm up (compile, load, fill caches), then again inside
/// `client.profile` followed by a sync, and records the device time under `name` in the
/// device's logger (unless the runtime's own profiler already records every launch).
/// `launch` must be idempotent: it writes its outputs from inputs it doesn't modify.
fn launch_timed<R: Runtime>(
    client: &ComputeClient<R>,
    name: &str,
    launch: impl Fn() -> Result<(), LaunchError>,
) -> CliResult<()> {
    launch().map_err(|error| anyhow::Error::from(error).context(format!("`{name}` failed")))?;
    client
        .sync()
        .map_err(|error| anyhow::Error::from(error).context(format!("`{name}` failed")))?;
    // The profile ends right after the launch: device timers (CUDA events) measure the
    // kernel alone, host timers (CPU) the launch, which runs the kernel to completion.
    let (outcome, duration) = client.profile(|| -> CliResult<()> { Ok(launch()?) }, name)?;
    client.sync()?;
    let ticks = duration.resolve_blocking()?;
    let logger = &client.utilities().logger;
    if logger.profile_level().is_none() {
        logger.record(name, ticks);
    }
    outcome.map_err(|error| error.context(format!("`{name}` failed")))
}

/// Copies `data` to a new buffer on the device.
fn upload<R: Runtime, T: Element>(client: &ComputeClient<R>, data: &[T]) -> CliResult<Handle> {
    Ok(client.create(Bytes::from_slice(data))?)
}

/// Reads the buffer `handle` back as elements of `T`.
fn download<R: Runtime, T: Element>(
    client: &ComputeClient<R>,
    handle: Handle,
) -> CliResult<Vec<T>> {
    Ok(client.read_one(handle)?.to_elems::<T>())
}

/// `len` copies of `value` through `ops::fill`, compared exactly.
fn fill<R: Runtime, T: Element + Exact>(
    client: &ComputeClient<R>,
    name: &str,
    len: usize,
    value: T,
) -> CliResult<Outcome> {
    let out = client.empty(len * T::ELEM.size())?;
    launch_timed(client, name, || ops::fill(client, &out, len, value))?;
    let got: Vec<T> = download(client, out)?;
    let comparison = verify::exact(&got, &vec![value; len]);
    Ok(Outcome::Checked(comparison, Tolerance::Exact))
}

/// `dst = f(src)` through `launch(client, src, dst, len)`.
fn unary<R, S, D>(
    client: &ComputeClient<R>,
    name: &str,
    src: &[S],
    dst_elem: ElemType,
    reference: impl Fn(S) -> D,
    launch: impl Fn(&ComputeClient<R>, &Handle, &Handle, usize) -> Result<(), LaunchError>,
) -> CliResult<Outcome>
where
    R: Runtime,
    S: Element,
    D: Element + Exact,
{
    let len = src.len();
    let input = upload(client, src)?;
    let out = client.empty(len * dst_elem.size())?;
    launch_timed(client, name, || launch(client, &input, &out, len))?;
    let got: Vec<D> = download(client, out)?;
    let want: Vec<D> = src.iter().map(|x| reference(*x)).collect();
    Ok(Outcome::Checked(
        verify::exact(&got, &want),
        Tolerance::Exact,
    ))
}

/// The signature of `ops::add` and `ops::mul`.
type BinaryOp<R> =
    fn(&ComputeClient<R>, &Handle, &Handle, &Handle, usize, ElemType) -> Result<(), LaunchError>;

/// `out = reference(lhs, rhs)` element by element through `op`, compared exactly.
fn binary<R: Runtime, T: Element + Exact>(
    client: &ComputeClient<R>,
    name: &str,
    lhs: &[T],
    rhs: &[T],
    reference: impl Fn(T, T) -> T,
    op: BinaryOp<R>,
) -> CliResult<Outcome> {
    let len = lhs.len().min(rhs.len());
    let a = upload(client, &lhs[..len])?;
    let b = upload(client, &rhs[..len])?;
    let out = client.empty(len * T::ELEM.size())?;
    launch_timed(client, name, || op(client, &a, &b, &out, len, T::ELEM))?;
    let got: Vec<T> = download(client, out)?;
    let want: Vec<T> = lhs
        .iter()
        .zip(rhs)
        .map(|(a, b)| reference(*a, *b))
        .collect();
    Ok(Outcome::Checked(
        verify::exact(&got, &want),
        Tolerance::Exact,
    ))
}

/// The sum of each row of a random `rows`×`cols` f32 matrix through `ops::reduce_sum`,
/// compared with a relative error of at most [`F32_TOLERANCE`].
fn reduce_sum<R: Runtime>(
    client: &ComputeClient<R>,
    rng: &mut Rng,
    rows: usize,
    cols: usize,
) -> CliResult<Outcome> {
    let data = rng.draws(rows * cols, |r| r.range_f32(-1.0, 1.0));
    let input = upload(client, &data)?;
    let out = client.empty(rows * 4)?;
    launch_timed(client, "reduce_sum_f32", || {
        ops::reduce_sum(client, &input, &out, rows, cols, ElemType::F32)
    })?;
    let got: Vec<f64> = download::<R, f32>(client, out)?
        .into_iter()
        .map(f64::from)
        .collect();
    let (want, scale): (Vec<f64>, Vec<f64>) = data
        .chunks_exact(cols)
        .map(|row| {
            row.iter().fold((0.0, 0.0), |(sum, abs), x| {
                (sum + f64::from(*x), abs + f64::from(x.abs()))
            })
        })
        .unzip();
    Ok(Outcome::Checked(
        verify::relative(&got, &want, &scale, F32_TOLERANCE),
        Tolerance::Relative(F32_TOLERANCE),
    ))
}

/// Floats the matmul check runs on.
trait Float: Element {
    fn random(rng: &mut Rng) -> Self;
    fn to_f64(self) -> f64;
}

impl Float for f32 {
    fn random(rng: &mut Rng) -> Self {
        rng.range_f32(-1.0, 1.0)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Float for f64 {
    fn random(rng: &mut Rng) -> Self {
        rng.range_f64(-1.0, 1.0)
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// The product of random `m`×`k` and `k`×`n` matrices through `ops::matmul`, compared with a
/// relative error of at most `tolerance`.
fn matmul<R: Runtime, T: Float>(
    client: &ComputeClient<R>,
    name: &str,
    rng: &mut Rng,
    (m, k, n): (usize, usize, usize),
    tolerance: f64,
) -> CliResult<Outcome> {
    let a: Vec<T> = rng.draws(m * k, T::random);
    let b: Vec<T> = rng.draws(k * n, T::random);
    let lhs = upload(client, &a)?;
    let rhs = upload(client, &b)?;
    let out = client.empty(m * n * T::ELEM.size())?;
    launch_timed(client, name, || {
        ops::matmul(client, &lhs, &rhs, &out, m, k, n, T::ELEM)
    })?;
    let got: Vec<f64> = download::<R, T>(client, out)?
        .into_iter()
        .map(T::to_f64)
        .collect();
    let mut want = vec![0.0f64; m * n];
    let mut scale = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p].to_f64();
            let row = &b[p * n..(p + 1) * n];
            let (want_row, scale_row) = (
                &mut want[i * n..(i + 1) * n],
                &mut scale[i * n..(i + 1) * n],
            );
            for ((w, s), y) in want_row.iter_mut().zip(scale_row.iter_mut()).zip(row) {
                let term = x * y.to_f64();
                *w += term;
                *s += term.abs();
            }
        }
    }
    Ok(Outcome::Checked(
        verify::relative(&got, &want, &scale, tolerance),
        Tolerance::Relative(tolerance),
    ))
}
