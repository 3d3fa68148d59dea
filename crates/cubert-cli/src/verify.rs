//! Comparing results read back from a device with references computed on the host.
//!
//! Elementwise kernels and casts must match exactly (bit for bit for floats); reductions and
//! matrix products are compared with a relative error scaled by the magnitude of the terms
//! that were summed (`|got - want| / Σ|term|`), which stays meaningful when a sum cancels
//! to almost zero.

/// How a result compares with its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest error seen (absolute for exact comparisons, relative otherwise).
    pub max_error: f64,
    /// Elements that don't match (all of them if the lengths differ).
    pub mismatches: usize,
    /// Index of the first mismatching element.
    pub first_mismatch: Option<usize>,
}

impl Comparison {
    /// Whether every element matched.
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }

    fn length_mismatch(got: usize, want: usize) -> Self {
        Self {
            max_error: f64::INFINITY,
            mismatches: got.max(want),
            first_mismatch: Some(got.min(want)),
        }
    }
}

/// Element types compared exactly.
pub trait Exact: Copy {
    /// Whether `self` and `other` are the same value (same bits for floats).
    fn same(self, other: Self) -> bool;
    /// How far apart they are, for the report.
    fn distance(self, other: Self) -> f64;
}

impl Exact for f32 {
    fn same(self, other: Self) -> bool {
        self.to_bits() == other.to_bits()
    }
    fn distance(self, other: Self) -> f64 {
        (f64::from(self) - f64::from(other)).abs()
    }
}

impl Exact for f64 {
    fn same(self, other: Self) -> bool {
        self.to_bits() == other.to_bits()
    }
    fn distance(self, other: Self) -> f64 {
        (self - other).abs()
    }
}

impl Exact for i32 {
    fn same(self, other: Self) -> bool {
        self == other
    }
    fn distance(self, other: Self) -> f64 {
        (i64::from(self) - i64::from(other)).unsigned_abs() as f64
    }
}

/// Compares `got` with `want` element by element, exactly.
pub fn exact<T: Exact>(got: &[T], want: &[T]) -> Comparison {
    if got.len() != want.len() {
        return Comparison::length_mismatch(got.len(), want.len());
    }
    let mut comparison = Comparison {
        max_error: 0.0,
        mismatches: 0,
        first_mismatch: None,
    };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !g.same(*w) {
            comparison.mismatches += 1;
            comparison.first_mismatch.get_or_insert(i);
            let distance = g.distance(*w);
            // NaN where a number was expected is the worst error.
            comparison.max_error = comparison.max_error.max(if distance.is_nan() {
                f64::INFINITY
            } else {
                distance
            });
        }
    }
    comparison
}

/// Compares `got` with `want`, where `scale[i]` is the sum of the magnitudes of the terms
/// that make `want[i]`. Element `i` matches if `|got - want| / scale <= tolerance`.
pub fn relative(got: &[f64], want: &[f64], scale: &[f64], tolerance: f64) -> Comparison {
    if got.len() != want.len() || want.len() != scale.len() {
        return Comparison::length_mismatch(got.len(), want.len());
    }
    let mut comparison = Comparison {
        max_error: 0.0,
        mismatches: 0,
        first_mismatch: None,
    };
    for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
        let error = (g - w).abs() / s.max(f64::MIN_POSITIVE);
        let error = if error.is_nan() { f64::INFINITY } else { error };
        comparison.max_error = comparison.max_error.max(error);
        if error > tolerance {
            comparison.mismatches += 1;
            comparison.first_mismatch.get_or_insert(i);
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_comparison_counts_every_difference() {
        let c = exact(&[1.0f32, 2.0, 3.0], &[1.0, 2.5, 3.0]);
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first_mismatch, Some(1));
        assert_eq!(c.max_error, 0.5);
        assert!(exact(&[1i32, -2], &[1, -2]).ok());
        assert!(!exact(&[f32::NAN], &[1.0]).ok());
        assert!(!exact(&[1.0f64], &[1.0, 2.0]).ok());
    }

    #[test]
    fn relative_comparison_scales_by_the_terms() {
        let c = relative(&[1e-6], &[0.0], &[100.0], 1e-4);
        assert!(c.ok(), "{c:?}");
        let c = relative(&[1.0], &[0.0], &[100.0], 1e-4);
        assert!(!c.ok());
        assert!(!relative(&[f64::NAN], &[1.0], &[1.0], 1e-4).ok());
    }
}
