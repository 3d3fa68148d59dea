//! Throughput of the kernel language's transcendental functions: one elementwise kernel
//! per function over 64M elements (4M quick; fewer where the device's buffers are
//! smaller), in `f32` and, where the backend has them (`Features::f64_transcendentals`),
//! in `f64`. On CUDA the functions are libdevice's; on
//! wgpu cubert's own (`exp`, `ln`, `sin`, ... in software, within a few ulps of the CPU's,
//! because WGSL's built-ins are too loose); on the CPU Rust's `std`.
//!
//! Figures, in billions of elements per second: `cubert_math_<type>_<function>` for
//! `exp`, `ln`, `sin`, `tanh` and `powf`, next to the baseline `cubert_math_<type>_copy`, the
//! same kernel with the function left out (one load, one store: what memory allows).
//! Arguments are counter-based pseudo-random numbers over a range each function is used
//! on (`sin` over [-1e4, 1e4], as rotary position embeddings reach). Each kernel's output is
//! checked first, on a strided sample, within 4 ulps of the host's `std` computed in `f64`;
//! then it is timed by `client.profile` (device events on GPUs), median of 10 (3 quick)
//! after a warm-up.

use super::recorder::Recorder;
use super::timing::{median, profile_clock, profiled_seconds, warm_up};
use crate::error::CliResult;
use crate::rng::mix_f32;
use cubert::lang::prelude::*;
use cubert::{Bytes, ComputeClient, CubeDim, ElemType, Handle, Runtime, ops};

/// The functions measured, with the range of their arguments (`powf`: the base's; its
/// exponent is in [-4, 4]).
const FUNCTIONS: [(&str, f64, f64); 6] = [
    ("copy", -1.0, 1.0),
    ("exp", -80.0, 80.0),
    ("ln", 0.0, 1e6),
    ("sin", -1e4, 1e4),
    ("tanh", -10.0, 10.0),
    ("powf", 0.0, 10.0),
];

/// Figures this group measures: every function in both types.
pub const FIGURES: u64 = 2 * FUNCTIONS.len() as u64;

/// Elements of each launch.
fn elements(quick: bool) -> usize {
    if quick { 1 << 22 } else { 1 << 26 }
}

/// Elements checked against the host.
const SAMPLES: usize = 4096;

/// `out[i] = f(x[i])` (`f(x[i], y[i])` for `powf`), for function number `function` of
/// [`FUNCTIONS`] (0 copies).
#[cubert::kernel]
fn apply<F: Float>(x: &Array<F>, y: &Array<F>, out: &mut Array<F>, #[comptime] function: u32) {
    let i = ABSOLUTE_POS;
    if i < out.len() {
        let v = x[i];
        if function == 0 {
            out[i] = v;
        } else if function == 1 {
            out[i] = v.exp();
        } else if function == 2 {
            out[i] = v.ln();
        } else if function == 3 {
            out[i] = v.sin();
        } else if function == 4 {
            out[i] = v.tanh();
        } else {
            out[i] = v.powf(y[i]);
        }
    }
}

/// A float type measured by this group.
trait MathFloat: Float {
    /// The type's name in the figures.
    const NAME: &'static str;
    /// `value` rounded into the type.
    fn of(value: f64) -> Self;
    /// The value as `f64`.
    fn wide(self) -> f64;
    /// The values as bytes to upload.
    fn bytes(values: Vec<Self>) -> Bytes;
    /// The values of bytes read back.
    fn values(bytes: &Bytes) -> Vec<Self>;
}

impl MathFloat for f32 {
    const NAME: &'static str = "f32";
    fn bytes(values: Vec<Self>) -> Bytes {
        Bytes::from_elems(values)
    }
    fn values(bytes: &Bytes) -> Vec<Self> {
        bytes.to_elems::<f32>()
    }
    fn of(value: f64) -> Self {
        value as f32
    }
    fn wide(self) -> f64 {
        f64::from(self)
    }
}

impl MathFloat for f64 {
    const NAME: &'static str = "f64";
    fn bytes(values: Vec<Self>) -> Bytes {
        Bytes::from_elems(values)
    }
    fn values(bytes: &Bytes) -> Vec<Self> {
        bytes.to_elems::<f64>()
    }
    fn of(value: f64) -> Self {
        value
    }
    fn wide(self) -> f64 {
        self
    }
}

/// How far apart `a` and `b` are, in ulps of their type (NaN equal to NaN only).
fn ulps<F: MathFloat>(a: F, b: F) -> u64 {
    #[allow(clippy::eq_op)] // `x != x` is the NaN test
    let (a_nan, b_nan) = (a != a, b != b);
    if a_nan || b_nan {
        return if a_nan && b_nan { 0 } else { u64::MAX };
    }
    let sign = 1u64 << (F::ELEM.size() * 8 - 1);
    let ordered = |v: F| {
        let bits = v.to_bits();
        if bits & sign != 0 {
            -i128::from(bits & !sign)
        } else {
            i128::from(bits)
        }
    };
    u64::try_from(ordered(a).abs_diff(ordered(b))).unwrap_or(u64::MAX)
}

