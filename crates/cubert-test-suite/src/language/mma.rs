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
fn mma_tiles<T: MmaInput>(
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
/// tile (filled from `x`), written out 12 per unit: `A`'s 8, then `B`'s 4.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn fragments<T: MmaInput>(x: &Array<T>, out: &mut Array<T>, start: u32, stride: u32) {
    let mut tile = SharedMemory::<T>::new(1024);
    for i in 0..32u32 {
        tile[UNIT_POS * 32u32 + i] = x[UNIT_POS * 32u32 + i];
    }
    sync_cube();
    let a = plane_load_a(&tile, start, stride);
    let b = plane_load_b(&tile, start, stride);
    for i in 0..8u32 {
        out[UNIT_POS * 12u32 + i] = a[i];
    }
    for i in 0..4u32 {
        out[UNIT_POS * 12u32 + 8u32 + i] = b[i];
    }
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    use cubert_runtime::kernel::standard::matmul_mma::matmul_plane_mma;
    vec![
        mma_tiles::definition::<bf16>(4),
        mma_tiles::definition::<f16>(1),
        fragments::definition::<bf16>(),
        matmul_plane_mma::definition::<bf16>(128, 128, 2, 4, 32, 3),
        matmul_plane_mma::definition::<f16>(64, 64, 2, 2, 64, 4),
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

impl<T: MmaInput> Problems<T> {
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
                        let product = self.a[p * 16 * self.k + i * self.k + kk].to_f32_exact()
                            * self.b[p * self.k * 8 + kk * 8 + j].to_f32_exact();
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

fn integer_products_are_exact<B: TestBackend, T: MmaInput>(k: usize) {
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
    use cubert_runtime::ElemType;
    use cubert_runtime::kernel::standard::matmul_mma::{
        MMA_TILINGS, MmaTiling, matmul_plane_mma, matmul_tensor_cores,
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
        let fits = tiling.shared_bytes() as usize <= shared_max;
        let mut shapes = vec![(128usize, 64usize, 64usize), (80, 36, 72), (200, 168, 136)];
        if tiling.tile_m == 64 && tiling.tile_n == 64 {
            shapes.push((600, 40, 72));
        }
        for &(m, k, n) in &shapes {
            let value = |i: usize| ((i * 29 + 3) % 7) as f32 - 3.0;
            let lhs: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(value(i))).collect();
            let rhs: Vec<bf16> = (0..k * n).map(|i| bf16::from_f32(value(i + 5))).collect();
            let a = upload_scalars::<B, bf16>(&client, &lhs);
            let b = upload_scalars::<B, bf16>(&client, &rhs);
            // One row more than the product: nothing may be stored past `m × n`.
            let sentinel = bf16::from_f32(-77.0);
            let out = upload_scalars::<B, bf16>(&client, &vec![sentinel; (m + 1) * n]);
            // Checked launches on the first shape, unchecked ones (`matmul_tensor_cores`,
            // which checks the arguments) on the others.
            let launched = if (m, k, n) == shapes[0] {
                matmul_plane_mma::launch::<bf16, B::R>(
                    &client,
                    tiling.cube_count(m as u32, n as u32),
                    CubeDim::new_1d(tiling.units()),
                    &a,
                    &b,
                    &out,
                    m as u32,
                    k as u32,
                    n as u32,
                    tiling.tile_m,
                    tiling.tile_n,
                    tiling.planes_m,
                    tiling.planes_n,
                    tiling.depth,
                    tiling.stages,
                )
            } else {
                matmul_tensor_cores(&client, &a, &b, &out, (m, k, n), ElemType::BF16, &tiling)
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
                    tiling.shared_bytes()
                );
                break;
            }
            if !client.features().plane_mma {
                assert_refused_as_unsupported::<B>(&client, launched, "the tensor-core matmul");
                return;
            }
            launched.unwrap();
            let got = read_scalars::<B, bf16>(&client, &out);
            let want = host_product(&lhs, &rhs, (m, k, n));
            for (index, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} ({m}, {k}, {n}): out[{}][{}] = {got} != {want}",
                    tiling.name(),
                    index / n,
                    index % n
                );
            }
            assert!(
                got[m * n..].iter().all(|v| *v == sentinel),
                "{}: stored past the product",
                tiling.name()
            );
        }
    }
}

