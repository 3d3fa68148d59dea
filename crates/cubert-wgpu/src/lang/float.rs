//! Float operations whose WGSL spelling would not give the language's result.
//!
//! WGSL promises less than IEEE 754 for several operations the language defines exactly
//! (see "Floating Point Accuracy" in the WGSL specification), and GPUs take that latitude:
//!
//! - `x / y` is only within 2.5 ULP, `sqrt` inherits the error of `inverseSqrt`, and
//!   `x % y` is `x - y * trunc(x / y)`. The language rounds division and square roots
//!   correctly (`recip` too) and defines `%` as C's exact `fmod`: these helpers compute
//!   them on the bits with integer arithmetic ([`div`], [`sqrt`], [`rem`]), for `f32` and
//!   `f64` from one template.
//! - `round` rounds half to even in WGSL and half away from zero in Rust ([`round`]).
//! - `min`/`max` leave NaN operands to the implementation (SPIR-V `FMin` is undefined for
//!   them); the language returns the other operand ([`min`], [`max`]). Both zeros compare
//!   equal; `min` gives `-0.0` and `max` `+0.0` when they meet.
//! - NaN tests look at the bits ([`is_nan`]), which no float optimization can change.
//! - WGSL's transcendental functions are not used at all: they promise too little for
//!   `f32` and do not exist for `f64`. [`super::float32`] and [`super::float64`] build
//!   them in software.

use super::helpers::Helpers;

/// The binary format of a float register type, for the helper templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::F64 => "f64",
        }
    }

    /// Fills a template's placeholders with this format's types and constants.
    fn fill(self, template: &str) -> String {
        let (tokens, f32s, f64s): (&[&str], &[&str], &[&str]) = (
            &[
                "$HIDDEN", "$MANTM", "$MBITS", "$EBITS", "$BIAS", "$EMAX", "$SIGN", "$EXPM",
                "$QNAN", "$QUIET", "$HALF", "$ZERO", "$ONE", "$NAME", "$CLZ", "$FT", "$UT", "$u",
            ],
            &[
                "0x00800000u",
                "0x007fffffu",
                "23u",
                "8u",
                "127",
                "255",
                "0x80000000u",
                "0x7f800000u",
                "0x7fc00000u",
                "0x00400000u",
                "0.5f",
                "0.0f",
                "1.0f",
                "f32",
                "countLeadingZeros",
                "f32",
                "u32",
                "u",
            ],
            &[
                "0x0010000000000000lu",
                "0x000ffffffffffffflu",
                "52u",
                "11u",
                "1023",
                "2047",
                "0x8000000000000000lu",
                "0x7ff0000000000000lu",
                "0x7ff8000000000000lu",
                "0x0008000000000000lu",
                "0.5lf",
                "0.0lf",
                "1.0lf",
                "f64",
                "cubert_clz_u64",
                "f64",
                "u64",
                "lu",
            ],
        );
        let values = match self {
            Format::F32 => f32s,
            Format::F64 => f64s,
        };
        let mut out = template.to_string();
        for (token, value) in tokens.iter().zip(values) {
            out = out.replace(token, value);
        }
        out
    }

    /// Registers what every template of this format may call.
    fn common(self, helpers: &mut Helpers) {
        if self == Format::F64 {
            clz_u64(helpers);
        }
    }
}

/// Leading zeros of a `u64` (WGSL's `countLeadingZeros` lowers to 32-bit instructions).
const CLZ_U64: &str = r"
fn cubert_clz_u64(x: u64) -> u32 {
    let high = u32(x >> 32u);
    if (high != 0u) {
        return countLeadingZeros(high);
    }
    return 32u + countLeadingZeros(u32(x & 0xfffffffflu));
}";

/// The 64-bit leading-zero count helper; returns its name.
pub(super) fn clz_u64(helpers: &mut Helpers) -> String {
    helpers.add("cubert_clz_u64", || CLZ_U64.to_string())
}

const FUNNEL: &str = r"
// `(high:low) >> shift` for 0 <= shift < 32, the low word of the result.
fn cubert_funnel_u32(high: u32, low: u32, shift: u32) -> u32 {
    return select((low >> shift) | (high << (32u - shift)), low, shift == 0u);
}";

/// The 64-bit funnel shift of two words (the integer argument reductions use it); returns
/// its name.
pub(super) fn funnel(helpers: &mut Helpers) -> String {
    helpers.add("cubert_funnel_u32", || FUNNEL.to_string())
}

const IS_NAN: &str = r"
// Whether `x` is a NaN, from its bits.
fn cubert_is_nan_$NAME(x: $FT) -> bool {
    return (bitcast<$UT>(x) & ~$SIGN) > $EXPM;
}";

