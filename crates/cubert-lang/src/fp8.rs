//! The 8-bit float types [`e4m3`] and [`e5m2`]: storage, and exact conversions.
//!
//! Both are stored as their byte, with the sign in the top bit:
//!
//! - [`e4m3`] is OCP/NVIDIA "E4M3FN": 4 exponent bits (bias 7), 3 mantissa bits, no
//!   infinities; `0x7f` and `0xff` are NaN; the largest finite value is 448, the smallest
//!   subnormal 2^-9.
//! - [`e5m2`] is IEEE-like: 5 exponent bits (bias 15), 2 mantissa bits; `0x7c`/`0xfc` are
//!   ±∞, `0x7d..=0x7f` (and their negatives) NaN; the largest finite value is 57344, the
//!   smallest subnormal 2^-16.
//!
//! Converting to `f32` (and so to every wider float) is exact; a NaN becomes the quiet NaN
//! of its sign (`f32` bits `0x7fc00000 | sign`), an `e5m2` infinity the infinity of its
//! sign.
//!
//! Converting from `f32` or `f64` rounds once, to nearest with ties to even, and saturates
//! as CUDA's `__NV_SATFINITE` and the native `cvt.rn.satfinite` instructions do: a finite
//! value beyond the largest finite one, and an infinity (`e5m2` included, although it has
//! infinities), gives the largest finite value of its sign. Any NaN gives the canonical
//! NaN `0x7f` (positive, as the hardware's `cvt` and CUDA's software path from `float`
//! give it). From `f64` the value is first rounded to `f32` *to odd*, which keeps what the
//! final rounding to at most 4 significant bits needs (see [`crate::half_rounding`]), so
//! the result is the correctly rounded one; `f16` and `bf16` convert to `f32` exactly
//! first.
//!
//! There is no arithmetic on these types: a kernel loads, stores, selects and converts
//! them.

use std::cmp::Ordering;
use std::fmt;

/// The layout of one 8-bit float format.
struct Format {
    /// Mantissa bits.
    mantissa: u32,
    /// Exponent bias.
    bias: i32,
    /// The largest finite magnitude's code (`0x7e` / `0x7b`).
    max_code: u8,
    /// Whether the top exponent with a zero mantissa is infinity.
    has_infinity: bool,
}

const E4M3: Format = Format {
    mantissa: 3,
    bias: 7,
    max_code: 0x7e,
    has_infinity: false,
};

const E5M2: Format = Format {
    mantissa: 2,
    bias: 15,
    max_code: 0x7b,
    has_infinity: true,
};

/// The canonical NaN both formats convert a NaN to.
const NAN_CODE: u8 = 0x7f;

impl Format {
    /// Whether `bits` is a NaN.
    const fn is_nan(&self, bits: u8) -> bool {
        (bits & 0x7f) > self.max_code + if self.has_infinity { 1 } else { 0 }
    }

    /// The exact `f32` value of `bits`.
    fn decode(&self, bits: u8) -> f32 {
        let sign = u32::from(bits & 0x80) << 24;
        let magnitude = bits & 0x7f;
        if self.is_nan(bits) {
            return f32::from_bits(sign | 0x7fc0_0000);
        }
        if self.has_infinity && magnitude == self.max_code + 1 {
            return f32::from_bits(sign | 0x7f80_0000);
        }
        let exponent = i32::from(magnitude >> self.mantissa);
        let mantissa = u32::from(magnitude) & ((1 << self.mantissa) - 1);
        let magnitude = if exponent == 0 {
            // A subnormal: mantissa × 2^(1 - bias - mantissa bits), exact in f32.
            let scale = (127 + 1 - self.bias - self.mantissa as i32) as u32;
            mantissa as f32 * f32::from_bits(scale << 23)
        } else {
            let biased = (exponent - self.bias + 127) as u32;
            f32::from_bits((biased << 23) | (mantissa << (23 - self.mantissa)))
        };
        f32::from_bits(sign | magnitude.to_bits())
    }

