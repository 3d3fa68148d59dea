//! Elementwise reduction of the devices' inputs, on the host, for CPU all-reduces.
//!
//! Integers add in the element type (wrapping on overflow, like NCCL); f32 and f64 in
//! their type; f16 and bf16 in f32, rounded once at the end. `Mean` divides the sum by the
//! number of devices (rounding toward zero for integers, as NCCL's `ncclAvg`). The work is
//! split into pieces of a few thousand elements, in parallel for large buffers, and reads
//! the bytes without alignment requirements (the inputs are plain byte buffers).

use cubert_runtime::server::{ReduceOperation, check_collective_type};
use cubert_runtime::{ElemType, ServerError};
use half::{bf16, f16};
use rayon::prelude::*;

/// Elements per piece the reduction works on (a piece per worker for large buffers).
const PIECE: usize = 1 << 13;

/// Reduces `others` into `acc` elementwise (one buffer per device, equal lengths; `acc` is
/// the first device's), dividing by the number of devices for `Mean`.
///
/// # Errors
/// [`ServerError::Unsupported`] for a type collectives don't take.
pub fn reduce_in_place(
    acc: &mut [u8],
    others: &[&[u8]],
    dtype: ElemType,
    op: ReduceOperation,
) -> Result<(), ServerError> {
    check_collective_type(dtype, "all_reduce", "cpu")?;
    let count = others.len() + 1;
    let mean = op == ReduceOperation::Mean;
    macro_rules! exact {
        ($ty:ty, $add:expr, $div:expr) => {
            fold::<$ty, $ty>(
                acc,
                others,
                |v| v,
                |v| v,
                $add,
                |v| {
                    if mean { $div(v, count) } else { v }
                },
            )
        };
    }
    match dtype {
        ElemType::F32 => exact!(f32, |a, b| a + b, |v, n| v / n as f32),
        ElemType::F64 => exact!(f64, |a, b| a + b, |v, n| v / n as f64),
        ElemType::I8 => exact!(i8, i8::wrapping_add, |v, n| v / n as i8),
        ElemType::I32 => exact!(i32, i32::wrapping_add, |v, n| v / n as i32),
        ElemType::I64 => exact!(i64, i64::wrapping_add, |v, n| v / n as i64),
        ElemType::U8 => exact!(u8, u8::wrapping_add, |v, n| v / n as u8),
        ElemType::U32 => exact!(u32, u32::wrapping_add, |v, n| v / n as u32),
        ElemType::U64 => exact!(u64, u64::wrapping_add, |v, n| v / n as u64),
        // Half types add in f32 and round once.
        ElemType::F16 => fold::<f16, f32>(
            acc,
            others,
            f16::to_f32,
            f16::from_f32,
            |a, b| a + b,
            |v| {
                if mean { v / count as f32 } else { v }
            },
        ),
        ElemType::BF16 => fold::<bf16, f32>(
            acc,
            others,
            bf16::to_f32,
            bf16::from_f32,
            |a, b| a + b,
            |v| {
                if mean { v / count as f32 } else { v }
            },
        ),
        other => {
            return Err(ServerError::unsupported(
                format!("all_reduce of {other}"),
                "cpu",
            ));
        }
    }
    Ok(())
}