/// The helper testing for NaN on the bits; returns its name.
pub(super) fn is_nan(helpers: &mut Helpers, format: Format) -> String {
    helpers.add(&format!("cubert_is_nan_{}", format.name()), || {
        format.fill(IS_NAN)
    })
}

const ROUND_PACK: &str = r"
// The float nearest `q * 2^(e - $BIAS - $MBITS - 2)`, ties to even, signed by `sign`: `q`
// has its leading one at bit $MBITS + 2 (two bits below the last kept one), `sticky`
// says whether anything nonzero lies below `q`. Underflow gives subnormals and zeros,
// overflow infinities.
fn cubert_round_pack_$NAME(sign: $UT, e_in: i32, q_in: $UT, sticky_in: bool) -> $FT {
    var e = e_in;
    var q = q_in;
    var sticky = sticky_in;
    if (e >= $EMAX) {
        return bitcast<$FT>(sign | $EXPM);
    }
    if (e <= 0) {
        let shift = u32(1 - e);
        if (shift > $MBITS + 3u) {
            sticky = sticky || q != 0$u;
            q = 0$u;
        } else {
            sticky = sticky || (q & ((1$u << shift) - 1$u)) != 0$u;
            q = q >> shift;
        }
        e = 1;
    }
    var mantissa = q >> 2u;
    let round = (q & 2$u) != 0$u;
    let below = (q & 1$u) != 0$u || sticky;
    if (round && (below || (mantissa & 1$u) != 0$u)) {
        mantissa = mantissa + 1$u;
    }
    let bits = ($UT(u32(e - 1)) << $MBITS) + mantissa;
    if (bits >= $EXPM) {
        return bitcast<$FT>(sign | $EXPM);
    }
    return bitcast<$FT>(sign | bits);
}";

pub(super) fn round_pack(helpers: &mut Helpers, format: Format) -> String {
    format.common(helpers);
    helpers.add(&format!("cubert_round_pack_{}", format.name()), || {
        format.fill(ROUND_PACK)
    })
}

const DIV: &str = r"
// `a / b`, correctly rounded (WGSL's `/` is only within 2.5 ULP): the quotient of the
// significands bit by bit, then one rounding.
fn cubert_div_$NAME(a: $FT, b: $FT) -> $FT {
    let ua = bitcast<$UT>(a);
    let ub = bitcast<$UT>(b);
    let sign = (ua ^ ub) & $SIGN;
    let aa = ua & ~$SIGN;
    let ab = ub & ~$SIGN;
    if (aa > $EXPM) {
        return bitcast<$FT>(ua | $QUIET);
    }
    if (ab > $EXPM) {
        return bitcast<$FT>(ub | $QUIET);
    }
    if (aa == $EXPM) {
        if (ab == $EXPM) {
            return bitcast<$FT>($QNAN);
        }
        return bitcast<$FT>(sign | $EXPM);
    }
    if (ab == $EXPM) {
        return bitcast<$FT>(sign);
    }
    if (ab == 0$u) {
        if (aa == 0$u) {
            return bitcast<$FT>($QNAN);
        }
        return bitcast<$FT>(sign | $EXPM);
    }
    if (aa == 0$u) {
        return bitcast<$FT>(sign);
    }
    var ea = i32(u32(aa >> $MBITS));
    var ma = aa & $MANTM;
    if (ea == 0) {
        let s = $CLZ(ma) - $EBITS;
        ma = ma << s;
        ea = 1 - i32(s);
    } else {
        ma = ma | $HIDDEN;
    }
    var eb = i32(u32(ab >> $MBITS));
    var mb = ab & $MANTM;
    if (eb == 0) {
        let s = $CLZ(mb) - $EBITS;
        mb = mb << s;
        eb = 1 - i32(s);
    } else {
        mb = mb | $HIDDEN;
    }
    var e = ea - eb + $BIAS;
    if (ma < mb) {
        ma = ma << 1u;
        e = e - 1;
    }
    var r = ma;
    var q = 0$u;
    for (var k = 0u; k < $MBITS + 3u; k = k + 1u) {
        q = q << 1u;
        if (r >= mb) {
            r = r - mb;
            q = q | 1$u;
        }
        r = r << 1u;
    }
    return cubert_round_pack_$NAME(sign, e, q, r != 0$u);
}";

/// The correctly rounded division helper; returns its name.
pub(super) fn div(helpers: &mut Helpers, format: Format) -> String {
    round_pack(helpers, format);
    helpers.add(&format!("cubert_div_{}", format.name()), || {
        format.fill(DIV)
    })
}

