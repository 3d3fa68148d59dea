//! The plane group's multiply-accumulate (`plane_group_mma`, Hopper's `wgmma`): each plane
//! group of a launch computes `D = C + A·B` for its own 64 × `k_total` `A` and
//! `k_total` × N `B`, which it stores into shared memory in the operation's swizzled layouts
//! ([`cubert_runtime::lang::ir::group_mma`]) and multiplies `k` columns per call. The host
//! computes the same product in `f32`, in `k` order: on integer inputs every sum is exact,
//! so results agree bit for bit on every backend; on random inputs within float rounding.
//! Where `Features::plane_group_mma` is false the launch is refused with
//! `LaunchError::Unsupported`.

use super::{assert_refused_as_unsupported, read_scalars, upload_scalars};
use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, ElemType, Handle};

/// Elements of one 64 × 64 block of an operand in shared memory.
const BLOCK: u32 = 4096;

/// Problem `p` (plane group `UNIT_POS / 128` of cube `p / groups`): `d_p = c_p + a_p · b_p`,
/// `a_p` 64 × `k_total` and `b_p` `k_total` × `n` row-major, `c_p` and `d_p` 64 × `n`,
/// each problem's after the other's. `A` goes to shared memory in blocks of 64 columns,
/// `B` in blocks of 64 rows, each in panels of 64 columns, every element at its swizzled
/// place; then the group multiplies `k` columns per call, starting each call's operands
/// `k` columns (rows) further on. `k_total` is a multiple of 64.
#[cubert_macros::kernel(crate = cubert_runtime)]
#[allow(clippy::too_many_arguments)]
fn group_mma_problems<T: MmaInput + Float>(
    a: &Array<T>,
    b: &Array<T>,
    c: &Array<f32>,
    d: &mut Array<f32>,
    a_shift: u32,
    #[comptime] n: u32,
    #[comptime] k: u32,
    #[comptime] k_total: u32,
    #[comptime] groups: u32,
) {
    let mut a_tile = SharedMemory::<T>::new(groups * 64 * k_total);
    let mut b_tile = SharedMemory::<T>::new(groups * k_total * n);
    let group = UNIT_POS / 128u32;
    let unit = UNIT_POS % 128u32;
    let problem = CUBE_POS * groups + group;
    let a_base = group * 64u32 * k_total;
    let b_base = group * k_total * n;
    for i in 0..64u32 * k_total / 128u32 {
        let e = i * 128u32 + unit;
        let r = e / k_total;
        let col = e % k_total;
        let at = a_base + (col / 64u32) * BLOCK + r * 64u32 + col % 64u32;
        a_tile[at ^ (((at / 64u32) % 8u32) * 8u32)] = a[problem * 64u32 * k_total + e];
    }
    for i in 0..k_total * n / 128u32 {
        let e = i * 128u32 + unit;
        let row = e / n;
        let col = e % n;
        let at = b_base
            + (row / 64u32) * (64u32 * n)
            + (col / 64u32) * BLOCK
            + (row % 64u32) * 64u32
            + col % 64u32;
        b_tile[at ^ (((at / 64u32) % 8u32) * 8u32)] = b[problem * k_total * n + e];
    }
    sync_cube();
    let plane = unit / 32u32;
    let g = (unit % 32u32) / 4u32;
    let t = unit % 4u32;
    let mut acc = [0.0f32; 128];
    for i in 0..n / 2u32 {
        let row = 16u32 * plane + g + 8u32 * ((i % 4u32) / 2u32);
        let col = 8u32 * (i / 4u32) + 2u32 * t + i % 2u32;
        acc[i] = c[problem * 64u32 * n + row * n + col];
    }
    for s in 0..k_total / k {
        let kk = s * k;
        let a_start = a_base + (kk / 64u32) * BLOCK + kk % 64u32 + a_shift;
        let b_start = b_base + (kk / 64u32) * (64u32 * n) + (kk % 64u32) * 64u32;
        plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, BLOCK, n, k);
    }
    for i in 0..n / 2u32 {
        let row = 16u32 * plane + g + 8u32 * ((i % 4u32) / 2u32);
        let col = 8u32 * (i / 4u32) + 2u32 * t + i % 2u32;
        d[problem * 64u32 * n + row * n + col] = acc[i];
    }
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        group_mma_problems::definition::<bf16>(128, 64, 128, 1),
        group_mma_problems::definition::<f16>(256, 32, 64, 1),
        group_mma_problems::definition::<bf16>(64, 16, 128, 1),
        group_mma_problems::definition::<bf16>(192, 16, 64, 1),
        group_mma_problems::definition::<bf16>(64, 64, 64, 2),
    ]
}