/// `acc[i] = from(finish(to(acc[i]) + to(other[i]) + ...))`, piece by piece (in parallel
/// for large buffers), reading the bytes without alignment requirements.
fn fold<T: bytemuck::Pod + Send + Sync, A: Copy + Default + Send + Sync>(
    acc: &mut [u8],
    others: &[&[u8]],
    to: impl Fn(T) -> A + Sync,
    from: impl Fn(A) -> T + Sync,
    add: impl Fn(A, A) -> A + Sync,
    finish: impl Fn(A) -> A + Sync,
) {
    let size = std::mem::size_of::<T>();
    let piece_bytes = PIECE * size;
    let work = |index: usize, piece: &mut [u8]| {
        let start = index * piece_bytes;
        let mut sums = [A::default(); PIECE];
        let elements = piece.len() / size;
        for (k, sum) in sums.iter_mut().take(elements).enumerate() {
            *sum = to(bytemuck::pod_read_unaligned(
                &piece[k * size..(k + 1) * size],
            ));
        }
        for other in others {
            let other = &other[start..start + piece.len()];
            for (k, sum) in sums.iter_mut().take(elements).enumerate() {
                *sum = add(
                    *sum,
                    to(bytemuck::pod_read_unaligned(
                        &other[k * size..(k + 1) * size],
                    )),
                );
            }
        }
        for (k, sum) in sums.iter().take(elements).enumerate() {
            let value = from(finish(*sum));
            piece[k * size..(k + 1) * size].copy_from_slice(bytemuck::bytes_of(&value));
        }
    };
    if acc.len() >= 16 * piece_bytes {
        acc.par_chunks_mut(piece_bytes)
            .enumerate()
            .for_each(|(index, piece)| work(index, piece));
    } else {
        acc.chunks_mut(piece_bytes)
            .enumerate()
            .for_each(|(index, piece)| work(index, piece));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(values).to_vec()
    }

    fn reduce(
        inputs: &[&[u8]],
        dtype: ElemType,
        op: ReduceOperation,
    ) -> Result<Vec<u8>, ServerError> {
        let mut acc = inputs[0].to_vec();
        reduce_in_place(&mut acc, &inputs[1..], dtype, op)?;
        Ok(acc)
    }

    #[test]
    fn large_unaligned_buffers_reduce_piece_by_piece() {
        // 300,001 f64 starting one byte into their buffers: misaligned, several pieces,
        // the parallel path.
        let values: Vec<f64> = (0..300_001).map(|i| i as f64 * 0.5).collect();
        let mut first = vec![0u8];
        first.extend_from_slice(bytemuck::cast_slice(&values));
        let mut second = vec![0u8];
        second.extend_from_slice(bytemuck::cast_slice(&values));
        let mut acc = first[1..].to_vec();
        reduce_in_place(
            &mut acc,
            &[&second[1..]],
            ElemType::F64,
            ReduceOperation::Sum,
        )
        .unwrap();
        let sums: Vec<f64> = acc
            .chunks_exact(8)
            .map(bytemuck::pod_read_unaligned::<f64>)
            .collect();
        assert!(sums.iter().enumerate().all(|(i, v)| *v == i as f64));
    }

    #[test]
    fn sums_and_means_follow_nccl_semantics() {
        let a = bytes_of(&[200u8, 7]);
        let b = bytes_of(&[100u8, 8]);
        let sum = reduce(&[&a, &b], ElemType::U8, ReduceOperation::Sum).unwrap();
        // 300 wraps to 44, as NCCL's sum in the element type does.
        assert_eq!(sum, vec![44, 15]);
        let mean = reduce(&[&a, &b], ElemType::U8, ReduceOperation::Mean).unwrap();
        assert_eq!(mean, vec![22, 7]);
        let a = bytes_of(&[-7i32, 9]);
        let b = bytes_of(&[2i32, 0]);
        let mean = reduce(&[&a, &b], ElemType::I32, ReduceOperation::Mean).unwrap();
        // -5 / 2 rounds toward zero.
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&mean), &[-2, 4]);
        let a = bytes_of(&[f16::from_f32(1.5), f16::from_f32(-2.0)]);
        let b = bytes_of(&[f16::from_f32(0.5), f16::from_f32(3.0)]);
        let mean = reduce(&[&a, &b], ElemType::F16, ReduceOperation::Mean).unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f16>(&mean),
            &[f16::from_f32(1.0), f16::from_f32(0.5)]
        );
    }

    #[test]
    fn types_nccl_lacks_are_unsupported() {
        let a = bytes_of(&[1i16]);
        let error = reduce(&[&a], ElemType::I16, ReduceOperation::Sum).unwrap_err();
        assert!(matches!(error, ServerError::Unsupported { .. }), "{error}");
    }
}
