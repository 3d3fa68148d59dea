//! The tensor-core matmul of the kernel language next to cuBLAS, in one run:
//! `cubert_mma_bf16_{1024,4096}_tflops` (`kernel::standard::matmul_mma`, written on
//! `plane_mma`), `cublas_bf16_{1024,4096}_tflops` (`cublasGemmEx`, bf16 in and out, f32
//! compute, through the interop) and `cubert_mma_bf16_4096_vs_cublas` (their ratio).
//!
//! Square bf16 products on the same buffers; each timed by `client.profile` (device
//! events), median of 10 (3 quick) after 2 warm-ups. Check: on small integer inputs both
//! products are exact, and cubert's must equal cuBLAS's bit for bit, else the figures are
//! skipped with the first difference. Measured where the backend has tensor cores
//! (`Features::plane_mma`) and a vendor bf16 matmul (`CliRuntime::vendor_matmul_bf16`:
//! CUDA); "not measured" elsewhere (the CPU's `plane_mma` is an exact emulation, not a
//! speed).

use super::recorder::Recorder;
use super::timing::{median, profiled_seconds};
use crate::backend::CliRuntime;
use crate::error::CliResult;
use cubert::kernel::standard::matmul_mma::{TILE, UNITS, matmul_plane_mma};
use cubert::lang::prelude::bf16;
use cubert::{Bytes, ComputeClient, CubeCount, CubeDim};

/// Figures this group measures.
pub const FIGURES: u64 = 5;

const SIZES: [usize; 2] = [1024, 4096];
const RATIO: &str = "cubert_mma_bf16_4096_vs_cublas";
const WARM_UP: usize = 2;

fn names(size: usize) -> [String; 2] {
    [
        format!("cubert_mma_bf16_{size}_tflops"),
        format!("cublas_bf16_{size}_tflops"),
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
    let all: Vec<String> = SIZES
        .iter()
        .flat_map(|size| names(*size))
        .chain([RATIO.to_string()])
        .collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    if !client.features().plane_mma {
        recorder.not_measured(
            &all,
            &format!("the {} backend has no tensor cores", R::name()),
        );
        return Ok(());
    }
    let vendor = match R::vendor_matmul_bf16(client) {
        Ok(Some(vendor)) => vendor,
        Ok(None) => {
            recorder.not_measured(
                &all,
                &format!(
                    "no vendor bf16 matmul on the {} backend to compare with",
                    R::name()
                ),
            );
            return Ok(());
        }
        Err(reason) => {
            recorder.not_measured(&all, &reason);
            return Ok(());
        }
    };
    let reps = if quick { 3 } else { 10 };
    let mut tflops_4096 = None;
    for size in SIZES {
        let [mine, theirs] = names(size);
        recorder.start(&mine);
        let value = |i: usize| bf16::from_f32(((i * 29 + 3) % 7) as f32 - 3.0);
        let lhs: Vec<bf16> = (0..size * size).map(value).collect();
        let rhs: Vec<bf16> = (0..size * size).map(|i| value(i + 5)).collect();
        let a = client.create(Bytes::from_elems(lhs))?;
        let b = client.create(Bytes::from_elems(rhs))?;
        let ours = client.empty(size * size * 2)?;
        let reference = client.empty(size * size * 2)?;
        let cubes = (size as u32).div_ceil(TILE);
        let launch = |out: &cubert::Handle| {
            matmul_plane_mma::launch::<bf16, R>(
                client,
                CubeCount::Static(cubes, cubes, 1),
                CubeDim::new_1d(UNITS),
                &a,
                &b,
                out,
                size as u32,
                size as u32,
                size as u32,
            )
        };
        let vendor_run =
            |out: &cubert::Handle| (vendor.run)(client, (&a, &b, out), (size, size, size));
        launch(&ours)?;
        vendor_run(&reference)?;
        let (got, want) = (
            client.read_one(ours.clone())?,
            client.read_one(reference.clone())?,
        );
        if let Some(index) = got.iter().zip(want.iter()).position(|(x, y)| x != y) {
            let problem = format!(
                "cubert's product differs from {}'s at byte {index} on integer inputs",
                vendor.name
            );
            recorder.skip(&mine, &problem);
            recorder.skip(&theirs, &problem);
            continue;
        }
        for _ in 0..WARM_UP {
            launch(&ours)?;
            vendor_run(&reference)?;
        }
        client.sync()?;
        let mut cubert_seconds = Vec::with_capacity(reps);
        let mut vendor_seconds = Vec::with_capacity(reps);
        for _ in 0..reps {
            cubert_seconds.push(profiled_seconds(client, "tensor-core matmul", || {
                launch(&ours)
            })?);
            vendor_seconds.push(profiled_seconds(client, "vendor bf16 matmul", || {
                vendor_run(&reference)
            })?);
        }
        let flops = 2.0 * (size as f64).powi(3);
        let ours_tflops = flops / median(&cubert_seconds) / 1e12;
        let theirs_tflops = flops / median(&vendor_seconds) / 1e12;
        let note = format!(
            "{size}³ bf16 in and out, f32 sums, device events, median of {reps} (checked \
             equal to {} on integer inputs)",
            vendor.name
        );
        recorder.emit(&mine, ours_tflops, "TFLOP/s", &note);
        recorder.emit(
            &theirs,
            theirs_tflops,
            "TFLOP/s",
            &format!("{}, same run", vendor.name),
        );
        if size == 4096 {
            tflops_4096 = Some(ours_tflops / theirs_tflops);
        }
    }
    match tflops_4096 {
        Some(ratio) => recorder.emit(
            RATIO,
            ratio,
            "x",
            "cubert_mma_bf16_4096_tflops / cublas_bf16_4096_tflops (issue 16 asks >= 0.5)",
        ),
        None => recorder.skip(RATIO, "the 4096³ products were not measured"),
    }
    Ok(())
}