const SQRT: &str = r"
// `sqrt(x)`, correctly rounded (WGSL's inherits the error of `inverseSqrt`): the integer
// square root of the significand, two bits of the radicand a step, then one rounding.
fn cubert_sqrt_$NAME(x: $FT) -> $FT {
    let u = bitcast<$UT>(x);
    let a = u & ~$SIGN;
    if (a > $EXPM) {
        return bitcast<$FT>(u | $QUIET);
    }
    if (a == 0$u) {
        return x;
    }
    if ((u & $SIGN) != 0$u) {
        return bitcast<$FT>($QNAN);
    }
    if (a == $EXPM) {
        return x;
    }
    var e = i32(u32(a >> $MBITS));
    var m = a & $MANTM;
    if (e == 0) {
        let s = $CLZ(m) - $EBITS;
        m = m << s;
        e = 1 - i32(s);
    } else {
        m = m | $HIDDEN;
    }
    var k = e - $BIAS;
    if ((k & 1) != 0) {
        m = m << 1u;
        k = k - 1;
    }
    // q = floor(sqrt(m * 2^($MBITS + 4))), r the remainder.
    var r = 0$u;
    var q = 0$u;
    for (var j = i32($MBITS) + 2; j >= 0; j = j - 1) {
        let p = 2 * j - i32($MBITS) - 4;
        var pair = 0$u;
        if (p >= 0) {
            pair = (m >> u32(p)) & 3$u;
        } else if (p == -1) {
            pair = (m << 1u) & 3$u;
        }
        r = (r << 2u) | pair;
        let t = (q << 2u) | 1$u;
        q = q << 1u;
        if (r >= t) {
            r = r - t;
            q = q | 1$u;
        }
    }
    return cubert_round_pack_$NAME(0$u, k / 2 + $BIAS, q, r != 0$u);
}";

/// The correctly rounded square root helper; returns its name.
pub(super) fn sqrt(helpers: &mut Helpers, format: Format) -> String {
    round_pack(helpers, format);
    helpers.add(&format!("cubert_sqrt_{}", format.name()), || {
        format.fill(SQRT)
    })
}

const REM: &str = r"
// `fmod(x, y)`: the exact remainder with the sign of `x` (WGSL's `%` is
// `x - y * trunc(x / y)`), by shifting and subtracting the significands.
fn cubert_rem_$NAME(x: $FT, y: $FT) -> $FT {
    let ux = bitcast<$UT>(x);
    let uy = bitcast<$UT>(y);
    let sx = ux & $SIGN;
    let ax = ux & ~$SIGN;
    let ay = uy & ~$SIGN;
    if (ax > $EXPM) {
        return bitcast<$FT>(ux | $QUIET);
    }
    if (ay > $EXPM) {
        return bitcast<$FT>(uy | $QUIET);
    }
    if (ax == $EXPM || ay == 0$u) {
        return bitcast<$FT>($QNAN);
    }
    if (ax < ay) {
        return x;
    }
    if (ax == ay) {
        return bitcast<$FT>(sx);
    }
    var ex = i32(u32(ax >> $MBITS));
    var mx = ax & $MANTM;
    if (ex == 0) {
        let s = $CLZ(mx) - $EBITS;
        mx = mx << s;
        ex = 1 - i32(s);
    } else {
        mx = mx | $HIDDEN;
    }
    var ey = i32(u32(ay >> $MBITS));
    var my = ay & $MANTM;
    if (ey == 0) {
        let s = $CLZ(my) - $EBITS;
        my = my << s;
        ey = 1 - i32(s);
    } else {
        my = my | $HIDDEN;
    }
    loop {
        if (mx >= my) {
            mx = mx - my;
            if (mx == 0$u) {
                return bitcast<$FT>(sx);
            }
        }
        if (ex <= ey) {
            break;
        }
        mx = mx << 1u;
        ex = ex - 1;
    }
    let s = $CLZ(mx) - $EBITS;
    mx = mx << s;
    ex = ex - i32(s);
    if (ex > 0) {
        return bitcast<$FT>(sx | ($UT(u32(ex)) << $MBITS) | (mx & $MANTM));
    }
    return bitcast<$FT>(sx | (mx >> u32(1 - ex)));
}";

/// The exact remainder helper; returns its name.
pub(super) fn rem(helpers: &mut Helpers, format: Format) -> String {
    format.common(helpers);
    helpers.add(&format!("cubert_rem_{}", format.name()), || {
        format.fill(REM)
    })
}

