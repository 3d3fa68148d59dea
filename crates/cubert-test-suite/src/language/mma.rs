//! The plane's matrix multiply-accumulate (`plane_mma`, tensor cores): each plane of a
//! launch computes `D = C + A·B` for its own 16×K `A`, K×8 `B` and 16×8 `C`, loading its
//! fragments with the documented layout and chaining `plane_mma` over the K blocks. The
//! host computes the same product in `f32`, in `k` order: on integer inputs every sum is
//! exact, so results agree bit for bit on every backend; on random inputs within float
//! rounding. Where `Features::plane_mma` is false the launch is refused with
//! `LaunchError::Unsupported`.

use super::{assert_refused_as_unsupported, read_scalars, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, Handle};

/// Planes per cube in these launches.
const PLANES_PER_CUBE: u32 = 2;

/// Plane `p` of the launch: `d_p = c_p + a_p · b_p`, `a_p` 16×(16·k_blocks) row-major,
/// `b_p` (16·k_blocks)×8 row-major, `c_p` and `d_p` 16×8 row-major, one after the other.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn mma_tiles<T: MmaInput + Float>(
    a: &Array<T>,
    b: &Array<T>,
    c: &Array<f32>,
    d: &mut Array<f32>,
    #[comptime] k_blocks: u32,
) {
    let plane = CUBE_POS * (CUBE_DIM / PLANE_DIM) + UNIT_POS / PLANE_DIM;
    let g = UNIT_POS_PLANE / 4;
    let t = UNIT_POS_PLANE % 4;
    let k = 16 * k_blocks;
    let a_base = plane * 16 * k;
    let b_base = plane * k * 8;
    let c_base = plane * 128;
    let mut acc = [0.0f32; 4];
    acc[0] = c[c_base + g * 8 + 2 * t];
    acc[1] = c[c_base + g * 8 + 2 * t + 1];
    acc[2] = c[c_base + (g + 8) * 8 + 2 * t];
    acc[3] = c[c_base + (g + 8) * 8 + 2 * t + 1];
    for block in 0..k_blocks {
        let k0 = block * 16;
        let mut fa = [T::new(0.0); 8];
        fa[0] = a[a_base + g * k + k0 + 2 * t];
        fa[1] = a[a_base + g * k + k0 + 2 * t + 1];
        fa[2] = a[a_base + (g + 8) * k + k0 + 2 * t];
        fa[3] = a[a_base + (g + 8) * k + k0 + 2 * t + 1];
        fa[4] = a[a_base + g * k + k0 + 2 * t + 8];
        fa[5] = a[a_base + g * k + k0 + 2 * t + 9];
        fa[6] = a[a_base + (g + 8) * k + k0 + 2 * t + 8];
        fa[7] = a[a_base + (g + 8) * k + k0 + 2 * t + 9];
        let mut fb = [T::new(0.0); 4];
        fb[0] = b[b_base + (k0 + 2 * t) * 8 + g];
        fb[1] = b[b_base + (k0 + 2 * t + 1) * 8 + g];
        fb[2] = b[b_base + (k0 + 2 * t + 8) * 8 + g];
        fb[3] = b[b_base + (k0 + 2 * t + 9) * 8 + g];
        plane_mma(&mut acc, fa, fb);
    }
    d[c_base + g * 8 + 2 * t] = acc[0];
    d[c_base + g * 8 + 2 * t + 1] = acc[1];
    d[c_base + (g + 8) * 8 + 2 * t] = acc[2];
    d[c_base + (g + 8) * 8 + 2 * t + 1] = acc[3];
}

/// Each unit's fragments of the `A` and `B` operands at `start`, `stride` of a shared
/// tile (filled from `x`), written out `a_len + b_len` per unit: `A`'s, then `B`'s.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn fragments<T: MmaInput>(
    x: &Array<T>,
    out: &mut Array<T>,
    start: u32,
    stride: u32,
    #[comptime] a_len: u32,
    #[comptime] b_len: u32,
) {
    let mut tile = SharedMemory::<T>::new(2048);
    for i in 0..64u32 {
        tile[UNIT_POS * 64u32 + i] = x[UNIT_POS * 64u32 + i];
    }
    sync_cube();
    let a = plane_load_a(&tile, start, stride);
    let b = plane_load_b(&tile, start, stride);
    for i in 0..a_len {
        out[UNIT_POS * (a_len + b_len) + i] = a[i];
    }
    for i in 0..b_len {
        out[UNIT_POS * (a_len + b_len) + a_len + i] = b[i];
    }
}

