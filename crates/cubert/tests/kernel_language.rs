//! The kernel language through the facade, as a user writes it: `#[cubert::kernel]` on a
//! generic function, launched through `launch::<F, R>` on the CPU runtime.

use cubert::lang::prelude::*;
use cubert::{Bytes, CpuDevice, CpuRuntime, CubeCount, CubeDim, Runtime};

#[cubert::kernel]
fn saxpy<F: Float>(a: F, x: &Array<F>, y: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

#[test]
fn saxpy_written_once_runs_on_the_cpu_for_f32_and_f64() {
    let client = CpuRuntime::client(&CpuDevice::new(0)).unwrap();
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = client.create(Bytes::from_slice(&x)).unwrap();
    let y = client.create(Bytes::from_slice(&vec![1.0f32; n])).unwrap();
    // 4 cubes of 256 units: the last 24 units are past the arrays and do nothing.
    saxpy::launch::<f32, CpuRuntime>(
        &client,
        CubeCount::Static(4, 1, 1),
        CubeDim::new_1d(256),
        2.0,
        &x,
        &y,
    )
    .unwrap();
    let out: Vec<f32> = client.read_one(y).unwrap().to_elems();
    let expected: Vec<f32> = (0..n).map(|i| 2.0 * i as f32 + 1.0).collect();
    assert_eq!(out, expected);

    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
    let x = client.create(Bytes::from_slice(&x)).unwrap();
    let y = client.create(Bytes::from_slice(&vec![0.25f64; n])).unwrap();
    saxpy::launch::<f64, CpuRuntime>(
        &client,
        CubeCount::Static(8, 1, 1),
        CubeDim::new_1d(128),
        -3.0,
        &x,
        &y,
    )
    .unwrap();
    let out: Vec<f64> = client.read_one(y).unwrap().to_elems();
    let expected: Vec<f64> = (0..n).map(|i| -3.0 * (i as f64 * 0.5) + 0.25).collect();
    assert_eq!(out, expected);
}

#[test]
fn saxpy_records_one_store_inside_a_bounds_check() {
    let definition = saxpy::definition::<f32>();
    let ir = definition.ir().unwrap();
    assert_eq!(ir.name, "saxpy");
    assert_eq!(ir.params.len(), 3);
    let has_if_with_store = ir.body.instructions.iter().any(|instruction| {
        matches!(instruction, cubert::lang::ir::Instruction::If { then, .. }
            if then.instructions.iter().any(|inner| matches!(inner, cubert::lang::ir::Instruction::Store { array: 1, .. })))
    });
    assert!(has_if_with_store, "{ir:#?}");
}