/// `matmul_tensor_cores` refuses what its unchecked launch couldn't run safely, before
/// launching: an element type other than bf16/f16, an invalid tiling, a buffer shorter
/// than its matrix; where the device has no tensor cores, every call is `Unsupported`.
pub fn tensor_core_matmul_refuses_bad_arguments<B: TestBackend>() {
    use cubert_runtime::kernel::standard::matmul_mma::{
        MMA_TILINGS, MmaTiling, matmul_tensor_cores,
    };
    use cubert_runtime::{ElemType, IoError, LaunchError};
    let client = client::<B>();
    let a = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 64]);
    let short = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(1.0); 64 * 63]);
    let out = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(0.0); 64 * 64]);
    let tiling = MMA_TILINGS[MMA_TILINGS.len() - 1];
    let uneven = MmaTiling {
        planes_m: 3,
        ..tiling
    };
    let invalid = |result: Result<(), LaunchError>, what: &str| {
        assert!(
            matches!(
                result,
                Err(LaunchError::IoError(IoError::InvalidArgument { .. }))
            ),
            "{what}: {result:?}"
        );
    };
    let shape = (64, 64, 64);
    invalid(
        matmul_tensor_cores(&client, &a, &a, &out, shape, ElemType::F32, &tiling),
        "f32 elements",
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

/// `lhs × rhs` on the host, summed in `f32` in `k` order and rounded to bf16 once: the
/// exact product for the tests' small integers.
pub(crate) fn host_product(
    lhs: &[bf16],
    rhs: &[bf16],
    (m, k, n): (usize, usize, usize),
) -> Vec<bf16> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let sum: f32 = (0..k).fold(0.0, |sum, p| {
                sum + lhs[i * k + p].to_f32() * rhs[p * n + j].to_f32()
            });
            out.push(bf16::from_f32(sum));
        }
    }
    out
}

/// `plane_load_a` / `plane_load_b` give each unit its elements of the operand at
/// `tile[start + row * stride + column]` (`native::mma_layout`), bit for bit, whether the
/// rows are 16-byte aligned (one `ldmatrix` on CUDA) or not (element by element).
pub fn fragment_loads_give_each_unit_its_elements<B: TestBackend>() {
    use cubert_runtime::lang::native::mma_layout;
    let client = client::<B>();
    let values: Vec<bf16> = (0..1024)
        .map(|i| bf16::from_bits(0x3f80 + i as u16))
        .collect();
    let x = upload_scalars::<B, bf16>(&client, &values);
    for (start, stride) in [(0u32, 16u32), (8, 40), (3, 17), (1, 24), (16, 8)] {
        let out = upload_scalars::<B, bf16>(&client, &[bf16::from_f32(-1.0); 32 * 12]);
        let launched = fragments::launch::<bf16, B::R>(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(32),
            &x,
            &out,
            start,
            stride,
        );
        if !client.features().plane_mma {
            assert_refused_as_unsupported::<B>(&client, launched, "fragment loads");
            return;
        }
        launched.unwrap();
        let got = read_scalars::<B, bf16>(&client, &out);
        for lane in 0..32u32 {
            for i in 0..12u32 {
                let (row, column) = if i < 8 {
                    mma_layout::a(lane, i)
                } else {
                    mma_layout::b(lane, i - 8)
                };
                let want = values[(start + row * stride + column) as usize];
                assert_eq!(
                    got[(lane * 12 + i) as usize].to_bits(),
                    want.to_bits(),
                    "start {start}, stride {stride}: lane {lane}, element {i}"
                );
            }
        }
    }
}