/// Each plane (one per cube) computes `d_p = c_p + a_p · b_p` for its 16 × `k` `a_p` and
/// `k` × 8 `b_p` (row-major, one plane's after the other's), through shared memory: per
/// `k_step` (the shape's K) of `k`, the fragments from `plane_load_a`/`plane_load_b` into
/// one `plane_mma`. Works for every fragment type (`A` of `T`, `B` of `U`).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn mma_through_shared<T: MmaInput, U: MmaInput>(
    a: &Array<T>,
    b: &Array<U>,
    c: &Array<f32>,
    d: &mut Array<f32>,
    #[comptime] k: u32,
    #[comptime] k_step: u32,
) {
    let mut a_tile = SharedMemory::<T>::new(16 * k);
    let mut b_tile = SharedMemory::<U>::new(8 * k);
    let plane = CUBE_POS;
    for i in 0..16 * k / 32 {
        a_tile[i * 32 + UNIT_POS] = a[plane * 16 * k + i * 32 + UNIT_POS];
    }
    for i in 0..8 * k / 32 {
        b_tile[i * 32 + UNIT_POS] = b[plane * 8 * k + i * 32 + UNIT_POS];
    }
    sync_cube();
    let g = UNIT_POS_PLANE / 4;
    let t = UNIT_POS_PLANE % 4;
    let c_base = plane * 128;
    let mut acc = [0.0f32; 4];
    for i in 0..4u32 {
        acc[i] = c[c_base + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    }
    for block in 0..k / k_step {
        let fa = plane_load_a(&a_tile, block * k_step, k);
        let fb = plane_load_b(&b_tile, block * k_step * 8, 8);
        plane_mma(&mut acc, fa, fb);
    }
    for i in 0..4u32 {
        d[c_base + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
    }
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    use cubert_runtime::kernel::standard::matmul_mma::matmul_plane_mma;
    vec![
        mma_tiles::definition::<bf16>(4),
        mma_tiles::definition::<f16>(1),
        fragments::definition::<bf16>(8, 4),
        fragments::definition::<f32>(4, 2),
        fragments::definition::<e4m3>(16, 8),
        mma_through_shared::definition::<f32, f32>(32, 8),
        mma_through_shared::definition::<e4m3, e5m2>(64, 32),
        matmul_plane_mma::definition::<bf16>(128, 128, 2, 4, 32, 3),
        matmul_plane_mma::definition::<f16>(64, 64, 2, 2, 64, 4),
        cubert_runtime::kernel::standard::matmul_tf32::matmul_plane_mma_tf32::definition(
            128, 128, 2, 4, 32, 3,
        ),
    ]
}

/// One problem per plane: `a`, `b`, `c` as the kernel lays them out.
struct Problems<T> {
    planes: usize,
    k: usize,
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<f32>,
}

impl<T: MmaInput + Float> Problems<T> {
    /// `planes` problems of depth `k`, their values from `value(index)`.
    fn new(planes: usize, k: usize, value: impl Fn(usize) -> f64) -> Self {
        let a = (0..planes * 16 * k).map(|i| T::new(value(i))).collect();
        let b = (0..planes * k * 8)
            .map(|i| T::new(value(i + 7919)))
            .collect();
        let c = (0..planes * 128)
            .map(|i| value(i + 104_729) as f32)
            .collect();
        Self { planes, k, a, b, c }
    }

    /// `D` on the host: `c + Σ a·b` in `f32`, in `k` order, and `Σ |a·b|` per element.
    fn expected(&self) -> (Vec<f32>, Vec<f32>) {
        let mut d = Vec::with_capacity(self.c.len());
        let mut magnitude = Vec::with_capacity(self.c.len());
        for p in 0..self.planes {
            for i in 0..16 {
                for j in 0..8 {
                    let mut sum = self.c[p * 128 + i * 8 + j];
                    let mut size = sum.abs();
                    for kk in 0..self.k {
                        let product = self.a[p * 16 * self.k + i * self.k + kk].mma_value()
                            * self.b[p * self.k * 8 + kk * 8 + j].mma_value();
                        sum += product;
                        size += product.abs();
                    }
                    d.push(sum);
                    magnitude.push(size);
                }
            }
        }
        (d, magnitude)
    }

    /// Runs the kernel; `None` where the backend refused `plane_mma` as its features say.
    fn run<B: TestBackend>(&self, client: &Client<B>) -> Option<Vec<f32>> {
        let a = upload_scalars::<B, T>(client, &self.a);
        let b = upload_scalars::<B, T>(client, &self.b);
        let c = upload_scalars::<B, f32>(client, &self.c);
        let d: Handle = upload_scalars::<B, f32>(client, &vec![f32::NAN; self.c.len()]);
        let cubes = (self.planes as u32).div_ceil(PLANES_PER_CUBE);
        let launched = mma_tiles::launch::<T, B::R>(
            client,
            CubeCount::Static(cubes, 1, 1),
            CubeDim::new_1d(32 * PLANES_PER_CUBE),
            &a,
            &b,
            &c,
            &d,
            (self.k / 16) as u32,
        );
        if !client.features().plane_mma {
            assert_refused_as_unsupported::<B>(client, launched, "plane_mma");
            return None;
        }
        launched.unwrap();
        Some(read_scalars::<B, f32>(client, &d))
    }
}

fn integer_products_are_exact<B: TestBackend, T: MmaInput + Float>(k: usize) {
    let client = client::<B>();
    let problems = Problems::<T>::new(4, k, |i| ((i * 37 + 11) % 9) as f64 - 4.0);
    let Some(got) = problems.run::<B>(&client) else {
        return;
    };
    let (want, _) = problems.expected();
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "element {index}: {got} != {want}"
        );
    }
}