const ROUND: &str = r"
// Rounds half away from zero (Rust's `round`; WGSL's rounds half to even).
fn cubert_round_$NAME(x: $FT) -> $FT {
    let t = trunc(x);
    if (abs(x - t) >= $HALF) {
        return t + select($ONE, -$ONE, x < $ZERO);
    }
    return t;
}";

/// The round-half-away-from-zero helper; returns its name.
pub(super) fn round(helpers: &mut Helpers, format: Format) -> String {
    helpers.add(&format!("cubert_round_{}", format.name()), || {
        format.fill(ROUND)
    })
}

const MIN: &str = r"
// The smaller of `a` and `b`, the other one if one is NaN; -0 when both are zeros.
fn cubert_min_$NAME(a: $FT, b: $FT) -> $FT {
    if (cubert_is_nan_$NAME(a)) {
        return b;
    }
    if (cubert_is_nan_$NAME(b)) {
        return a;
    }
    if (a == b) {
        return bitcast<$FT>(bitcast<$UT>(a) | bitcast<$UT>(b));
    }
    return select(a, b, b < a);
}";

const MAX: &str = r"
// The larger of `a` and `b`, the other one if one is NaN; +0 when both are zeros.
fn cubert_max_$NAME(a: $FT, b: $FT) -> $FT {
    if (cubert_is_nan_$NAME(a)) {
        return b;
    }
    if (cubert_is_nan_$NAME(b)) {
        return a;
    }
    if (a == b) {
        return bitcast<$FT>(bitcast<$UT>(a) & bitcast<$UT>(b));
    }
    return select(a, b, b > a);
}";

/// The language's `min` helper; returns its name.
pub(super) fn min(helpers: &mut Helpers, format: Format) -> String {
    is_nan(helpers, format);
    helpers.add(&format!("cubert_min_{}", format.name()), || {
        format.fill(MIN)
    })
}

/// The language's `max` helper; returns its name.
pub(super) fn max(helpers: &mut Helpers, format: Format) -> String {
    is_nan(helpers, format);
    helpers.add(&format!("cubert_max_{}", format.name()), || {
        format.fill(MAX)
    })
}

/// `-x` on the bits (exact for every value, NaN payloads included).
pub(super) fn neg(format: Format, x: &str) -> String {
    let (ft, ut) = (format.name(), unsigned(format));
    let sign = format.fill("$SIGN");
    format!("bitcast<{ft}>(bitcast<{ut}>({x}) ^ {sign})")
}

/// `|x|` on the bits.
pub(super) fn abs(format: Format, x: &str) -> String {
    let (ft, ut) = (format.name(), unsigned(format));
    let sign = format.fill("$SIGN");
    format!("bitcast<{ft}>(bitcast<{ut}>({x}) & ~{sign})")
}

fn unsigned(format: Format) -> &'static str {
    match format {
        Format::F32 => "u32",
        Format::F64 => "u64",
    }
}

/// One float format's transcendental functions in software (`super::float32`,
/// `super::float64`): each function's WGSL source and the helpers they call.
pub(super) struct Transcendentals {
    /// The format the functions take and return.
    pub(super) format: Format,
    /// `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`, `tanh`, `erf`, by name; each
    /// source defines `cubert_<name>_<format>`.
    pub(super) functions: [(&'static str, &'static str); 9],
    /// `exp(x) - 1` (`cubert_expm1_<format>`), which `tanh` calls.
    pub(super) expm1: &'static str,
    /// Registers what every function calls.
    pub(super) common: fn(&mut Helpers),
    /// Registers the pieces of the logarithms.
    pub(super) log_parts: fn(&mut Helpers),
    /// Registers the argument reduction and the kernels of `sin`, `cos` and `tan`.
    pub(super) kernels: fn(&mut Helpers),
}

impl Transcendentals {
    /// Registers the helper of function `name` and what it calls; returns its name, or
    /// `None` for a name that is not one of the functions.
    pub(super) fn helper(&self, helpers: &mut Helpers, name: &str) -> Option<String> {
        let (_, source) = self
            .functions
            .iter()
            .find(|(function, _)| *function == name)?;
        let format = self.format.name();
        is_nan(helpers, self.format);
        (self.common)(helpers);
        match name {
            "ln" | "log2" | "log10" => (self.log_parts)(helpers),
            "sin" | "cos" | "tan" => (self.kernels)(helpers),
            "tanh" => {
                helpers.add(&format!("cubert_expm1_{format}"), || self.expm1.to_string());
            }
            "erf" => {
                let exp = self.functions[0].1;
                helpers.add(&format!("cubert_exp_{format}"), || exp.to_string());
            }
            _ => {}
        }
        Some(helpers.add(&format!("cubert_{name}_{format}"), || source.to_string()))
    }
}