/// Argument `index` of function `function` (and the exponent of `powf`).
fn argument(function: usize, index: usize) -> (f64, f64) {
    let (_, low, high) = FUNCTIONS[function];
    let unit = (f64::from(mix_f32(0x6d61_7468, index as u64)) + 1.0) / 2.0;
    let exponent = 4.0 * f64::from(mix_f32(0x706f_7766, index as u64));
    (low + (high - low) * unit, exponent)
}

/// The host's result of function `function` at `(x, y)`, in `f64`.
fn reference(function: usize, x: f64, y: f64) -> f64 {
    match function {
        0 => x,
        1 => x.exp(),
        2 => x.ln(),
        3 => x.sin(),
        4 => x.tanh(),
        _ => x.powf(y),
    }
}

/// Measures every function in `f32`, then in `f64`.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    measure_type::<R, f32>(client, quick, recorder)?;
    let features = client.features();
    if features.types.contains(&ElemType::F64) && features.f64_transcendentals {
        measure_type::<R, f64>(client, quick, recorder)?;
    } else {
        let names: Vec<String> = FUNCTIONS
            .iter()
            .map(|(function, ..)| format!("cubert_math_f64_{function}"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        recorder.not_measured(
            &names,
            &format!(
                "the {} device has no f64 transcendental functions",
                R::name()
            ),
        );
    }
    Ok(())
}

/// Every function's figure for type `F`.
fn measure_type<R: Runtime, F: MathFloat>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    // Fewer where the device's buffers are smaller (lavapipe's: 128 MiB); the figure's
    // note says how many.
    let largest = client.properties().memory.max_allocation_size;
    let n = super::units::fit(elements(quick) * size_of::<F>(), largest, 1 << 20) / size_of::<F>();
    let reps = if quick { 3 } else { 10 };
    let out = client.empty(n * size_of::<F>())?;
    let count = ops::elementwise_grid(client.properties(), n as u64, 256);
    let dim = CubeDim::new_1d(256);
    for (function, (name, ..)) in FUNCTIONS.iter().enumerate() {
        let figure = format!("cubert_math_{}_{name}", F::NAME);
        recorder.start(&figure);
        let arguments: Vec<(f64, f64)> = (0..n).map(|i| argument(function, i)).collect();
        let x = upload::<R, F>(client, arguments.iter().map(|a| a.0))?;
        let y = upload::<R, F>(client, arguments.iter().map(|a| a.1))?;
        let launch =
            || apply::launch::<F, R>(client, count.clone(), dim, &x, &y, &out, function as u32);
        launch()?;
        let got: Vec<F> = F::values(&client.read_one(out.clone())?);
        let step = (n / SAMPLES).max(1);
        let wrong = (0..n).step_by(step).find_map(|i| {
            let (v, w) = (F::of(arguments[i].0), F::of(arguments[i].1));
            let want = F::of(reference(function, v.wide(), w.wide()));
            (ulps(got[i], want) > 4).then(|| {
                format!(
                    "{name}({}) = {}, want {} (element {i})",
                    v.wide(),
                    got[i].wide(),
                    want.wide()
                )
            })
        });
        if let Some(wrong) = wrong {
            recorder.skip(&figure, &format!("more than 4 ulps off: {wrong}"));
            continue;
        }
        warm_up(client, launch)?;
        let mut seconds = Vec::with_capacity(reps);
        for _ in 0..reps {
            seconds.push(profiled_seconds(client, "math function", launch)?);
        }
        let rate = n as f64 / median(&seconds) / 1e9;
        let note = format!(
            "{n} {} elements, arguments in [{}, {}], {}, median of {reps}",
            F::NAME,
            FUNCTIONS[function].1,
            FUNCTIONS[function].2,
            profile_clock(client)
        );
        recorder.emit(&figure, rate, "Gelem/s", &note);
    }
    Ok(())
}

/// A buffer of `values` rounded into `F`.
fn upload<R: Runtime, F: MathFloat>(
    client: &ComputeClient<R>,
    values: impl Iterator<Item = f64>,
) -> CliResult<Handle> {
    Ok(client.create(F::bytes(values.map(F::of).collect()))?)
}

#[cfg(test)]
mod tests {
    use super::ulps;

    #[test]
    fn ulps_count_representable_values_across_zero_in_both_types() {
        assert_eq!(ulps(1.0f32, f32::from_bits(1.0f32.to_bits() + 3)), 3);
        assert_eq!(ulps(-f32::from_bits(1), f32::from_bits(1)), 2);
        assert_eq!(ulps(-0.0f64, 0.0f64), 0);
        assert_eq!(ulps(f64::MAX, f64::INFINITY), 1);
        assert_eq!(ulps(f32::NAN, f32::NAN), 0);
        assert_eq!(ulps(f64::NAN, 1.0), u64::MAX);
    }
}