    /// `value` rounded to nearest even, saturating; NaN gives [`NAN_CODE`].
    fn encode(&self, value: f32) -> u8 {
        if value.is_nan() {
            return NAN_CODE;
        }
        let x = value.to_bits();
        let sign = ((x >> 24) & 0x80) as u8;
        let field = (x >> 23) & 0xff;
        // The significand as an integer with 23 fraction bits, and its unbiased exponent
        // (f32 subnormals, far below every 8-bit subnormal, have no implicit bit).
        let (significand, exponent) = if field == 0 {
            (x & 0x7f_ffff, -126)
        } else {
            ((x & 0x7f_ffff) | 0x80_0000, field as i32 - 127)
        };
        let biased = exponent + self.bias;
        // How many of the 23 fraction bits (and, for 8-bit subnormals, integer bits) drop.
        let drop = if biased >= 1 {
            23 - self.mantissa as i32
        } else {
            23 - self.mantissa as i32 + (1 - biased)
        };
        let drop = drop.min(31) as u32;
        let mut kept = significand >> drop;
        let rest = significand & ((1u32 << drop) - 1);
        let half = 1u32 << (drop - 1);
        if rest > half || (rest == half && kept & 1 == 1) {
            kept += 1;
        }
        // A normal's code is its biased exponent and mantissa bits; adding the rounded
        // significand (implicit bit included) carries into the exponent by itself.
        let code = if biased >= 1 {
            ((biased as u32 - 1) << self.mantissa) + kept
        } else {
            kept
        };
        let code = if code > u32::from(self.max_code) {
            self.max_code
        } else {
            code as u8
        };
        sign | code
    }
}

