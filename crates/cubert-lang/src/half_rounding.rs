//! Correctly rounded `f64 -> f16` and `f64 -> bf16`.
//!
//! The `half` crate's `from_f64` is not correctly rounded everywhere: for `bf16` (and for
//! `f16` on CPUs without F16C) it rounds from the top 32 bits of the `f64` and ignores the
//! rest, and with F16C it rounds to `f32` first (double rounding). Either way a value just
//! above a tie can round down. cubert's casts round once, from the exact `f64`, on every
//! backend: the CPU through these functions, CUDA in its prelude.
//!
//! How: round the `f64` to `f32` *to odd* (truncate, then set the last bit if anything was
//! cut off), then round that `f32` to the half type to nearest-even. Rounding to odd first
//! keeps the information a final rounding needs whenever the intermediate format has at
//! least two more significant bits than the final one (24 against 11 and 8), so the result
//! is the correctly rounded one. NaNs keep their payload as `f32` conversion keeps it.

use half::{bf16, f16};

/// `value` rounded toward zero to `f32`, with the last mantissa bit set if that dropped
/// anything ("round to odd"). Also the first step of `f64` to the 8-bit floats
/// ([`crate::fp8`]), whose at most 4 significant bits are far fewer than `f32`'s 24 less 2.
pub(crate) fn f32_round_to_odd(value: f64) -> f32 {
    if !value.is_finite() {
        return value as f32;
    }
    let nearest = value as f32;
    // Toward zero: step back if rounding to nearest went past `value` (also from ∞).
    let toward_zero = if f64::from(nearest).abs() > value.abs() {
        f32::from_bits(nearest.to_bits() - 1)
    } else {
        nearest
    };
    if f64::from(toward_zero) == value {
        toward_zero
    } else {
        f32::from_bits(toward_zero.to_bits() | 1)
    }
}

/// `value` as `f16`, rounded once to nearest-even from the exact `f64`.
pub fn f64_to_f16(value: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(value))
}

/// `value` as `bf16`, rounded once to nearest-even from the exact `f64`.
pub fn f64_to_bf16(value: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_just_above_a_tie_round_up() {
        // 1 + 2^-11 is the tie between 1 and the next f16; a hair above it rounds up.
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f64_to_f16(above), f16::from_bits(0x3c01));
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11)), f16::ONE);
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(f64_to_bf16(above), bf16::from_bits(0x3f81));
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)), bf16::ONE);
    }

    #[test]
    fn exact_values_overflow_zeros_and_nans_convert_as_expected() {
        for bits in (0..=u16::MAX).step_by(7) {
            let half = f16::from_bits(bits);
            if !half.is_nan() {
                assert_eq!(f64_to_f16(half.to_f64()).to_bits(), bits);
            }
            let brain = bf16::from_bits(bits);
            if !brain.is_nan() {
                assert_eq!(f64_to_bf16(brain.to_f64()).to_bits(), bits);
            }
        }
        assert_eq!(f64_to_f16(1e10), f16::INFINITY);
        assert_eq!(f64_to_f16(-1e10), f16::NEG_INFINITY);
        assert_eq!(f64_to_bf16(1e300), bf16::INFINITY);
        assert_eq!(f64_to_f16(-0.0).to_bits(), 0x8000);
        assert!(f64_to_f16(f64::NAN).is_nan() && f64_to_bf16(f64::NAN).is_nan());
        assert_eq!(f64_to_f16(1e-30).to_bits(), 0);
    }
}