/// On integer inputs (exact sums) every element of `D` equals the host's product bit for
/// bit: `bf16` fragments, four K blocks chained through the accumulator, four planes.
pub fn plane_mma_of_bf16_integers_is_exact<B: TestBackend>() {
    integer_products_are_exact::<B, bf16>(64);
}

/// The same with `f16` fragments and one K block.
pub fn plane_mma_of_f16_integers_is_exact<B: TestBackend>() {
    integer_products_are_exact::<B, f16>(16);
}

/// On random inputs each element is within float rounding of the host's `f32` sum: at most
/// 2⁻²⁰ of the sum of the magnitudes of its terms (tensor cores sum in their own order and
/// precision).
pub fn plane_mma_of_random_bf16_is_within_rounding<B: TestBackend>() {
    let client = client::<B>();
    let problems = Problems::<bf16>::new(4, 64, |i| {
        let x = (i as u64).wrapping_mul(6_364_136_223_846_793_005) >> 33;
        (x % 20_000) as f64 / 5_000.0 - 2.0
    });
    let Some(got) = problems.run::<B>(&client) else {
        return;
    };
    let (want, magnitude) = problems.expected();
    for (index, ((got, want), size)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let tolerance = size * f32::powi(2.0, -20);
        assert!(
            (got - want).abs() <= tolerance,
            "element {index}: {got} vs {want} (tolerance {tolerance})"
        );
    }
}

/// The tensor-core matmul written on `plane_mma`
/// (`kernel::standard::matmul_mma::matmul_plane_mma`) equals the host's product bit for bit
/// on integer inputs, with every tiling a GPU tries: a shape of whole tiles (lines of 8),
/// one with partial tiles and `k` not a multiple of 8 (element copies, zeros past the
/// edges, no store outside), one with more pipeline steps than stages, and (smallest
/// tiling) more tile rows than a group of the cubes' order. Two more tilings small
/// enough for every backend's shared memory cover two stages and a plane of 32 × 64; a
/// tiling past the device's shared memory is refused with a resource error (before the
/// build, so on every backend), and without tensor cores every other launch is refused as
/// unsupported.
pub fn tensor_core_matmul_of_integers_is_exact<B: TestBackend>() {
    use cubert_runtime::kernel::standard::matmul_mma::matmul_plane_mma;
    tensor_core_matmul_is_exact::<B, bf16>(|client, tiling, (a, b, out), (m, k, n)| {
        let t = tiling;
        matmul_plane_mma::launch::<bf16, B::R>(
            client,
            t.cube_count(m, n),
            CubeDim::new_1d(t.units()),
            a,
            b,
            out,
            m,
            k,
            n,
            t.tile_m,
            t.tile_n,
            t.planes_m,
            t.planes_n,
            t.depth,
            t.stages,
        )
    });
}

