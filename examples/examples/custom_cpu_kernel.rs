//! Writing a kernel for the CPU backend: a `CpuKernel` is a Rust function run once per cube.
//!
//! The kernel below computes `out[i] = a * x[i] + y[i]` (saxpy). It loops over the units of
//! its cube (`ctx.units()`), reads its buffers through bounds-checked views and its scalars
//! from the info words. The second part shows what a checked launch does with an
//! out-of-bounds write: the write is skipped and the launch's error comes back at `sync`.
//!
//! ```text
//! cargo run -p cubert-examples --example custom_cpu_kernel
//! ```

use cubert::cpu::{CpuKernel, CubeContext, KernelError};
use cubert::kernel::standard::encode_scalar;
use cubert::{Bytes, CubeCount, CubeDim, KernelArguments, MetadataBindingInfo, ServerError};
use std::error::Error;
use std::process::ExitCode;

const UNITS: u32 = 256;

/// `out[i] = a * x[i] + y[i]` for `i < len`. Buffers `[x, y, out]`, info `[len, a]`.
fn saxpy(ctx: &mut CubeContext<'_>) -> Result<(), KernelError> {
    let len = ctx.info_usize(0)?;
    let a: f32 = ctx.scalar(1)?;
    let x = ctx.buffer::<f32>(0)?;
    let y = ctx.buffer::<f32>(1)?;
    let out = ctx.buffer::<f32>(2)?;
    for unit in ctx.units() {
        let i = unit.absolute_x as usize;
        if i < len {
            out.store(i, a * x.load(i) + y.load(i));
        }
    }
    Ok(())
}

/// A buggy kernel: every unit writes one element further than it should, so the last one
/// writes past the end of `out`. Buffers `[out]`, info `[len]`.
fn off_by_one(ctx: &mut CubeContext<'_>) -> Result<(), KernelError> {
    let len = ctx.info_usize(0)?;
    let out = ctx.buffer::<u32>(0)?;
    for unit in ctx.units() {
        let i = unit.absolute_x as usize;
        if i < len {
            out.store(i + 1, i as u32);
        }
    }
    Ok(())
}

fn cubes_for(len: usize) -> CubeCount {
    CubeCount::new_1d(len.div_ceil(UNITS as usize) as u32)
}

fn run() -> Result<(), Box<dyn Error>> {
    let client = cubert::default_client()?;

    // 1. saxpy, checked against a plain Rust loop.
    let len = 10_000;
    let a = 2.5f32;
    let x: Vec<f32> = (0..len).map(|i| (i % 97) as f32 * 0.25).collect();
    let y: Vec<f32> = (0..len).map(|i| 1.0 - (i % 13) as f32).collect();
    let x_handle = client.create(Bytes::from_slice(&x))?;
    let y_handle = client.create(Bytes::from_slice(&y))?;
    let out = client.empty(len * size_of::<f32>())?;

    let kernel = CpuKernel::new("saxpy_f32", CubeDim::new_1d(UNITS), saxpy);
    let arguments = KernelArguments::new()
        .with_buffers(vec![
            x_handle.to_binding(),
            y_handle.to_binding(),
            out.to_binding(),
        ])
        .with_info(MetadataBindingInfo::custom(vec![
            len as u64,
            encode_scalar(a),
        ]));
    client.launch(kernel, cubes_for(len), arguments)?;
    let got = client.read_one(out)?.to_elems::<f32>();
    let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    if got != want {
        return Err("saxpy: the result differs from the reference".into());
    }
    println!(
        "saxpy over {len} elements: ok (out[0..4] = {:?})",
        &got[..4]
    );

    // 2. An out-of-bounds write in a checked launch.
    let len = 1000;
    let out = client.empty(len * size_of::<u32>())?;
    let kernel = CpuKernel::new("off_by_one", CubeDim::new_1d(UNITS), off_by_one);
    let arguments = KernelArguments::new()
        .with_buffer(out.to_binding())
        .with_info(MetadataBindingInfo::custom(vec![len as u64]));
    // The launch itself is only queued, so it succeeds...
    client.launch(kernel, cubes_for(len), arguments)?;
    // ...and its error comes back from the next sync (or flush, or read) on this stream.
    match client.sync() {
        Err(error @ ServerError::OutOfBounds { .. }) => {
            println!("checked launch with an out-of-bounds write: sync returned the error");
            println!("  {error}");
        }
        Err(other) => return Err(format!("expected an out-of-bounds error, got: {other}").into()),
        Ok(()) => return Err("expected an out-of-bounds error at sync, got none".into()),
    }
    // The bad write was skipped, the others happened (element 0 is never written), and the
    // device keeps working.
    let values = client.read_one(out)?.to_elems::<u32>();
    let written: Vec<u32> = (0..len as u32 - 1).collect();
    if values.get(1..) != Some(&written[..]) {
        return Err("the in-bounds writes of the failed launch are missing".into());
    }
    client.sync()?;
    println!("the device keeps working after the error: ok");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("custom_cpu_kernel: {error}");
            ExitCode::FAILURE
        }
    }
}