macro_rules! fp8_type {
    ($name:ident, $format:expr, $max:expr, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Equality and order compare the values (NaN is unequal to everything, `-0 == +0`),
        /// as for the other float types; [`Self::to_bits`] gives the byte.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// Positive zero.
            pub const ZERO: $name = $name(0);
            /// The canonical NaN (`0x7f`), what every NaN converts to.
            pub const NAN: $name = $name(NAN_CODE);
            /// The largest finite value.
            pub const MAX: $name = $name($format.max_code);
            /// The most negative finite value.
            pub const MIN: $name = $name($format.max_code | 0x80);
            /// The largest finite value as `f32`.
            pub const MAX_F32: f32 = $max;

            /// The value whose byte is `bits`.
            pub const fn from_bits(bits: u8) -> $name {
                $name(bits)
            }

            /// The value's byte.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// Whether the value is a NaN.
            pub const fn is_nan(self) -> bool {
                $format.is_nan(self.0)
            }

            /// `value` rounded to nearest, ties to even, saturating to [`Self::MAX`] /
            /// [`Self::MIN`] (infinities too); NaN gives [`Self::NAN`].
            pub fn from_f32(value: f32) -> $name {
                $name($format.encode(value))
            }

            /// `value` rounded once to nearest, ties to even, from the exact `f64`; as
            /// [`Self::from_f32`] otherwise.
            pub fn from_f64(value: f64) -> $name {
                $name::from_f32(crate::half_rounding::f32_round_to_odd(value))
            }

            /// The value as `f32` (exact; NaN gives the quiet NaN of its sign).
            pub fn to_f32(self) -> f32 {
                $format.decode(self.0)
            }

            /// The value as `f64` (exact).
            pub fn to_f64(self) -> f64 {
                f64::from(self.to_f32())
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.to_f32() == other.to_f32()
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl From<$name> for f32 {
            fn from(value: $name) -> f32 {
                value.to_f32()
            }
        }

        impl From<u8> for $name {
            /// The value whose byte is `bits` (as [`Self::from_bits`]).
            fn from(bits: u8) -> $name {
                $name(bits)
            }
        }

        impl From<$name> for f64 {
            fn from(value: $name) -> f64 {
                value.to_f64()
            }
        }
    };
}

fp8_type!(
    e4m3,
    E4M3,
    448.0,
    "An 8-bit float, OCP \"E4M3FN\": bias 7, 3 mantissa bits, no infinities, NaN `0x7f`/`0xff`, largest finite 448."
);
fp8_type!(
    e5m2,
    E5M2,
    57344.0,
    "An 8-bit float, IEEE-like \"E5M2\": bias 15, 2 mantissa bits, infinities `0x7c`/`0xfc`, largest finite 57344."
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The finite values of a format, by code (NaNs and infinities left out).
    fn finite(to_f64: impl Fn(u8) -> f64) -> Vec<(u8, f64)> {
        (0..=255u8)
            .map(|code| (code, to_f64(code)))
            .filter(|(_, value)| value.is_finite())
            .collect()
    }

    /// The reference rounding, by search: the finite code nearest `value` (ties to the
    /// even code), or the largest finite one of the sign past it; NaN gives `0x7f`.
    fn nearest(codes: &[(u8, f64)], max: f64, value: f64) -> u8 {
        if value.is_nan() {
            return NAN_CODE;
        }
        let sign = if value.is_sign_negative() { 0x80 } else { 0 };
        if value.abs() > max {
            return codes
                .iter()
                .find(|(code, v)| *v == max && code & 0x80 == 0)
                .map(|(code, _)| code | sign)
                .unwrap();
        }
        let mut best: Option<(u8, f64)> = None;
        for &(code, v) in codes {
            // Zeros: keep the input's sign.
            if v == 0.0 && (code & 0x80) != sign {
                continue;
            }
            let distance = (v - value).abs();
            best = match best {
                None => Some((code, distance)),
                Some((_, d)) if distance < d => Some((code, distance)),
                Some((c, d)) if distance == d && code & 1 == 0 && c & 1 == 1 => {
                    Some((code, distance))
                }
                keep => keep,
            };
        }
        best.unwrap().0
    }

    fn e4m3_codes() -> Vec<(u8, f64)> {
        finite(|code| e4m3::from_bits(code).to_f64())
    }

    fn e5m2_codes() -> Vec<(u8, f64)> {
        finite(|code| e5m2::from_bits(code).to_f64())
    }

    #[test]
    fn e4m3_decodes_to_the_format_values() {
        assert_eq!(e4m3::from_bits(0x7e).to_f32(), 448.0);
        assert_eq!(e4m3::from_bits(0x01).to_f32(), 2f32.powi(-9));
        assert_eq!(e4m3::from_bits(0x08).to_f32(), 2f32.powi(-6));
        assert_eq!(e4m3::from_bits(0x38).to_f32(), 1.0);
        assert_eq!(e4m3::from_bits(0xb8).to_f32(), -1.0);
        assert_eq!(e4m3::from_bits(0x80).to_f32().to_bits(), 0x8000_0000);
        assert!(e4m3::from_bits(0x7f).is_nan() && e4m3::from_bits(0xff).is_nan());
        assert_eq!(e4m3::from_bits(0xff).to_f32().to_bits(), 0xffc0_0000);
        assert_eq!(
            (0..=255u8).filter(|c| e4m3::from_bits(*c).is_nan()).count(),
            2
        );
    }

    #[test]
    fn e5m2_decodes_to_the_format_values() {
        assert_eq!(e5m2::from_bits(0x7b).to_f32(), 57344.0);
        assert_eq!(e5m2::from_bits(0x01).to_f32(), 2f32.powi(-16));
        assert_eq!(e5m2::from_bits(0x3c).to_f32(), 1.0);
        assert_eq!(e5m2::from_bits(0x7c).to_f32(), f32::INFINITY);
        assert_eq!(e5m2::from_bits(0xfc).to_f32(), f32::NEG_INFINITY);
        assert_eq!(
            (0..=255u8).filter(|c| e5m2::from_bits(*c).is_nan()).count(),
            6
        );
        // e5m2 is the top byte of an f16.
        for code in 0..=255u8 {
            let wide = half::f16::from_bits(u16::from(code) << 8).to_f32();
            let narrow = e5m2::from_bits(code).to_f32();
            assert!(
                wide == narrow || (wide.is_nan() && narrow.is_nan()),
                "{code:#x}"
            );
        }
    }

    #[test]
    fn e4m3_round_trips_every_finite_value() {
        for code in 0..=255u8 {
            let value = e4m3::from_bits(code);
            let back = e4m3::from_f32(value.to_f32());
            let back64 = e4m3::from_f64(value.to_f64());
            if value.is_nan() {
                assert_eq!((back.to_bits(), back64.to_bits()), (0x7f, 0x7f));
            } else {
                assert_eq!(
                    (back.to_bits(), back64.to_bits()),
                    (code, code),
                    "{code:#x}"
                );
            }
        }
    }

    #[test]
    fn e5m2_round_trips_every_finite_value() {
        for code in 0..=255u8 {
            let value = e5m2::from_bits(code);
            let back = e5m2::from_f32(value.to_f32()).to_bits();
            let back64 = e5m2::from_f64(value.to_f64()).to_bits();
            if value.is_nan() {
                assert_eq!((back, back64), (0x7f, 0x7f));
            } else if value.to_f32().is_infinite() {
                // Saturating: ±∞ gives ±max.
                assert_eq!((back, back64), (0x7b | (code & 0x80), 0x7b | (code & 0x80)));
            } else {
                assert_eq!((back, back64), (code, code), "{code:#x}");
            }
        }
    }

    /// Every midpoint between neighbouring finite values, a hair either side of it (in
    /// `f32`, and closer in `f64`, where rounding through `f32` to nearest would land on
    /// the midpoint), and values past the largest, against the search.
    fn check_rounding(
        codes: &[(u8, f64)],
        max: f64,
        from_f32: impl Fn(f32) -> u8,
        from_f64: impl Fn(f64) -> u8,
    ) {
        let mut values: Vec<f64> = codes.iter().map(|(_, v)| *v).collect();
        values.sort_by(f64::total_cmp);
        values.dedup();
        let mut inputs = vec![
            max * 1.03,
            max * 2.0,
            1e30,
            -1e30,
            f64::MAX,
            1e-300,
            -1e-300,
        ];
        for pair in values.windows(2) {
            let mid = (pair[0] + pair[1]) / 2.0;
            inputs.push(mid);
            inputs.push(f64::from(f32::from_bits((mid as f32).to_bits() + 1)));
            inputs.push(f64::from(f32::from_bits((mid as f32).to_bits() - 1)));
            inputs.push(mid + mid.abs() * 2f64.powi(-40));
            inputs.push(mid - mid.abs() * 2f64.powi(-40));
        }
        // Midpoints past the largest value (max + half an ulp ties to max or past it).
        let top = values[values.len() - 1];
        let ulp = top - values[values.len() - 2];
        inputs.extend([top + ulp / 2.0, -(top + ulp / 2.0), top + ulp]);
        for input in inputs {
            let expected = nearest(codes, max, input);
            assert_eq!(from_f64(input), expected, "f64 {input:e}");
            if (input as f32) as f64 == input {
                assert_eq!(from_f32(input as f32), expected, "f32 {input:e}");
            }
        }
    }

    #[test]
    fn e4m3_rounds_midpoints_to_even_and_saturates() {
        check_rounding(
            &e4m3_codes(),
            448.0,
            |v| e4m3::from_f32(v).to_bits(),
            |v| e4m3::from_f64(v).to_bits(),
        );
        assert_eq!(e4m3::from_f32(464.0).to_bits(), 0x7e);
        assert_eq!(e4m3::from_f32(f32::INFINITY).to_bits(), 0x7e);
        assert_eq!(e4m3::from_f32(f32::NEG_INFINITY).to_bits(), 0xfe);
        assert_eq!(e4m3::from_f32(-f32::NAN).to_bits(), 0x7f);
    }

    #[test]
    fn e5m2_rounds_midpoints_to_even_and_saturates() {
        check_rounding(
            &e5m2_codes(),
            57344.0,
            |v| e5m2::from_f32(v).to_bits(),
            |v| e5m2::from_f64(v).to_bits(),
        );
        assert_eq!(e5m2::from_f32(f32::INFINITY).to_bits(), 0x7b);
        assert_eq!(e5m2::from_f64(f64::NEG_INFINITY).to_bits(), 0xfb);
        assert_eq!(e5m2::from_f64(f64::NAN).to_bits(), 0x7f);
    }

    #[test]
    fn subnormals_round_to_even_and_underflow_keeps_the_sign() {
        // Half the smallest subnormal ties to zero; a hair more rounds up to it.
        assert_eq!(e4m3::from_f32(2f32.powi(-10)).to_bits(), 0x00);
        assert_eq!(
            e4m3::from_f64(2f64.powi(-10) + 2f64.powi(-60)).to_bits(),
            0x01
        );
        assert_eq!(e4m3::from_f32(-2f32.powi(-10)).to_bits(), 0x80);
        assert_eq!(e4m3::from_f32(3.0 * 2f32.powi(-10)).to_bits(), 0x02);
        assert_eq!(e5m2::from_f32(2f32.powi(-17)).to_bits(), 0x00);
        assert_eq!(e5m2::from_f32(3.0 * 2f32.powi(-17)).to_bits(), 0x02);
        assert_eq!(e5m2::from_f32(-f32::from_bits(1)).to_bits(), 0x80);
        // The largest subnormal rounds up into the smallest normal.
        assert_eq!(e4m3::from_f32(7.75 * 2f32.powi(-9)).to_bits(), 0x08);
    }

    #[test]
    fn comparisons_are_by_value() {
        assert_eq!(e4m3::from_bits(0x00), e4m3::from_bits(0x80));
        assert_ne!(e4m3::NAN, e4m3::NAN);
        assert!(e5m2::from_f32(1.0) < e5m2::from_f32(2.0));
        assert!(e5m2::MIN < e5m2::ZERO);
        assert_eq!(e4m3::MAX.to_f32(), e4m3::MAX_F32);
        assert_eq!(e5m2::MAX.to_f32(), e5m2::MAX_F32);
    }
}