/// The same for `f32` multiplied as TF32 (`matmul_tf32::matmul_plane_mma_tf32`, and
/// `matmul_tensor_cores` with `ElemType::F32`): lines of 4, K steps of 8, its own padding
/// and shared-memory size.
pub fn tf32_tensor_core_matmul_of_integers_is_exact<B: TestBackend>() {
    use cubert_runtime::kernel::standard::matmul_tf32::matmul_plane_mma_tf32;
    tensor_core_matmul_is_exact::<B, f32>(|client, tiling, (a, b, out), (m, k, n)| {
        let t = tiling;
        matmul_plane_mma_tf32::launch::<B::R>(
            client,
            t.cube_count(m, n),
            CubeDim::new_1d(t.units()),
            a,
            b,
            out,
            m,
            k,
            n,
            t.tile_m,
            t.tile_n,
            t.planes_m,
            t.planes_n,
            t.depth,
            t.stages,
        )
    });
}

/// A checked launch of a tensor-core matmul kernel with a tiling, on `(lhs, rhs, out)` and
/// `(m, k, n)`.
type CheckedMatmulLaunch<B> = fn(
    &Client<B>,
    &cubert_runtime::kernel::standard::matmul_mma::MmaTiling,
    (&Handle, &Handle, &Handle),
    (u32, u32, u32),
) -> Result<(), cubert_runtime::LaunchError>;

/// [`tensor_core_matmul_of_integers_is_exact`] for elements of `T`: the first shape
/// through `checked`, the others through `matmul_tensor_cores`.
fn tensor_core_matmul_is_exact<B: TestBackend, T: MmaInput + Float>(
    checked: CheckedMatmulLaunch<B>,
) {
    use cubert_runtime::kernel::standard::matmul_mma::{
        MMA_TILINGS, MmaTiling, matmul_tensor_cores,
    };
    use cubert_runtime::{LaunchError, ResourceLimitError};
    let client = client::<B>();
    let extra = [
        MmaTiling {
            tile_m: 64,
            tile_n: 64,
            planes_m: 2,
            planes_n: 2,
            depth: 64,
            stages: 2,
        },
        MmaTiling {
            tile_m: 128,
            tile_n: 64,
            planes_m: 4,
            planes_n: 1,
            depth: 32,
            stages: 3,
        },
    ];
    let shared_max = client.properties().hardware.max_shared_memory_size;
    for tiling in MMA_TILINGS.into_iter().chain(extra) {
        assert!(tiling.is_valid(), "{}", tiling.name());
        let fits = tiling.shared_bytes(T::ELEM) as usize <= shared_max;
        let mut shapes = vec![(128usize, 64usize, 64usize), (80, 36, 72), (200, 168, 136)];
        if tiling.tile_m == 64 && tiling.tile_n == 64 {
            shapes.push((600, 40, 72));
        }
        for &(m, k, n) in &shapes {
            let value = |i: usize| ((i * 29 + 3) % 7) as f64 - 3.0;
            let lhs: Vec<T> = (0..m * k).map(|i| T::new(value(i))).collect();
            let rhs: Vec<T> = (0..k * n).map(|i| T::new(value(i + 5))).collect();
            let a = upload_scalars::<B, T>(&client, &lhs);
            let b = upload_scalars::<B, T>(&client, &rhs);
            // One row more than the product: nothing may be stored past `m × n`.
            let sentinel = T::new(-77.0);
            let out = upload_scalars::<B, T>(&client, &vec![sentinel; (m + 1) * n]);
            // Checked launches on the first shape, unchecked ones (`matmul_tensor_cores`,
            // which checks the arguments) on the others.
            let launched = if (m, k, n) == shapes[0] {
                checked(
                    &client,
                    &tiling,
                    (&a, &b, &out),
                    (m as u32, k as u32, n as u32),
                )
            } else {
                matmul_tensor_cores(&client, &a, &b, &out, (m, k, n), T::ELEM, &tiling)
            };
            if !fits {
                assert!(
                    matches!(
                        launched,
                        Err(LaunchError::TooManyResources(
                            ResourceLimitError::SharedMemory { .. }
                        ))
                    ),
                    "{} needs {} bytes of shared memory, the device has {shared_max}: {launched:?}",
                    tiling.name(),
                    tiling.shared_bytes(T::ELEM)
                );
                break;
            }
            if !client.features().plane_mma {
                assert_refused_as_unsupported::<B>(&client, launched, "the tensor-core matmul");
                return;
            }
            launched.unwrap();
            let got = read_scalars::<B, T>(&client, &out);
            let want = host_product(&lhs, &rhs, (m, k, n));
            for (index, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} {} ({m}, {k}, {n}): out[{}][{}] = {got:?} != {want:?}",
                    T::ELEM,
                    tiling.name(),
                    index / n,
                    index % n
                );
            }
            assert!(
                got[m * n..]
                    .iter()
                    .all(|v| v.to_bits() == sentinel.to_bits()),
                "{}: stored past the product",
                tiling.name()
            );
        }
    }
}

