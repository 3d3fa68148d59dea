//! One kernel in cubert's kernel language, run on the GPU if there is one, else the CPU.
//! `cargo run -p cubert-examples --example saxpy_anywhere`
use cubert::lang::prelude::*;
use cubert::{Bytes, ComputeClient, CubeCount, CubeDim, Runtime};

#[cubert::kernel]
fn saxpy<F: Float>(a: F, x: &Array<F>, y: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

fn run<R: Runtime>(client: ComputeClient<R>) -> Result<(), Box<dyn std::error::Error>> {
    let n = 1 << 20;
    let x = client.create(Bytes::from_elems((0..n).map(|i| i as f32).collect()))?;
    let y = client.create(Bytes::from_elems(vec![1.0f32; n]))?;
    let cubes = CubeCount::Static((n as u32).div_ceil(256), 1, 1);
    saxpy::launch::<f32, R>(&client, cubes, CubeDim::new_1d(256), 2.0, &x, &y)?;
    let y: Vec<f32> = client.read_one(y)?.to_elems();
    println!(
        "{}: y[12345] = {} (expected {})",
        R::name(),
        y[12345],
        2.0 * 12345.0 + 1.0
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match cubert::cuda::device_count() {
        0 => run(cubert::default_client()?),
        _ => run(cubert::CudaRuntime::client(&cubert::CudaDevice::new(0))?),
    }
}