/// The problems of one launch: `a`, `b`, `c` as the kernel lays them out.
struct Problems<T> {
    count: usize,
    n: usize,
    k_total: usize,
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<f32>,
}

impl<T: MmaInput + Float> Problems<T> {
    fn new(count: usize, n: usize, k_total: usize, value: impl Fn(usize) -> f64) -> Self {
        let a = (0..count * 64 * k_total)
            .map(|i| T::new(value(i)))
            .collect();
        let b = (0..count * k_total * n)
            .map(|i| T::new(value(i + 7919)))
            .collect();
        let c = (0..count * 64 * n)
            .map(|i| value(i + 104_729) as f32)
            .collect();
        Self {
            count,
            n,
            k_total,
            a,
            b,
            c,
        }
    }

    /// `D` on the host: `c + Σ a·b` in `f32`, in `k` order, and `Σ |a·b|` per element.
    fn expected(&self) -> (Vec<f32>, Vec<f32>) {
        let (n, kt) = (self.n, self.k_total);
        let mut d = Vec::with_capacity(self.c.len());
        let mut magnitude = Vec::with_capacity(self.c.len());
        for p in 0..self.count {
            for row in 0..64 {
                for col in 0..n {
                    let mut sum = self.c[(p * 64 + row) * n + col];
                    let mut size = sum.abs();
                    for kk in 0..kt {
                        let product = self.a[(p * 64 + row) * kt + kk].mma_value()
                            * self.b[(p * kt + kk) * n + col].mma_value();
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

    /// Launches the kernel (`a_shift` moves `A`'s start off its place); `None` where the
    /// backend refused `plane_group_mma` as its features say, else the launch's outcome
    /// and `D`'s handle.
    fn launch<B: TestBackend>(
        &self,
        client: &Client<B>,
        k: u32,
        groups: u32,
        a_shift: u32,
    ) -> Option<Handle> {
        let a = upload_scalars::<B, T>(client, &self.a);
        let b = upload_scalars::<B, T>(client, &self.b);
        let c = upload_scalars::<B, f32>(client, &self.c);
        let d: Handle = upload_scalars::<B, f32>(client, &vec![f32::NAN; self.c.len()]);
        let launched = group_mma_problems::launch::<T, B::R>(
            client,
            CubeCount::Static(self.count as u32 / groups, 1, 1),
            CubeDim::new_1d(128 * groups),
            &a,
            &b,
            &c,
            &d,
            a_shift,
            self.n as u32,
            k,
            self.k_total as u32,
            groups,
        );
        if !client.features().plane_group_mma {
            refused_where_denied::<B>(client, launched);
            return None;
        }
        launched.unwrap();
        Some(d)
    }
}

/// Asserts that a launch of these tests' kernel on a backend without the operation was
/// refused: `Unsupported`, or, where the tiles don't fit the device's shared memory (wgpu
/// stores 16-bit floats in 32-bit words), the resource error every backend gives such a
/// kernel before looking at its operations.
fn refused_where_denied<B: TestBackend>(
    client: &Client<B>,
    launched: Result<(), cubert_runtime::LaunchError>,
) {
    use cubert_runtime::{LaunchError, ResourceLimitError, ServerError};
    let result = super::launch_outcome::<B>(client, launched);
    assert!(
        matches!(
            result,
            Err(ServerError::Launch(
                LaunchError::Unsupported { .. }
                    | LaunchError::TooManyResources(ResourceLimitError::SharedMemory { .. })
            ))
        ),
        "plane_group_mma where the features deny it: {result:?}"
    );
}

/// Integer problems of every shape the definitions name: `D` equals the host's bit for bit.
fn integers_are_exact<B: TestBackend, T: MmaInput + Float>(
    (n, k, k_total, groups): (usize, u32, usize, u32),
) {
    let client = client::<B>();
    let count = 2 * groups as usize;
    let problems = Problems::<T>::new(count, n, k_total, |i| ((i * 37 + 11) % 9) as f64 - 4.0);
    let Some(d) = problems.launch::<B>(&client, k, groups, 0) else {
        return;
    };
    let got = read_scalars::<B, f32>(&client, &d);
    let (want, _) = problems.expected();
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "N = {n}, K = {k}: element {index} (problem {}, row {}, column {}): {got} != {want}",
            index / (64 * n),
            index / n % 64,
            index % n
        );
    }
}

/// On integer inputs (exact sums) `plane_group_mma` gives the host's product bit for bit:
/// `bf16` into 128 columns, K = 64, two calls chained through the accumulator.
pub fn plane_group_mma_of_bf16_integers_is_exact<B: TestBackend>() {
    integers_are_exact::<B, bf16>((128, 64, 128, 1));
}

/// The same for `f16` into 256 columns, K = 32 (calls starting 32 columns into a row).
pub fn plane_group_mma_of_f16_integers_is_exact<B: TestBackend>() {
    integers_are_exact::<B, f16>((256, 32, 64, 1));
}

/// The same for every start of `A` within a row (K = 16, eight calls), 64 and 192
/// columns, and two plane groups in one cube (each its own problem and shared tiles).
pub fn plane_group_mma_of_every_start_width_and_group_is_exact<B: TestBackend>() {
    integers_are_exact::<B, bf16>((64, 16, 128, 1));
    integers_are_exact::<B, bf16>((192, 16, 64, 1));
    integers_are_exact::<B, bf16>((64, 64, 64, 2));
}

/// On random `bf16` inputs `D` is within float rounding of the host's product: the
/// tensor cores sum in their own order and precision.
pub fn plane_group_mma_of_random_bf16_is_within_rounding<B: TestBackend>() {
    let client = client::<B>();
    let problems = Problems::<bf16>::new(2, 128, 128, |i| {
        let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        (x as f64 / (1u64 << 24) as f64) * 4.0 - 2.0
    });
    let Some(d) = problems.launch::<B>(&client, 64, 1, 0) else {
        return;
    };
    let got = read_scalars::<B, f32>(&client, &d);
    let (want, magnitude) = problems.expected();
    for (index, ((got, want), size)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let tolerance = size * 128.0 * f32::EPSILON;
        assert!(
            (got - want).abs() <= tolerance,
            "element {index}: {got} against {want} (tolerance {tolerance})"
        );
    }
}

/// An `A` start that isn't 16 columns into a swizzled row group is refused at run time: the
/// launch fails (an out-of-bounds shared access on CUDA's checked launches, a kernel error
/// on the CPU) instead of multiplying the wrong elements.
pub fn plane_group_mma_refuses_a_misplaced_operand<B: TestBackend>() {
    let client = client::<B>();
    let problems = Problems::<bf16>::new(2, 64, 64, |i| (i % 5) as f64);
    let Some(d) = problems.launch::<B>(&client, 64, 1, 8) else {
        return;
    };
    let result = client.read_one(d);
    assert!(
        result.is_err(),
        "a misplaced plane_group_mma operand was not reported"
    );
}

/// The plane group's matmul (`matmul_group_mma`) gives the exact product of integer
/// matrices with every tiling of [`GROUP_MMA_TILINGS`] that fits the device, on shapes
/// whose edges cut tiles, `k` and `n` that aren't multiples of 8 (element copies) and
/// several steps of the pipeline; the first shape through a checked launch of the kernel,
/// the others through `matmul_group_tensor_cores`. A tiling past the device's shared memory
/// is refused with a resource error, and where `Features::plane_group_mma` is false every
/// launch is refused as unsupported.
///
/// [`GROUP_MMA_TILINGS`]: cubert_runtime::kernel::standard::matmul_group_mma::GROUP_MMA_TILINGS
pub fn group_tensor_core_matmul_of_integers_is_exact<B: TestBackend>() {
    use cubert_runtime::kernel::standard::matmul_group_mma::{
        GROUP_MMA_TILINGS, matmul_group_tensor_cores, matmul_plane_group_mma,
    };
    use cubert_runtime::{LaunchError, ResourceLimitError};
    let client = client::<B>();
    let shared_max = client.properties().hardware.max_shared_memory_size;
    for tiling in GROUP_MMA_TILINGS {
        assert!(tiling.is_valid(), "{}", tiling.name());
        let fits = tiling.shared_bytes() as usize <= shared_max;
        let shapes = [(128usize, 64usize, 64usize), (80, 36, 72), (200, 200, 136)];
        for &(m, k, n) in &shapes {
            let value = |i: usize| ((i * 29 + 3) % 7) as f64 - 3.0;
            let lhs: Vec<bf16> = (0..m * k).map(|i| bf16::new(value(i))).collect();
            let rhs: Vec<bf16> = (0..k * n).map(|i| bf16::new(value(i + 5))).collect();
            let a = upload_scalars::<B, bf16>(&client, &lhs);
            let b = upload_scalars::<B, bf16>(&client, &rhs);
            // One row more than the product: nothing may be stored past `m × n`.
            let sentinel = bf16::new(-77.0);
            let out = upload_scalars::<B, bf16>(&client, &vec![sentinel; (m + 1) * n]);
            let launched = if (m, k, n) == shapes[0] {
                let t = tiling;
                matmul_plane_group_mma::launch::<bf16, B::R>(
                    &client,
                    t.cube_count(m as u32, n as u32),
                    CubeDim::new_1d(t.units()),
                    &a,
                    &b,
                    &out,
                    m as u32,
                    k as u32,
                    n as u32,
                    t.groups,
                    t.tile_n,
                    t.stages,
                )
            } else {
                let shape = (m, k, n);
                matmul_group_tensor_cores(&client, &a, &b, &out, shape, ElemType::BF16, &tiling)
            };
            if !fits {
                assert!(
                    matches!(
                        launched,
                        Err(LaunchError::TooManyResources(
                            ResourceLimitError::SharedMemory { .. }
                        ))
                    ),
                    "{} needs {} bytes of shared memory, the device has {shared_max}: \
                     {launched:?}",
                    tiling.name(),
                    tiling.shared_bytes()
                );
                break;
            }
            if !client.features().plane_group_mma {
                assert_refused_as_unsupported::<B>(&client, launched, "the group matmul");
                return;
            }
            launched.unwrap();
            let got = read_scalars::<B, bf16>(&client, &out);
            let want = super::mma::host_product(&lhs, &rhs, (m, k, n));
            for (index, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} ({m}, {k}, {n}): out[{}][{}] = {got:?} != {want:?}",
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

/// `matmul_group_tensor_cores` refuses what its unchecked launch couldn't run safely,
/// before launching: an element type other than bf16/f16 (`f32` included: there is no
/// TF32 form), an invalid tiling, a buffer shorter than its matrix; where the device lacks
/// the operation, every call is `Unsupported`.
pub fn group_tensor_core_matmul_refuses_bad_arguments<B: TestBackend>() {
    use cubert_runtime::LaunchError;
    use cubert_runtime::kernel::standard::matmul_group_mma::{
        GROUP_MMA_TILINGS, GroupMmaTiling, matmul_group_tensor_cores,
    };
    let client = client::<B>();
    let a = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 64]);
    let short = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 63]);
    let out = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(0.0); 64 * 64]);
    let tiling = GROUP_MMA_TILINGS[GROUP_MMA_TILINGS.len() - 1];
    let two_stages = GroupMmaTiling {
        stages: 2,
        ..tiling
    };
    let odd_width = GroupMmaTiling {
        tile_n: 96,
        ..tiling
    };
    let invalid = super::assert_invalid_argument;
    let shape = (64, 64, 64);
    let run = |lhs, rhs, elem, tiling: &GroupMmaTiling| {
        matmul_group_tensor_cores(&client, lhs, rhs, &out, shape, elem, tiling)
    };
    invalid(run(&a, &a, ElemType::F32, &tiling), "f32 elements");
    invalid(run(&a, &a, ElemType::BF16, &two_stages), "two stages");
    invalid(run(&a, &a, ElemType::BF16, &odd_width), "96 columns");
    invalid(
        run(&a, &short, ElemType::BF16, &tiling),
        "an rhs one row short",
    );
    let good = run(&a, &a, ElemType::BF16, &tiling);
    if client.features().plane_group_mma {
        good.unwrap();
        let got = read_scalars::<B, bf16>(&client, &out);
        assert!(got.iter().all(|v| v.to_f32() == 64.0), "ones times ones");
    } else {
        assert!(
            matches!(good, Err(LaunchError::Unsupported { .. })),
            "no plane-group tensor cores: {good:?}"
        );
    }
}
