//! The kernel language (`#[kernel]`), one test per feature: element-type generics,
//! compile-time parameters, builtins, control flow, arithmetic semantics, casts, math
//! intrinsics, local arrays and out-of-bounds accesses. Each kernel is written once here and
//! launched through its generated `launch::<.., B::R>`, and each result is compared with
//! values computed on the host from the language's rules (`docs/kernel-language.md`):
//! wrapping integers, `x / 0 == x % 0 == 0`, shift amounts modulo the bit width, saturating
//! float-to-integer casts with NaN giving 0, half types computing in `f32` and rounding back
//! after every operation.
//!
//! Exact results are compared bit for bit (any NaN matching any NaN); the transcendental
//! math methods within a few ulps ([`within_ulps`]), so the same tests hold on a GPU whose
//! libm differs from Rust's.
//!
//! The tests are grouped by topic in `language/`: `arrays` (generics, compile-time values,
//! builtins, local arrays, out of bounds), `control_flow`, `arithmetic`, `casts`, `math`,
//! `cooperative` (shared memory, `sync_cube`, plane operations, atomics), `mma` (the
//! plane's matrix multiply-accumulate: tensor cores), `lines`
//! (vector loads and stores), `tensors` (shape, strides, rank).
//! [`kernel_definitions`] lists a specialization of every kernel they launch, for code
//! generators to compile in CI.

mod arithmetic;
mod arrays;
mod casts;
mod control_flow;
mod cooperative;
mod group_mma;
mod lines;
mod math;
mod mma;
mod tensors;

pub use arithmetic::*;
pub use arrays::*;
pub use casts::*;
pub use control_flow::*;
pub use cooperative::*;
pub use group_mma::*;
pub use lines::*;
pub use math::*;
pub use mma::*;
pub use tensors::*;

use crate::backend::{Client, TestBackend};
use cubert_runtime::lang::{KernelDefinition, Scalar};
use cubert_runtime::{Bytes, CubeCount, CubeDim, ElemType, Handle};
use std::fmt::Debug;

/// A specialization of every kernel of the language tests (the casts for every pair of
/// types), so a backend's code generator can compile each one without launching it.
pub fn kernel_definitions() -> Vec<KernelDefinition> {
    let mut all = Vec::new();
    all.extend(arrays::definitions());
    all.extend(control_flow::definitions());
    all.extend(arithmetic::definitions());
    all.extend(casts::definitions());
    all.extend(math::definitions());
    all.extend(cooperative::definitions());
    all.extend(lines::definitions());
    all.extend(tensors::definitions());
    all.extend(mma::definitions());
    all.extend(group_mma::definitions());
    all.extend(crate::fp8::definitions());
    all
}

/// Every kernel of the language tests records its IR without an expansion error (the CPU
/// runs the native path only, so this is where an expansion that a code generator would
/// reject first shows on the CPU).
pub fn every_test_kernel_records_its_ir<B: TestBackend>() {
    let all = kernel_definitions();
    assert!(all.len() > 100, "only {}", all.len());
    let failures: Vec<String> = all
        .iter()
        .filter_map(|definition| {
            definition
                .ir()
                .err()
                .map(|error| format!("{}: {error}", definition.id()))
        })
        .collect();
    assert!(failures.is_empty(), "expansions failed: {failures:#?}");
}

/// `values` as the little-endian bytes of their element type (one byte per `bool`),
/// uploaded.
fn upload_scalars<B: TestBackend, T: Scalar>(client: &Client<B>, values: &[T]) -> Handle {
    let size = T::ELEM.size();
    let mut bytes = Vec::with_capacity(values.len() * size);
    for value in values {
        bytes.extend_from_slice(&value.to_bits().to_le_bytes()[..size]);
    }
    client
        .create(Bytes::from_bytes_vec(bytes))
        .unwrap_or_else(|error| panic!("uploading {} values failed: {error}", values.len()))
}

/// Asserts that a launch of a kernel the backend's features deny (`what`) was refused with
/// `LaunchError::Unsupported`, when launched or (a backend that builds kernels on its device
/// thread) at the next sync.
fn assert_refused_as_unsupported<B: TestBackend>(
    client: &Client<B>,
    launched: Result<(), cubert_runtime::LaunchError>,
    what: &str,
) {
    use cubert_runtime::{LaunchError, ServerError};
    let result = launch_outcome::<B>(client, launched);
    assert!(
        matches!(
            result,
            Err(ServerError::Launch(LaunchError::Unsupported { .. }))
        ),
        "{what} where the features deny it: {result:?}"
    );
}

