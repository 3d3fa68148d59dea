//! Differential property tests of the kernel language: the same kernels on random inputs
//! and launch shapes, on a reference client (the CPU) and on a device client, must agree
//! bit for bit for integers, casts, IEEE-exact float operations (`+ - * /`, `sqrt`, `min`,
//! `max`, `abs`, `mul_add`) and plane sums, and within 4 ulps for the transcendental
//! functions (`exp`, `ln`, `sin`, `tanh`, whose libraries differ). proptest shrinks a
//! failure to a small input.
//!
//! Each test is a function of the two clients; a backend's test crate calls it with CPU
//! device 0 and its own device (CUDA's `gpu.rs`, wgpu's `differential.rs`). Where the
//! device's float math is not strict (`Features::strict_float_math` false: WGSL lets the
//! driver contract `a * b + c`, compute `mul_add` unfused and flush subnormal values) the
//! two float operations that mix a product and a sum may also equal their contracted (or
//! unfused) form, computed on the host, a subnormal argument, intermediate product or
//! result of the exact ones may count as zero, and a subnormal argument or result of the
//! transcendental ones may count as zero. Plane sums are compared where both devices have
//! planes of the same size.

use crate::language::{is_subnormal, within_ulps};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, ComputeClient, CubeCount, CubeDim, Handle, Runtime};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};

/// Integer arithmetic with the language's wrapping, division-by-zero and shift rules.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn integer_mix<T: Int>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let shift = (b & x[0]) as u32;
        out[i] = (a * b + (a >> 3u32)) ^ (a / b) ^ (b % a) ^ (a << shift) ^ (-a).abs().min(b);
    }
}

/// One operation per output slot: four exact ones, then four transcendental ones.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_ops(x: &Array<f32>, y: &Array<f32>, out: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        out[8 * i] = a * b + a;
        out[8 * i + 1] = a / b;
        out[8 * i + 2] = a.abs().sqrt();
        out[8 * i + 3] = a.mul_add(b, -a).min(b.max(a));
        out[8 * i + 4] = a.exp();
        out[8 * i + 5] = a.abs().ln();
        out[8 * i + 6] = a.sin();
        out[8 * i + 7] = a.tanh();
    }
}

/// Casts of every input to several types, and back.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_casts(
    x: &Array<f32>,
    ints: &mut Array<i32>,
    bytes: &mut Array<u8>,
    halves: &mut Array<f16>,
    wide: &mut Array<f64>,
) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        ints[i] = v as i32;
        bytes[i] = v as u8;
        halves[i] = v as f16;
        wide[i] = (v as f16) as f64 + v as f64;
    }
}

/// The plane sum of each unit's value: bit-equal on both backends by construction.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn plane_sums(x: &Array<f32>, out: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        out[i] = plane_sum(x[i]);
    }
}

/// Uploads `values`.
fn upload<R: Runtime, T: bytemuck::Pod + Send + Sync>(
    client: &ComputeClient<R>,
    values: &[T],
) -> Handle {
    client.create(Bytes::from_elems(values.to_vec())).unwrap()
}

/// Reads `handle` as `T`s.
fn read<R: Runtime, T: bytemuck::Pod>(client: &ComputeClient<R>, handle: &Handle) -> Vec<T> {
    client.read_one(handle.clone()).unwrap().to_elems::<T>()
}

/// `bytes` zero bytes (at least one).
fn zeros<R: Runtime>(client: &ComputeClient<R>, bytes: usize) -> Handle {
    client
        .create(Bytes::from_elems(vec![0u8; bytes.max(1)]))
        .unwrap()
}

/// Cubes of `cube` units covering `n` units.
fn grid(n: usize, cube: u32) -> (CubeCount, CubeDim) {
    (
        CubeCount::Static((n as u32).div_ceil(cube).max(1), 1, 1),
        CubeDim::new_1d(cube),
    )
}

/// Runs `integer_mix::<T>` on `R`.
fn run_integers<R: Runtime, T: Int + bytemuck::Pod + Send + Sync>(
    client: &ComputeClient<R>,
    x: &[T],
    y: &[T],
    cube: u32,
) -> Vec<T> {
    let client = client.clone();
    let (xs, ys) = (upload(&client, x), upload(&client, y));
    let out = zeros(&client, size_of_val(x));
    let (count, dim) = grid(x.len(), cube);
    integer_mix::launch::<T, R>(&client, count, dim, &xs, &ys, &out).unwrap();
    read(&client, &out)
}

/// Runs `float_ops` on `R`.
fn run_floats<R: Runtime>(client: &ComputeClient<R>, x: &[f32], y: &[f32], cube: u32) -> Vec<f32> {
    let client = client.clone();
    let (xs, ys) = (upload(&client, x), upload(&client, y));
    let out = zeros(&client, 8 * x.len() * 4);
    let (count, dim) = grid(x.len(), cube);
    float_ops::launch::<R>(&client, count, dim, &xs, &ys, &out).unwrap();
    read(&client, &out)
}