/// `matmul_tensor_cores` refuses what its unchecked launch couldn't run safely, before
/// launching: an element type other than bf16/f16/f32, an invalid tiling, a buffer shorter
/// than its matrix; where the device has no tensor cores, every call is `Unsupported`.
pub fn tensor_core_matmul_refuses_bad_arguments<B: TestBackend>() {
    use cubert_runtime::kernel::standard::matmul_mma::{
        MMA_TILINGS, MmaTiling, matmul_tensor_cores,
    };
    use cubert_runtime::{ElemType, LaunchError};
    let client = client::<B>();
    let a = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 64]);
    let short = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 63]);
    let out = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(0.0); 64 * 64]);
    let tiling = MMA_TILINGS[MMA_TILINGS.len() - 1];
    let uneven = MmaTiling {
        planes_m: 3,
        ..tiling
    };
    let invalid = super::assert_invalid_argument;
    let shape = (64, 64, 64);
    invalid(
        matmul_tensor_cores(&client, &a, &a, &out, shape, ElemType::F64, &tiling),
        "f64 elements",
    );
    invalid(
        matmul_tensor_cores(&client, &a, &a, &out, shape, ElemType::BF16, &uneven),
        "three planes over 64 rows",
    );
    invalid(
        matmul_tensor_cores(&client, &a, &short, &out, shape, ElemType::BF16, &tiling),
        "an rhs one row short",
    );
    let good = matmul_tensor_cores(&client, &a, &a, &out, shape, ElemType::BF16, &tiling);
    if client.features().plane_mma {
        good.unwrap();
        let got = read_scalars::<B, bf16>(&client, &out);
        assert!(got.iter().all(|v| v.to_f32() == 64.0), "ones times ones");
    } else {
        assert!(
            matches!(good, Err(LaunchError::Unsupported { .. })),
            "no tensor cores: {good:?}"
        );
    }
}

/// `lhs × rhs` on the host, each input as the tensor cores take it
/// ([`MmaInput::mma_value`]), summed in `f32` in `k` order and rounded to `T` once: the
/// exact product for the tests' small integers.
pub(crate) fn host_product<T: MmaInput + Float>(
    lhs: &[T],
    rhs: &[T],
    (m, k, n): (usize, usize, usize),
) -> Vec<T> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let sum: f32 = (0..k).fold(0.0, |sum, p| {
                sum + lhs[i * k + p].mma_value() * rhs[p * n + j].mma_value()
            });
            out.push(T::new(f64::from(sum)));
        }
    }
    out
}

/// `plane_load_a` / `plane_load_b` give each unit its elements of the operand at
/// `tile[start + row * stride + column]` (the layout of the type's `MmaShape`), bit for
/// bit, for each fragment type's shape (16-, 32- and 8-bit elements), whether the rows are
/// 16-byte aligned (one `ldmatrix` on CUDA where it applies) or not (element by element).
pub fn fragment_loads_give_each_unit_its_elements<B: TestBackend>() {
    fragment_loads_match_the_layout::<B, bf16>(|i| bf16::from_bits(0x3f80 + i as u16));
    fragment_loads_match_the_layout::<B, f32>(|i| f32::from_bits(0x3f80_0000 + i as u32 * 977));
    // 0x00..=0x6f: no NaN among them; a position's value repeats every 112 elements.
    fragment_loads_match_the_layout::<B, e4m3>(|i| e4m3::from_bits((i % 112) as u8));
}

