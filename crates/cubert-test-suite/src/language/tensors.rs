//! Tensor parameters: `&Tensor<T>` reads its rank, shape and strides inside the kernel
//! (`x.rank()`, `x.shape(d)`, `x.stride(d)`), passed at launch as a `TensorArg`.

use super::{filled, read_scalars, upload_scalars};
use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, TensorArg};

/// Copies `x` into the contiguous `out` element by element of `out`'s shape, reading `x`
/// through its own strides: a transpose or permutation when `x`'s strides are permuted.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn strided_copy<T: Scalar>(x: &Tensor<T>, out: &mut Tensor<T>) {
    let i = ABSOLUTE_POS;
    if i >= out.len() {
        return;
    }
    let mut rest = i;
    let mut offset = 0u32;
    let mut d = out.rank();
    while d > 0 {
        d -= 1;
        let extent = out.shape(d);
        offset += rest % extent * x.stride(d);
        rest /= extent;
    }
    out[i] = x[offset];
}

/// Writes `x`'s metadata as the kernel reads it: rank, shape of dims 0..5, strides of dims
/// 0..5 (two past a rank of 3), then the scalar passed before the tensor.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn tensor_metadata(scale: u32, x: &Tensor<f32>, out: &mut Array<u32>) {
    if ABSOLUTE_POS == 0 {
        out[0] = x.rank();
        for d in 0..5u32 {
            out[1 + d] = x.shape(d);
            out[6 + d] = x.stride(d);
        }
        out[11] = scale;
        out[12] = x.len();
    }
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        strided_copy::definition::<f32>(),
        strided_copy::definition::<u8>(),
        tensor_metadata::definition(),
    ]
}

/// A kernel reads a tensor's rank, shape and strides as passed (1 and 0 past the rank),
/// and the scalars before it keep their values.
pub fn tensor_rank_shape_and_strides_read_as_passed<B: TestBackend>() {
    let client = client::<B>();
    let x = filled::<B, f32>(&client, 0.0, 24);
    let out = filled::<B, u32>(&client, 99, 13);
    let arg = TensorArg::new(&x, &[2, 3, 4], &[12, 4, 1]);
    tensor_metadata::launch::<B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(1),
        7,
        &arg,
        &out,
    )
    .unwrap();
    assert_eq!(
        read_scalars::<B, u32>(&client, &out),
        vec![3, 2, 3, 4, 1, 1, 12, 4, 1, 0, 0, 7, 24]
    );
}

/// Reading through permuted strides transposes a matrix and permutes a 3-D tensor.
pub fn strided_tensors_transpose_and_permute<B: TestBackend>() {
    let client = client::<B>();
    // A 3 x 5 matrix, row-major; read as 5 x 3 with strides (1, 5): its transpose.
    let m: Vec<f32> = (0..15).map(|v| v as f32 * 1.5).collect();
    let xs = upload_scalars::<B, f32>(&client, &m);
    let out = filled::<B, f32>(&client, -1.0, 15);
    strided_copy::launch::<f32, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(32),
        &TensorArg::new(&xs, &[5, 3], &[1, 5]),
        &TensorArg::new(&out, &[5, 3], &[3, 1]),
    )
    .unwrap();
    let want: Vec<f32> = (0..5)
        .flat_map(|c| (0..3).map(move |r| (r * 5 + c) as f32 * 1.5))
        .collect();
    assert_eq!(read_scalars::<B, f32>(&client, &out), want);

    // A 2 x 3 x 4 tensor of bytes, read with its axes permuted to (2, 0, 1): out[k][i][j] =
    // x[i][j][k].
    let t: Vec<u8> = (0..24).collect();
    let xs = upload_scalars::<B, u8>(&client, &t);
    let out = filled::<B, u8>(&client, 255, 24);
    strided_copy::launch::<u8, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(32),
        &TensorArg::new(&xs, &[4, 2, 3], &[1, 12, 4]),
        &TensorArg::new(&out, &[4, 2, 3], &[6, 3, 1]),
    )
    .unwrap();
    let mut want = Vec::new();
    for k in 0..4u8 {
        for i in 0..2u8 {
            for j in 0..3u8 {
                want.push(i * 12 + j * 4 + k);
            }
        }
    }
    assert_eq!(read_scalars::<B, u8>(&client, &out), want);
}

/// A tensor argument whose shape and strides differ in length, or with more than 8
/// dimensions, is refused at launch; nothing runs.
pub fn malformed_tensor_arguments_are_refused_at_launch<B: TestBackend>() {
    let client = client::<B>();
    let x = filled::<B, f32>(&client, 1.0, 8);
    let out = filled::<B, f32>(&client, 0.0, 8);
    let good = TensorArg::new(&out, &[8], &[1]);
    let mismatched = TensorArg::new(&x, &[2, 4], &[1]);
    let result = strided_copy::launch::<f32, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(8),
        &mismatched,
        &good,
    );
    assert!(result.is_err(), "mismatched shape and strides: {result:?}");
    let ones = [1usize; 9];
    let deep = TensorArg::new(&x, &ones, &ones);
    let result = strided_copy::launch::<f32, B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(8),
        &deep,
        &good,
    );
    assert!(result.is_err(), "9 dimensions: {result:?}");
    assert_eq!(read_scalars::<B, f32>(&client, &out), vec![0.0; 8]);
}
