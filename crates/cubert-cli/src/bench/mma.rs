//! The tensor-core matmul of the kernel language next to cuBLAS, in one run, on the shapes
//! of issue 16 (`M×K×N`): 1024³, 2048³, 4096³, 8192×1024×4096 and the skinny
//! 4096×4096×64, for bf16 and for f32 multiplied as TF32. Per type and shape:
//! `cubert_mma_<type>_<shape>_tflops` (the fastest of the tensor-core matmuls' tilings,
//! [`tensor_core_tilings`]: `matmul_tensor_cores`'s `mma.sync` tiles, and on Hopper
//! `matmul_group_tensor_cores`'s `wgmma` for bf16; unchecked launches after checking the
//! arguments; each tiling checked first), `cublas_<type>_<shape>_tflops`
//! (`cublasGemmEx` through the interop: bf16 in and out with f32 compute, or f32 with
//! `CUBLAS_COMPUTE_32F_FAST_TF32`) and `cubert_mma_<type>_<shape>_vs_cublas` (their
//! ratio; issue 16 asks ≥ 0.5 at 4096³ for bf16). The note of cubert's figure lists every
//! tiling's TFLOP/s.
//!
//! Products on the same buffers; each timed by `client.profile` (device events), median
//! of 10 (3 quick) after 2 warm-ups, cubert's tilings and cuBLAS in turns. Check: on small
//! integer inputs every product is exact (in TF32 too), and each tiling's must equal
//! cuBLAS's bit for bit, else that tiling is left out (and named in the note) and, if none
//! is left, the shape's figures are skipped with the first difference. Measured where the
//! backend has tensor cores (`Features::plane_mma`) and a vendor tensor-core matmul
//! (`CliRuntime::vendor_tensor_core_matmul`: CUDA); "not measured" elsewhere (the CPU's
//! `plane_mma` is an exact emulation, not a speed).

use super::recorder::Recorder;
use super::timing::{median, profiled_seconds};
use crate::backend::CliRuntime;
use crate::error::CliResult;
use cubert::config::AutotuneLevel;
use cubert::kernel::standard::tensor_cores::{TensorCoreTiling, tensor_core_tilings};
use cubert::lang::prelude::bf16;
use cubert::tune::standard::MatmulProblem;
use cubert::tune::{TuneSettings, Tuner, tensor_cores};
use cubert::{Bytes, ComputeClient, ElemType};

/// The shapes measured, `(m, k, n)`.
const SHAPES: [(usize, usize, usize); 5] = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 1024, 4096),
    (4096, 4096, 64),
];

/// The element types measured, with their names in the figures: bf16, and f32 as TF32.
const TYPES: [(ElemType, &str); 2] = [(ElemType::BF16, "bf16"), (ElemType::F32, "tf32")];

/// Figures this group measures: three per type and shape.
pub const FIGURES: u64 = 3 * (TYPES.len() * SHAPES.len()) as u64;

const WARM_UP: usize = 2;

/// `1024` for a cube, `8192x1024x4096` otherwise.
fn shape_name((m, k, n): (usize, usize, usize)) -> String {
    if m == k && k == n {
        format!("{m}")
    } else {
        format!("{m}x{k}x{n}")
    }
}

fn names(label: &str, shape: (usize, usize, usize)) -> [String; 3] {
    let shape = shape_name(shape);
    [
        format!("cubert_mma_{label}_{shape}_tflops"),
        format!("cublas_{label}_{shape}_tflops"),
        format!("cubert_mma_{label}_{shape}_vs_cublas"),
    ]
}

/// Measures the tensor-core matmul and cuBLAS's.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: CliRuntime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let reps = if quick { 3 } else { 10 };
    for (elem, label) in TYPES {
        let all: Vec<String> = SHAPES
            .iter()
            .flat_map(|shape| names(label, *shape))
            .collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        if !client.features().plane_mma {
            recorder.not_measured(
                &all,
                &format!("the {} backend has no tensor cores", R::name()),
            );
            continue;
        }
        let vendor = match R::vendor_tensor_core_matmul(client, elem) {
            Ok(Some(vendor)) => vendor,
            Ok(None) => {
                recorder.not_measured(
                    &all,
                    &format!(
                        "no vendor {label} matmul on the {} backend to compare with",
                        R::name()
                    ),
                );
                continue;
            }
            Err(reason) => {
                recorder.not_measured(&all, &reason);
                continue;
            }
        };
        for shape in SHAPES {
            measure_shape(client, &vendor, (elem, label), shape, reps, recorder)?;
        }
    }
    Ok(())
}

/// `len` small integers (exact products and sums in both types) as the bytes of `elem`,
/// from index `offset` on.
fn integer_operand(elem: ElemType, len: usize, offset: usize) -> Bytes {
    let value = |i: usize| ((i + offset) * 29 + 3) % 7;
    let value = |i: usize| value(i) as f32 - 3.0;
    if elem == ElemType::F32 {
        Bytes::from_elems((0..len).map(value).collect::<Vec<f32>>())
    } else {
        Bytes::from_elems(
            (0..len)
                .map(|i| bf16::from_f32(value(i)))
                .collect::<Vec<bf16>>(),
        )
    }
}

