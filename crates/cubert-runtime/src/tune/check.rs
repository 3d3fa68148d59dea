//! The check mode: every candidate's output compared with the first one's.
//!
//! With `TuneSettings::check` on, the tuner reads the output of each candidate's warm-up run
//! through the set's [`OutputCheck`] and compares it with the output of the first candidate
//! that ran; a candidate whose output differs is skipped (and logged) like one that failed.
//! Each candidate then runs on freshly made inputs, so a candidate that writes nothing can't
//! pass by leaving the previous one's result in place.
//!
//! [`compare_elements`] is the comparison for buffers of one element type: integers exactly,
//! floats within a tolerance scaled to the largest reference value (candidates may sum in
//! different orders), NaN equal to NaN.

use crate::bytes::Bytes;
use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::ServerError;
use crate::runtime::Runtime;
use std::sync::Arc;

/// Reads the output of a candidate's run on `inputs`.
pub type ReadFn<R, I> = dyn Fn(&ComputeClient<R>, &I) -> Result<Bytes, ServerError> + Send + Sync;

/// Compares a candidate's output (second) with the reference (first): `Err` says how they
/// differ.
pub type CompareFn = dyn Fn(&[u8], &[u8]) -> Result<(), String> + Send + Sync;

/// How to read and compare an operation's output. See the module docs.
pub struct OutputCheck<R: Runtime, I> {
    read: Arc<ReadFn<R, I>>,
    compare: Arc<CompareFn>,
}

impl<R: Runtime, I> Clone for OutputCheck<R, I> {
    fn clone(&self) -> Self {
        Self {
            read: self.read.clone(),
            compare: self.compare.clone(),
        }
    }
}

impl<R: Runtime, I> OutputCheck<R, I> {
    /// A check reading outputs with `read` and comparing them with `compare`.
    pub fn new(
        read: impl Fn(&ComputeClient<R>, &I) -> Result<Bytes, ServerError> + Send + Sync + 'static,
        compare: impl Fn(&[u8], &[u8]) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            read: Arc::new(read),
            compare: Arc::new(compare),
        }
    }

    /// A check comparing outputs as elements of `elem` with [`compare_elements`].
    pub fn elements(
        elem: ElemType,
        read: impl Fn(&ComputeClient<R>, &I) -> Result<Bytes, ServerError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(read, move |reference, output| {
            compare_elements(elem, reference, output)
        })
    }

    /// Reads the output of a run on `inputs`.
    ///
    /// # Errors
    /// The read's error.
    pub fn read(&self, client: &ComputeClient<R>, inputs: &I) -> Result<Bytes, ServerError> {
        (self.read)(client, inputs)
    }

    /// Compares `output` with `reference`.
    ///
    /// # Errors
    /// How they differ.
    pub fn compare(&self, reference: &[u8], output: &[u8]) -> Result<(), String> {
        (self.compare)(reference, output)
    }
}

/// Relative tolerance (of the largest reference magnitude) for floats of `elem`.
fn tolerance(elem: ElemType) -> f64 {
    match elem {
        ElemType::F64 => 1e-9,
        ElemType::F32 => 1e-3,
        ElemType::F16 => 1e-2,
        ElemType::BF16 => 1e-1,
        _ => 0.0,
    }
}

fn as_f64(elem: ElemType, bytes: &[u8]) -> f64 {
    let mut word = [0u8; 8];
    word[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    match elem {
        ElemType::F16 => half::f16::from_le_bytes([word[0], word[1]]).to_f64(),
        ElemType::BF16 => half::bf16::from_le_bytes([word[0], word[1]]).to_f64(),
        ElemType::F32 => f64::from(f32::from_le_bytes([word[0], word[1], word[2], word[3]])),
        _ => f64::from_le_bytes(word),
    }
}

/// Compares two buffers of `elem` (see the module docs).
///
/// # Errors
/// The number of differing elements and the first one, or a length mismatch.
pub fn compare_elements(elem: ElemType, reference: &[u8], output: &[u8]) -> Result<(), String> {
    if reference.len() != output.len() {
        return Err(format!(
            "the output has {} bytes, the reference {}",
            output.len(),
            reference.len()
        ));
    }
    let size = elem.size();
    if !elem.is_float() {
        let differing = reference
            .chunks_exact(size)
            .zip(output.chunks_exact(size))
            .position(|(a, b)| a != b);
        return match differing {
            None => Ok(()),
            Some(index) => Err(format!(
                "element {index} differs from the reference (integers must match exactly)"
            )),
        };
    }
    let values = |bytes: &[u8]| -> Vec<f64> {
        bytes
            .chunks_exact(size)
            .map(|chunk| as_f64(elem, chunk))
            .collect()
    };
    let (expected, actual) = (values(reference), values(output));
    let scale = expected
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |max, v| max.max(v.abs()));
    let allowed = tolerance(elem) * scale;
    let mut first = None;
    let mut count = 0usize;
    for (index, (e, a)) in expected.iter().zip(&actual).enumerate() {
        let same = (e.is_nan() && a.is_nan()) || e == a || (e - a).abs() <= allowed;
        if !same {
            count += 1;
            first.get_or_insert((index, *e, *a));
        }
    }
    match first {
        None => Ok(()),
        Some((index, e, a)) => Err(format!(
            "{count} element(s) differ by more than {allowed:.3e}; first: element {index} is \
             {a}, the reference {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn floats_within_tolerance_match_and_others_are_reported() {
        let reference = f32_bytes(&[100.0, 1.0, f32::NAN]);
        let close = f32_bytes(&[100.001, 1.0, f32::NAN]);
        assert_eq!(compare_elements(ElemType::F32, &reference, &close), Ok(()));
        let far = f32_bytes(&[100.0, 2.0, f32::NAN]);
        let error = compare_elements(ElemType::F32, &reference, &far).unwrap_err();
        assert!(error.contains("element 1"), "{error}");
    }

    #[test]
    fn integers_must_match_exactly() {
        let reference: Vec<u8> = [1i32, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        let other: Vec<u8> = [1i32, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(compare_elements(ElemType::I32, &reference, &reference).is_ok());
        assert!(compare_elements(ElemType::I32, &reference, &other).is_err());
        assert!(compare_elements(ElemType::I32, &reference, &other[..4]).is_err());
    }
}