fn fragment_loads_match_the_layout<B: TestBackend, T: MmaInput>(value: impl Fn(usize) -> T) {
    use cubert_runtime::lang::ir::{MmaOperand, MmaShape};
    let client = client::<B>();
    let shape = MmaShape::of(T::ELEM).unwrap();
    let (k, r) = (shape.k(), shape.per_register());
    let a_len = shape.fragment_len(MmaOperand::A);
    let b_len = shape.fragment_len(MmaOperand::B);
    let per_unit = a_len + b_len;
    let values: Vec<T> = (0..2048).map(&value).collect();
    let x = upload_scalars::<B, T>(&client, &values);
    // Aligned rows (starts and strides of 16 bytes), then unaligned ones.
    for (start, stride) in [(0, k), (4 * r, k + 4 * r), (3, k + 1), (1, k + 4 * r)] {
        let out = upload_scalars::<B, T>(&client, &vec![value(2047); 32 * per_unit as usize]);
        let launched = fragments::launch::<T, B::R>(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(32),
            &x,
            &out,
            start,
            stride,
            a_len,
            b_len,
        );
        if !client.features().plane_mma {
            assert_refused_as_unsupported::<B>(&client, launched, "fragment loads");
            return;
        }
        launched.unwrap();
        let got = read_scalars::<B, T>(&client, &out);
        for lane in 0..32u32 {
            for i in 0..per_unit {
                let (row, column) = if i < a_len {
                    shape.a(lane, i)
                } else {
                    shape.b(lane, i - a_len)
                };
                let want = values[(start + row * stride + column) as usize];
                assert_eq!(
                    got[(lane * per_unit + i) as usize].to_bits(),
                    want.to_bits(),
                    "{}: start {start}, stride {stride}: lane {lane}, element {i}",
                    T::ELEM
                );
            }
        }
    }
}

/// `planes` products of depth `k` through [`mma_through_shared`], from `a`, `b` and `c`:
/// `D` as the backend computed it and as the host does (`c + Σ a·b` in `f32` in `k`
/// order on the values the tensor cores multiply), with `Σ |a·b|` per element; `None`
/// where the backend refused it as its features say.
#[allow(clippy::type_complexity)]
fn mma_through_shared_and_host<B: TestBackend, T: MmaInput, U: MmaInput>(
    k: u32,
    a: &[T],
    b: &[U],
    c: &[f32],
) -> Option<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    use cubert_runtime::lang::ir::MmaShape;
    let client = client::<B>();
    let k_step = MmaShape::of(T::ELEM).unwrap().k();
    let planes = c.len() / 128;
    let ku = k as usize;
    let d: Handle = upload_scalars::<B, f32>(&client, &vec![f32::NAN; c.len()]);
    let launched = mma_through_shared::launch::<T, U, B::R>(
        &client,
        CubeCount::Static(planes as u32, 1, 1),
        CubeDim::new_1d(32),
        &upload_scalars::<B, T>(&client, a),
        &upload_scalars::<B, U>(&client, b),
        &upload_scalars::<B, f32>(&client, c),
        &d,
        k,
        k_step,
    );
    let fp8 = matches!(
        T::ELEM,
        cubert_runtime::ElemType::E4M3 | cubert_runtime::ElemType::E5M2
    );
    let features = client.features();
    if !(if fp8 {
        features.plane_mma_fp8
    } else {
        features.plane_mma
    }) {
        assert_refused_as_unsupported::<B>(&client, launched, "plane_mma");
        return None;
    }
    launched.unwrap();
    let got = read_scalars::<B, f32>(&client, &d);
    let mut want = Vec::with_capacity(c.len());
    let mut magnitude = Vec::with_capacity(c.len());
    for p in 0..planes {
        for i in 0..16 {
            for j in 0..8 {
                let mut sum = c[p * 128 + i * 8 + j];
                let mut size = sum.abs();
                for kk in 0..ku {
                    let product = a[p * 16 * ku + i * ku + kk].mma_value()
                        * b[p * ku * 8 + kk * 8 + j].mma_value();
                    sum += product;
                    size += product.abs();
                }
                want.push(sum);
                magnitude.push(size);
            }
        }
    }
    Some((got, want, magnitude))
}

/// Small integers `-4..=4` from index `i` (exact in every fragment type).
fn small_integer(i: usize) -> f64 {
    ((i * 37 + 11) % 9) as f64 - 4.0
}

/// A float in `[-2, 2)` with a full `f32` mantissa, from index `i`.
fn random_value(i: usize) -> f32 {
    let x = (i as u64 + 1).wrapping_mul(6_364_136_223_846_793_005) >> 40;
    (x as f32) / (1u64 << 24) as f32 * 4.0 - 2.0
}

