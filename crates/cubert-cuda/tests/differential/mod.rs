//! Differential property tests of the kernel language: the same kernels on random inputs
//! and launch shapes, on the CPU and on CUDA, must agree bit for bit for integers, casts,
//! IEEE-exact float operations (`+ - * /`, `sqrt`, `min`, `max`, `abs`, `mul_add`) and plane
//! sums, and within 4 ulps for the transcendental functions (`exp`, `ln`, `sin`, `tanh`,
//! whose libraries differ). proptest shrinks a failure to a small input.
//!
//! Needs a CUDA device: part of `gpu.rs`, `#[ignore = "needs a CUDA device"]`.

use cubert_cpu::{CpuDevice, CpuRuntime};
use cubert_cuda::{CudaDevice, CudaRuntime};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, ComputeClient, CubeCount, CubeDim, Handle, Runtime};
use cubert_test_suite::language::within_ulps;
use proptest::prelude::*;

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

fn upload<R: Runtime, T: bytemuck::Pod + Send + Sync>(
    client: &ComputeClient<R>,
    values: &[T],
) -> Handle {
    client.create(Bytes::from_elems(values.to_vec())).unwrap()
}

fn read<R: Runtime, T: bytemuck::Pod>(client: &ComputeClient<R>, handle: &Handle) -> Vec<T> {
    client.read_one(handle.clone()).unwrap().to_elems::<T>()
}

fn zeros<R: Runtime>(client: &ComputeClient<R>, bytes: usize) -> Handle {
    client
        .create(Bytes::from_elems(vec![0u8; bytes.max(1)]))
        .unwrap()
}

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

fn run_floats<R: Runtime>(client: &ComputeClient<R>, x: &[f32], y: &[f32], cube: u32) -> Vec<f32> {
    let client = client.clone();
    let (xs, ys) = (upload(&client, x), upload(&client, y));
    let out = zeros(&client, 8 * x.len() * 4);
    let (count, dim) = grid(x.len(), cube);
    float_ops::launch::<R>(&client, count, dim, &xs, &ys, &out).unwrap();
    read(&client, &out)
}

type Casts = (Vec<i32>, Vec<u8>, Vec<u16>, Vec<f64>);

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

fn cube_dims() -> impl Strategy<Value = u32> {
    prop_oneof![Just(32u32), Just(64), Just(96), Just(256)]
}

/// CPU device 0 and CUDA device 0.
fn clients() -> (ComputeClient<CpuRuntime>, ComputeClient<CudaRuntime>) {
    (
        CpuRuntime::client(&CpuDevice::new(0)).unwrap(),
        CudaRuntime::client(&CudaDevice::new(0)).unwrap(),
    )
}

fn bits_equal(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    #[ignore = "needs a CUDA device"]
    fn integer_kernels_agree_bit_for_bit(
        pairs in prop::collection::vec((any::<i32>(), any::<i32>()), 1..3000),
        cube in cube_dims(),
    ) {
        let (cpu, gpu) = clients();
        let (x, y): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
        prop_assert_eq!(run_integers(&cpu, &x, &y, cube), run_integers(&gpu, &x, &y, cube));
        let (xu, yu): (Vec<u8>, Vec<u8>) = pairs.iter().map(|(a, b)| (*a as u8, *b as u8)).unzip();
        prop_assert_eq!(run_integers(&cpu, &xu, &yu, cube), run_integers(&gpu, &xu, &yu, cube));
        let (xl, yl): (Vec<i64>, Vec<i64>) =
            pairs.iter().map(|(a, b)| (i64::from(*a) << 17, i64::from(*b))).unzip();
        prop_assert_eq!(run_integers(&cpu, &xl, &yl, cube), run_integers(&gpu, &xl, &yl, cube));
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn float_operations_agree_exactly_or_within_4_ulps(
        pairs in prop::collection::vec((any_f32(), any_f32()), 1..2000),
        cube in cube_dims(),
    ) {
        let (x, y): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
        let (cpu, gpu) = clients();
        let on_cpu = run_floats(&cpu, &x, &y, cube);
        let on_gpu = run_floats(&gpu, &x, &y, cube);
        for (index, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
            let (input, slot) = (index / 8, index % 8);
            // min/max may pick either zero of -0.0 and +0.0.
            let zeros = slot == 3 && *c == 0.0 && *g == 0.0;
            let ok = if slot < 4 { bits_equal(*c, *g) || zeros } else { within_ulps(*c, *g, 4) };
            prop_assert!(ok, "slot {} of input ({:?}, {:?}): cpu {:?}, cuda {:?}", slot, x[input], y[input], c, g);
        }
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn casts_agree_bit_for_bit(
        x in prop::collection::vec(any_f32(), 1..3000),
        cube in cube_dims(),
    ) {
        let (cpu, gpu) = clients();
        let on_cpu = run_casts(&cpu, &x, cube);
        let on_gpu = run_casts(&gpu, &x, cube);
        prop_assert_eq!(&on_cpu.0, &on_gpu.0, "to i32");
        prop_assert_eq!(&on_cpu.1, &on_gpu.1, "to u8");
        prop_assert_eq!(&on_cpu.2, &on_gpu.2, "to f16 (bits)");
        for (c, g) in on_cpu.3.iter().zip(&on_gpu.3) {
            prop_assert!(c.to_bits() == g.to_bits() || (c.is_nan() && g.is_nan()), "to f64: {} vs {}", c, g);
        }
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn plane_sums_agree_bit_for_bit(
        x in prop::collection::vec(-1.0e6f32..1.0e6, 1..3000),
        cube in cube_dims(),
    ) {
        let (cpu, gpu) = clients();
        let on_cpu = run_plane_sums(&cpu, &x, cube);
        let on_gpu = run_plane_sums(&gpu, &x, cube);
        for (index, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
            prop_assert!(bits_equal(*c, *g), "unit {}: cpu {:?}, cuda {:?}", index, c, g);
        }
    }
}