/// What became of a launch: its own error, or else the next sync's (a backend that builds
/// kernels on its device thread refuses them there).
fn launch_outcome<B: TestBackend>(
    client: &Client<B>,
    launched: Result<(), cubert_runtime::LaunchError>,
) -> Result<(), cubert_runtime::ServerError> {
    launched
        .map_err(cubert_runtime::ServerError::from)
        .and_then(|()| client.sync())
}

/// Asserts that `result` (of a call described by `what`) is an `InvalidArgument` refusal.
fn assert_invalid_argument(result: Result<(), cubert_runtime::LaunchError>, what: &str) {
    use cubert_runtime::{IoError, LaunchError};
    assert!(
        matches!(
            result,
            Err(LaunchError::IoError(IoError::InvalidArgument { .. }))
        ),
        "{what}: {result:?}"
    );
}

/// `len` copies of `value`, uploaded.
fn filled<B: TestBackend, T: Scalar>(client: &Client<B>, value: T, len: usize) -> Handle {
    upload_scalars::<B, T>(client, &vec![value; len])
}

/// Reads `handle` as elements of `T`.
fn read_scalars<B: TestBackend, T: Scalar>(client: &Client<B>, handle: &Handle) -> Vec<T> {
    let bytes = client
        .read_one(handle.clone())
        .unwrap_or_else(|error| panic!("reading {handle:?} failed: {error}"));
    let size = T::ELEM.size();
    assert_eq!(
        bytes.len() % size,
        0,
        "{} bytes of {}",
        bytes.len(),
        T::ELEM
    );
    bytes
        .chunks_exact(size)
        .map(|chunk| {
            let mut word = [0u8; 8];
            word[..size].copy_from_slice(chunk);
            T::from_bits(u64::from_le_bytes(word))
        })
        .collect()
}

/// Reads `handle` as raw bytes (how `bool` arrays are checked: exactly 0 or 1).
fn read_bytes<B: TestBackend>(client: &Client<B>, handle: &Handle) -> Vec<u8> {
    client
        .read_one(handle.clone())
        .unwrap_or_else(|error| panic!("reading {handle:?} failed: {error}"))
        .to_vec()
}

/// Cubes of `cube` units along x covering `units` units (the last cube may stick out).
fn cover(units: usize, cube: u32) -> (CubeCount, CubeDim) {
    let units = u32::try_from(units).expect("a test launch fits u32");
    (
        CubeCount::Static(units.div_ceil(cube).max(1), 1, 1),
        CubeDim::new_1d(cube),
    )
}

/// Whether `a` and `b` are the same value: the same bits, or both NaN.
fn same<T: Scalar>(a: T, b: T) -> bool {
    #[allow(clippy::eq_op)] // `x != x` is the NaN test of every scalar type
    let both_nan = a != a && b != b;
    a.to_bits() == b.to_bits() || both_nan
}

/// The bits of float `value` mapped to a line where neighbouring floats are 1 apart
/// (both zeros at 0).
fn ordered<F: Scalar>(value: F) -> i128 {
    let width = F::ELEM.size() * 8;
    let bits = value.to_bits();
    let sign = 1u64 << (width - 1);
    if bits & sign != 0 {
        -i128::from(bits & !sign)
    } else {
        i128::from(bits)
    }
}

/// Whether floats `a` and `b` are at most `ulps` representable values apart (both NaN
/// counts as equal, one NaN as unequal; an infinity is one ulp above the largest finite).
pub fn within_ulps<F: Scalar>(a: F, b: F, ulps: u32) -> bool {
    #[allow(clippy::eq_op)] // `x != x` is the NaN test
    let (a_nan, b_nan) = (a != a, b != b);
    if a_nan || b_nan {
        return a_nan && b_nan;
    }
    (ordered(a) - ordered(b)).unsigned_abs() <= u128::from(ulps)
}