/// The results of `float_casts`: `i32`, `u8`, `f16` bits and `f64`.
type Casts = (Vec<i32>, Vec<u8>, Vec<u16>, Vec<f64>);

/// Runs `float_casts` on `R`.
fn run_casts<R: Runtime>(client: &ComputeClient<R>, x: &[f32], cube: u32) -> Casts {
    let client = client.clone();
    let xs = upload(&client, x);
    let n = x.len();
    let (ints, bytes, halves, wide) = (
        zeros(&client, n * 4),
        zeros(&client, n),
        zeros(&client, n * 2),
        zeros(&client, n * 8),
    );
    let (count, dim) = grid(n, cube);
    float_casts::launch::<R>(&client, count, dim, &xs, &ints, &bytes, &halves, &wide).unwrap();
    (
        read(&client, &ints),
        read::<R, u8>(&client, &bytes)[..n].to_vec(),
        read(&client, &halves),
        read(&client, &wide),
    )
}

/// Runs `plane_sums` on `R`.
fn run_plane_sums<R: Runtime>(client: &ComputeClient<R>, x: &[f32], cube: u32) -> Vec<f32> {
    let client = client.clone();
    let xs = upload(&client, x);
    let out = zeros(&client, x.len() * 4);
    let (count, dim) = grid(x.len(), cube);
    plane_sums::launch::<R>(&client, count, dim, &xs, &out).unwrap();
    read(&client, &out)
}

/// Any f32: ordinary values of every magnitude, and the special ones.
fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => any::<f32>(),
        4 => -1.0e4f32..1.0e4,
        1 => Just(0.0f32),
        1 => Just(-0.0f32),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NAN),
        1 => Just(f32::MIN_POSITIVE / 8.0),
    ]
}

/// Cube sizes of one to eight planes of 32.
fn cube_dims() -> impl Strategy<Value = u32> {
    prop_oneof![Just(32u32), Just(64), Just(96), Just(256)]
}

/// Whether `a` and `b` are the same float (any NaN equals any NaN).
fn bits_equal(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Runs `test` on 48 generated cases of `strategy`; panics with the shrunk failing case.
/// The cases are the same in every run (proptest's fixed seed), so CI can't pass one run
/// and fail the next on the same code.
fn run_cases<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let config = Config {
        cases: 48,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{failure}");
    }
}

/// `integer_mix` of `i32`, `u8` and `i64` (wrapping, division by zero, shifts) agrees bit
/// for bit.
pub fn integer_kernels_agree_bit_for_bit<R: Runtime, D: Runtime>(
    reference: &ComputeClient<R>,
    device: &ComputeClient<D>,
) {
    let wide = device
        .properties()
        .features
        .supports_type(cubert_runtime::ElemType::I64);
    let strategy = (
        prop::collection::vec((any::<i32>(), any::<i32>()), 1..3000),
        cube_dims(),
    );
    run_cases(strategy, |(pairs, cube)| {
        let (x, y): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
        prop_assert_eq!(
            run_integers(reference, &x, &y, cube),
            run_integers(device, &x, &y, cube)
        );
        let (xu, yu): (Vec<u8>, Vec<u8>) = pairs.iter().map(|(a, b)| (*a as u8, *b as u8)).unzip();
        prop_assert_eq!(
            run_integers(reference, &xu, &yu, cube),
            run_integers(device, &xu, &yu, cube)
        );
        if wide {
            let (xl, yl): (Vec<i64>, Vec<i64>) = pairs
                .iter()
                .map(|(a, b)| (i64::from(*a) << 17, i64::from(*b)))
                .unzip();
            prop_assert_eq!(
                run_integers(reference, &xl, &yl, cube),
                run_integers(device, &xl, &yl, cube)
            );
        }
        Ok(())
    });
}