/// One type's and shape's three figures.
fn measure_shape<R: CliRuntime>(
    client: &ComputeClient<R>,
    vendor: &crate::backend::VendorMatmul<R>,
    (elem, label): (ElemType, &str),
    shape: (usize, usize, usize),
    reps: usize,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let (m, k, n) = shape;
    let [mine, theirs, ratio] = names(label, shape);
    recorder.start(&mine);
    let a = client.create(integer_operand(elem, m * k, 0))?;
    let b = client.create(integer_operand(elem, k * n, 5))?;
    let ours = client.empty(m * n * elem.size())?;
    let reference = client.empty(m * n * elem.size())?;
    let launch = |tiling: &TensorCoreTiling, out: &cubert::Handle| {
        tiling.launch(client, (&a, &b, out), (m, k, n), elem)
    };
    let vendor_run = |out: &cubert::Handle| (vendor.run)(client, (&a, &b, out), (m, k, n));
    vendor_run(&reference)?;
    let want = client.read_one(reference.clone())?;
    // Every tiling is checked against the vendor's product before it is timed.
    let mut tilings = Vec::new();
    let mut refused = Vec::new();
    let shared_max = client.properties().hardware.max_shared_memory_size;
    for tiling in tensor_core_tilings(client.features(), elem, shared_max) {
        launch(&tiling, &ours)?;
        let got = client.read_one(ours.clone())?;
        match got.iter().zip(want.iter()).position(|(x, y)| x != y) {
            None => tilings.push(tiling),
            Some(index) => refused.push(format!("{} differs at byte {index}", tiling.name())),
        }
    }
    if tilings.is_empty() {
        let problem = format!(
            "no tiling's product equals {}'s on integer inputs: {}",
            vendor.name,
            refused.join(", ")
        );
        for figure in [&mine, &theirs, &ratio] {
            recorder.skip(figure, &problem);
        }
        return Ok(());
    }
    for _ in 0..WARM_UP {
        for tiling in &tilings {
            launch(tiling, &ours)?;
        }
        vendor_run(&reference)?;
    }
    client.sync()?;
    let mut seconds = vec![Vec::with_capacity(reps); tilings.len()];
    let mut vendor_seconds = Vec::with_capacity(reps);
    for _ in 0..reps {
        for (tiling, samples) in tilings.iter().zip(seconds.iter_mut()) {
            samples.push(profiled_seconds(client, "tensor-core matmul", || {
                launch(tiling, &ours)
            })?);
        }
        vendor_seconds.push(profiled_seconds(client, "vendor matmul", || {
            vendor_run(&reference)
        })?);
    }
    let flops = 2.0 * (m * k * n) as f64;
    let rates: Vec<f64> = seconds
        .iter()
        .map(|samples| flops / median(samples) / 1e12)
        .collect();
    let best = (0..rates.len())
        .max_by(|&x, &y| rates[x].total_cmp(&rates[y]))
        .unwrap_or(0);
    let theirs_tflops = flops / median(&vendor_seconds) / 1e12;
    // The tuner's pick for the shape (a fresh in-memory tuner, check mode on: it runs and
    // compares every tiling again on its own inputs).
    let tuner = Tuner::new(TuneSettings {
        check: true,
        ..TuneSettings::in_memory(AutotuneLevel::Full)
    });
    let problem = MatmulProblem::new((&a, &b, &ours), (m, k, n), elem);
    let tuned = tensor_cores::matmul_candidates(client, elem)
        .map_err(cubert::ServerError::from)
        .and_then(|set| tuner.choose(client, &set, &problem))
        .map_or_else(
            |error| format!("tuning failed: {error}"),
            |choice| choice.name,
        );
    let each: Vec<String> = tilings
        .iter()
        .zip(&rates)
        .map(|(tiling, rate)| format!("{} {rate:.1}", tiling.name()))
        .chain(refused)
        .collect();
    let note = format!(
        "{m}x{k}x{n} (MxKxN) {label}, f32 sums, device events, median of {reps}, \
         best tiling {} (the tuner picks {tuned}; every tiling checked equal to {} on integer \
         inputs; TFLOP/s: {})",
        tilings[best].name(),
        vendor.name,
        each.join(", ")
    );
    recorder.emit(&mine, rates[best], "TFLOP/s", &note);
    recorder.emit(
        &theirs,
        theirs_tflops,
        "TFLOP/s",
        &format!("{}, same run", vendor.name),
    );
    recorder.emit(
        &ratio,
        rates[best] / theirs_tflops,
        "x",
        "cubert's best tiling / cuBLAS, same run (issue 16 asks >= 0.5 at 4096³ for bf16)",
    );
    Ok(())
}