/// `f32` fragments multiply as TF32 (`m16n8k8`): on integer inputs, through shared memory
/// and four K blocks, `D` is the host's exact product bit for bit.
pub fn plane_mma_of_tf32_integers_is_exact<B: TestBackend>() {
    let k = 32;
    let a: Vec<f32> = (0..3 * 16 * k).map(|i| small_integer(i) as f32).collect();
    let b: Vec<f32> = (0..3 * k * 8)
        .map(|i| small_integer(i + 7919) as f32)
        .collect();
    let c: Vec<f32> = (0..3 * 128)
        .map(|i| small_integer(i + 104_729) as f32)
        .collect();
    let Some((got, want, _)) = mma_through_shared_and_host::<B, f32, f32>(k as u32, &a, &b, &c)
    else {
        return;
    };
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "element {index}: {got} != {want}"
        );
    }
}

/// On random `f32` inputs (full mantissas) each element is within float rounding of the
/// host's sum of the inputs rounded to TF32 to nearest, ties away (2⁻²⁰ of the sum of the
/// terms' magnitudes): a device that truncated the inputs, or rounded them to even, would
/// miss it by about 2⁻¹¹. An input exactly halfway between two TF32 values (1 + 2⁻¹¹)
/// rounds away from zero.
pub fn plane_mma_of_random_f32_rounds_inputs_to_tf32<B: TestBackend>() {
    let k = 32;
    let mut a: Vec<f32> = (0..2 * 16 * k).map(random_value).collect();
    let b: Vec<f32> = (0..2 * k * 8).map(|i| random_value(i + 7919)).collect();
    let c: Vec<f32> = (0..2 * 128).map(|i| random_value(i + 104_729)).collect();
    a[0] = 1.0 + f32::powi(2.0, -11);
    assert_eq!(a[0].mma_value(), 1.0 + f32::powi(2.0, -10));
    let Some((got, want, magnitude)) =
        mma_through_shared_and_host::<B, f32, f32>(k as u32, &a, &b, &c)
    else {
        return;
    };
    for (index, ((got, want), size)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let tolerance = size * f32::powi(2.0, -20);
        assert!(
            (got - want).abs() <= tolerance,
            "element {index}: {got} vs {want} (tolerance {tolerance})"
        );
    }
}

/// 8-bit float fragments (`m16n8k32`), `e4m3` by `e5m2` and `e4m3` by `e4m3`: on integer
/// inputs `D` is the host's exact product bit for bit; on random inputs (every product
/// exact) within 2⁻¹² of the sum of the terms' magnitudes (the hardware's 8-bit products
/// are summed at its own, lower, precision).
pub fn plane_mma_of_fp8_matches_the_host<B: TestBackend>() {
    let k = 64;
    let c: Vec<f32> = (0..2 * 128)
        .map(|i| small_integer(i + 104_729) as f32)
        .collect();
    let a: Vec<e4m3> = (0..2 * 16 * k)
        .map(|i| e4m3::from_f64(small_integer(i)))
        .collect();
    let b5: Vec<e5m2> = (0..2 * k * 8)
        .map(|i| e5m2::from_f64(small_integer(i + 7919)))
        .collect();
    let b4: Vec<e4m3> = b5.iter().map(|x| e4m3::from_f32(x.to_f32())).collect();
    for result in [
        mma_through_shared_and_host::<B, e4m3, e5m2>(k as u32, &a, &b5, &c),
        mma_through_shared_and_host::<B, e4m3, e4m3>(k as u32, &a, &b4, &c),
    ] {
        let Some((got, want, _)) = result else {
            return;
        };
        for (index, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "element {index}: {got} != {want}"
            );
        }
    }
    let a: Vec<e4m3> = (0..2 * 16 * k)
        .map(|i| e4m3::from_f32(random_value(i)))
        .collect();
    let b: Vec<e5m2> = (0..2 * k * 8)
        .map(|i| e5m2::from_f32(random_value(i + 7919)))
        .collect();
    let c: Vec<f32> = (0..2 * 128).map(|i| random_value(i + 104_729)).collect();
    let Some((got, want, magnitude)) =
        mma_through_shared_and_host::<B, e4m3, e5m2>(k as u32, &a, &b, &c)
    else {
        return;
    };
    for (index, ((got, want), size)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let tolerance = size * f32::powi(2.0, -12);
        assert!(
            (got - want).abs() <= tolerance,
            "element {index}: {got} vs {want} (tolerance {tolerance})"
        );
    }
}