/// Whether `value`, of a float type, is subnormal (exponent bits zero, mantissa bits not):
/// a value devices without strict float math may flush to zero.
pub fn is_subnormal<T: Scalar>(value: T) -> bool {
    let bits = value.to_bits();
    let (exponent, mantissa): (u64, u64) = match T::ELEM {
        ElemType::F16 => (0x7c00, 0x3ff),
        ElemType::BF16 => (0x7f80, 0x7f),
        ElemType::F32 => (0x7f80_0000, 0x7f_ffff),
        ElemType::F64 => (0x7ff0_0000_0000_0000, 0x000f_ffff_ffff_ffff),
        _ => return false,
    };
    bits & exponent == 0 && bits & mantissa != 0
}

/// Whether `value` is the smallest normal of its float type, either sign: a result that
/// rounds to it may be tiny before rounding, and a device that flushes tiny results (to
/// zero, before rounding, as GPUs do) returns a zero there.
pub fn is_smallest_normal<T: Scalar>(value: T) -> bool {
    let magnitude = match T::ELEM {
        ElemType::F16 => value.to_bits() & 0x7fff,
        ElemType::BF16 => value.to_bits() & 0x7fff,
        ElemType::F32 => value.to_bits() & 0x7fff_ffff,
        ElemType::F64 => value.to_bits() & 0x7fff_ffff_ffff_ffff,
        _ => return false,
    };
    let smallest = match T::ELEM {
        ElemType::F16 => 0x0400,
        ElemType::BF16 => 0x0080,
        ElemType::F32 => 0x0080_0000,
        _ => 0x0010_0000_0000_0000,
    };
    magnitude == smallest
}

/// Whether `value` is a zero with the sign of `of` (both of a float type).
pub fn is_zero_signed_as<T: Scalar>(value: T, of: T) -> bool {
    let sign: u64 = match T::ELEM {
        ElemType::F16 | ElemType::BF16 => 0x8000,
        ElemType::F32 => 0x8000_0000,
        ElemType::F64 => 0x8000_0000_0000_0000,
        _ => return false,
    };
    value.to_bits() & !sign == 0 && value.to_bits() & sign == of.to_bits() & sign
}

/// Asserts `got[i]` matches `want[i]` under `matches` for every `i`; the message names
/// `what` and the first mismatches with their inputs (outputs laid out `out[i * k + j]`
/// for input `i`).
fn assert_each<T: Debug, I: Debug>(
    what: &str,
    inputs: &[I],
    got: &[T],
    want: &[T],
    matches: impl Fn(&T, &T) -> bool,
) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    let mismatches: Vec<String> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !matches(g, w))
        .map(|(index, (g, w))| {
            // Outputs are laid out `out[i * per + k]` for input `i`.
            let per = (got.len() / inputs.len().max(1)).max(1);
            let input = inputs.get(index / per);
            format!("#{index} (input {input:?}): got {g:?}, expected {w:?}")
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{what}: {} of {} differ; first: {:#?}",
        mismatches.len(),
        got.len(),
        &mismatches[..mismatches.len().min(8)]
    );
}

/// [`assert_each`] with [`same`].
fn assert_same<T: Scalar, I: Debug>(what: &str, inputs: &[I], got: &[T], want: &[T]) {
    assert_each(what, inputs, got, want, |g, w| same(*g, *w));
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn the_smallest_normal_and_signed_zeros_are_told_apart_per_type() {
        assert!(is_smallest_normal(f32::MIN_POSITIVE) && is_smallest_normal(-f32::MIN_POSITIVE));
        assert!(is_smallest_normal(f64::MIN_POSITIVE) && is_smallest_normal(f16::MIN_POSITIVE));
        assert!(is_smallest_normal(bf16::MIN_POSITIVE));
        for not in [
            0.0f32,
            f32::MIN_POSITIVE * 2.0,
            f32::from_bits(0x007f_ffff),
            1.0,
        ] {
            assert!(!is_smallest_normal(not), "{not:e}");
        }
        assert!(!is_smallest_normal(1u32 << 23), "integers are no floats");
        assert!(is_zero_signed_as(0.0f32, f32::MIN_POSITIVE));
        assert!(is_zero_signed_as(-0.0f32, -f32::MIN_POSITIVE));
        assert!(!is_zero_signed_as(-0.0f32, f32::MIN_POSITIVE));
        assert!(!is_zero_signed_as(f32::from_bits(1), f32::MIN_POSITIVE));
        assert!(is_zero_signed_as(-0.0f64, -1.0f64));
    }
}