/// `float_ops`: `a * b + a`, `a / b`, `sqrt`, `mul_add`/`min`/`max` agree bit for bit (or
/// equal their contracted form where the device's float math is not strict), `exp`, `ln`,
/// `sin` and `tanh` within 4 ulps.
pub fn float_operations_agree_exactly_or_within_4_ulps<R: Runtime, D: Runtime>(
    reference: &ComputeClient<R>,
    device: &ComputeClient<D>,
) {
    let relaxed = !device.properties().features.strict_float_math;
    let strategy = (
        prop::collection::vec((any_f32(), any_f32()), 1..2000),
        cube_dims(),
    );
    run_cases(strategy, |(pairs, cube)| {
        let (x, y): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
        let expected = run_floats(reference, &x, &y, cube);
        let got = run_floats(device, &x, &y, cube);
        for (index, (want, got)) in expected.iter().zip(&got).enumerate() {
            let (input, slot) = (index / 8, index % 8);
            let (a, b) = (x[input], y[input]);
            // min/max may pick either zero of -0.0 and +0.0.
            let zeros = slot == 3 && *want == 0.0 && *got == 0.0;
            let other_rounding = match slot {
                0 => Some(a.mul_add(b, a)),
                3 => Some((a * b - a).min(b.max(a))),
                _ => None,
            };
            // Subnormal inputs and results may be flushed to zero.
            let flush = |v: f32| {
                if is_subnormal(v) {
                    0.0f32.copysign(v)
                } else {
                    v
                }
            };
            let (fa, fb) = (flush(a), flush(b));
            // A device that flushes flushes every operation's subnormal result, the
            // product of `a * b + a` too where the driver keeps it apart from the sum
            // (wgpu's strict SPIR-V on NVIDIA's driver: `NoContraction`, no
            // `DenormPreserve`).
            let flushed = [
                flush(fa * fb) + fa,
                fa / fb,
                fa.abs().sqrt(),
                fa.mul_add(fb, -fa).min(fb.max(fa)),
            ];
            let ok = if slot < 4 {
                bits_equal(*want, *got)
                    || zeros
                    || (relaxed && other_rounding.is_some_and(|other| bits_equal(other, *got)))
                    || (relaxed
                        && (bits_equal(flush(flushed[slot]), *got)
                            || bits_equal(flush(*want), *got)
                            || (*got == 0.0 && flushed[slot] == 0.0)
                            // A driver that flushes may also return a subnormal where the
                            // flushed result is zero (NVIDIA's `min`/`max` of subnormals,
                            // compared as equal zeros, combine both operands' bits).
                            || (flush(*got) == 0.0 && flush(flushed[slot]) == 0.0)))
                    // `min`/`max` of subnormals compare them as zeros (equal) and may pick
                    // either operand.
                    || (relaxed
                        && slot == 3
                        && (is_subnormal(a) || is_subnormal(b))
                        && [a, b, -a, -b, 0.0].contains(got))
            } else {
                // Where subnormals may be flushed, the result at a flushed argument, or
                // zero for a subnormal result, also holds.
                let at = |v: f32| [v.exp(), v.abs().ln(), v.sin(), v.tanh()][slot - 4];
                let near =
                    |w: f32| within_ulps(w, *got, 4) || (relaxed && is_subnormal(w) && *got == 0.0);
                near(*want) || (relaxed && is_subnormal(a) && near(at(fa)))
            };
            prop_assert!(
                ok,
                "slot {} of input ({:?}, {:?}): reference {:?}, device {:?}",
                slot,
                a,
                b,
                want,
                got
            );
        }
        Ok(())
    });
}

/// `float_casts`: f32 to `i32`, `u8`, `f16` and `f64` (through `f16`) agree bit for bit.
pub fn casts_agree_bit_for_bit<R: Runtime, D: Runtime>(
    reference: &ComputeClient<R>,
    device: &ComputeClient<D>,
) {
    let strategy = (prop::collection::vec(any_f32(), 1..3000), cube_dims());
    run_cases(strategy, |(x, cube)| {
        let expected = run_casts(reference, &x, cube);
        let got = run_casts(device, &x, cube);
        prop_assert_eq!(&expected.0, &got.0, "to i32");
        prop_assert_eq!(&expected.1, &got.1, "to u8");
        prop_assert_eq!(&expected.2, &got.2, "to f16 (bits)");
        for (want, got) in expected.3.iter().zip(&got.3) {
            prop_assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "to f64: {} vs {}",
                want,
                got
            );
        }
        Ok(())
    });
}

/// `plane_sum` agrees bit for bit where both devices have planes of one size: the sum's
/// order is the language's, not the driver's. Says so on standard error and returns where
/// the plane sizes differ or the device has no planes.
pub fn plane_sums_agree_bit_for_bit<R: Runtime, D: Runtime>(
    reference: &ComputeClient<R>,
    device: &ComputeClient<D>,
) {
    let planes = |hardware: &cubert_runtime::properties::HardwareProperties| {
        (hardware.plane_size_min, hardware.plane_size_max)
    };
    let (ours, theirs) = (
        planes(&reference.properties().hardware),
        planes(&device.properties().hardware),
    );
    if !device.properties().features.plane || ours != theirs || ours.0 != ours.1 {
        eprintln!("plane sizes {ours:?} and {theirs:?}: no plane sums to compare");
        return;
    }
    let strategy = (
        prop::collection::vec(-1.0e6f32..1.0e6, 1..3000),
        cube_dims(),
    );
    run_cases(strategy, |(x, cube)| {
        let expected = run_plane_sums(reference, &x, cube);
        let got = run_plane_sums(device, &x, cube);
        for (index, (want, got)) in expected.iter().zip(&got).enumerate() {
            prop_assert!(
                bits_equal(*want, *got),
                "unit {}: reference {:?}, device {:?}",
                index,
                want,
                got
            );
        }
        Ok(())
    });
}
