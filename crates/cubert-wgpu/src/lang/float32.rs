//! The `f32` transcendental functions, in software.
//!
//! WGSL's own `exp`, `log`, `sin`, `pow`, ... promise little (see "Floating Point
//! Accuracy" in the WGSL specification), and GPUs take that latitude: `sin` and `cos` are
//! only bounded on [-π, π], `exp` is within 3 + 2·|x| ulps, `log` within 2^-21 absolute
//! near 1, and `pow` is `exp2(y * log2(x))`. On NVIDIA's Vulkan driver `sin(1e5)` was
//! off in its third digit. The language gives Rust's results within a few ulps
//! everywhere, on every backend, so these helpers build `exp`, `ln`, `log2`, `log10`,
//! `sin`, `cos`, `tan`, `tanh`, `erf` and `powf` from additions, multiplications and
//! integer operations, with Rust's special values (NaN, infinities, signed zeros,
//! out-of-domain arguments).
//!
//! The algorithms and coefficients are those of FreeBSD's msun (Sun Microsystems, 1993,
//! freely redistributable; the `f32` conversions by Ian Lance Taylor, Cygnus Support, the
//! same ones the `libm` crate ports): `e_expf.c`, `e_logf.c`, `e_log2f.c`, `e_log10f.c`,
//! `s_expm1f.c`, `s_tanhf.c`, `s_erff.c` and `e_powf.c`; the sine, cosine and tangent
//! kernels are msun's `k_sin.c`, `k_cos.c` and `k_tan.c` with their coefficients rounded
//! to `f32` (as fdlibm's `kf_sin.c`, `kf_cos.c` and `kf_tan.c` had them). Three parts are
//! cubert's own:
//!
//! - **Argument reduction of `sin`, `cos` and `tan`** past 2^14 π/2 (about 25736) is
//!   done on 32-bit integers (WGSL has no 64-bit integers on every adapter): the 24-bit
//!   significand times a 96-bit window of 2/π's bits, the quadrant and a 96-bit fraction
//!   read off the product, and the fraction's leading 32 bits times π/2, turned into
//!   `y0 + y1` on the bits. The result is exact to about 2^-31 relative, for `1e38` as for
//!   `3e4`, whatever the driver does to float arithmetic. From π/4 to 2^14 π/2, where
//!   most arguments lie (rotary position embeddings reach 1e4), Cody and Waite's float
//!   reduction, with π/2 in pieces of 10 bits and msun's `e_rem_pio2f.c` steps for
//!   cancellation, is exact to 2^-36 with a third of the instructions and no integer
//!   products. Like `exp`'s reduction, it relies on the driver not reassociating float
//!   sums; fusing a product with its sum is harmless there.
//! - **Scaling by 2^k** (the last step of `exp` and `powf`) adds `k` to the exponent
//!   field, and where the result is subnormal scales with one multiplication, so it is
//!   rounded once.
//! - **Subnormal arguments** of the logarithms and `powf` are normalized on the bits, not
//!   by a multiplication a device flushing subnormals would turn into zero.
//!
//! WGSL's `/` is only within 2.5 ulps: where a quotient is most of a result (`tanh`), it is
//! corrected by its remainder, computed exactly on 12-bit heads and tails; elsewhere `/`
//! only computes correction terms.

use super::float::{Format, Transcendentals, div, funnel, is_nan, sqrt};
use super::helpers::Helpers;

/// Scaling by a power of two and the 12-bit head of a float.
const BITS: &str = r"
// `y * 2^k` for a normal `y`, rounded once: `k` is added to the exponent field where the
// result is normal; a subnormal result is `y` scaled to a normal number times 2^-25.
fn cubert_f32_scale(y: f32, k: i32) -> f32 {
    let bits = bitcast<u32>(y);
    let sign = bits & 0x80000000u;
    let e = i32((bits >> 23u) & 0xffu) + k;
    let rest = bits & 0x807fffffu;
    if (e >= 255) {
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if (e >= 1) {
        return bitcast<f32>(rest | (u32(e) << 23u));
    }
    if (e < -23) {
        return bitcast<f32>(sign);
    }
    let normal = bitcast<f32>(rest | (u32(e + 25) << 23u));
    return normal * bitcast<f32>(0x33000000u);
}

// `x` with its low 12 significand bits cleared (its 12 leading significand bits), so
// that its product with another such head is exact.
fn cubert_f32_head(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) & 0xfffff000u);
}

// `a / b` within about half an ulp, for quotients that are most of a result: WGSL's `/`
// (within 2.5 ulps) corrected by the remainder `a - q b`, whose products are computed
// exactly on 12-bit heads and tails. For normal `a`, `b` and quotient.
fn cubert_div_near_f32(a: f32, b: f32) -> f32 {
    let q = a / b;
    let qh = cubert_f32_head(q);
    let ql = q - qh;
    let bh = cubert_f32_head(b);
    let bl = b - bh;
    let r = (((a - qh * bh) - qh * bl) - ql * bh) - ql * bl;
    return q + r / b;
}

// The bits of the normal `f32` equal to the subnormal `x` (bits `ix`) times 2^`scale`
// (24 or 25), built on the bits: a multiplication would give zero where the device
// flushes subnormal operands.
fn cubert_f32_unsubnormal(ix: u32, scale: u32) -> u32 {
    let shift = countLeadingZeros(ix) - 8u;
    return ((scale + 1u - shift) << 23u) | ((ix << shift) & 0x007fffffu);
}";

fn bits(helpers: &mut Helpers) {
    helpers.add("cubert_f32_bits", || BITS.to_string());
}

const EXP: &str = r"
// `exp(x)` (msun's e_expf.c): x = k ln2 + r with |r| <= ln2 / 2, exp(r) from a rational
// approximation, then 2^k; infinity from 88.7228394 up, zero below -103.972084.
fn cubert_exp_f32(x: f32) -> f32 {
    let hx = bitcast<u32>(x);
    if (cubert_is_nan_f32(x)) {
        return bitcast<f32>(hx | 0x00400000u);
    }
    if (hx >= 0x42b17218u && hx < 0x80000000u) {
        return bitcast<f32>(0x7f800000u);
    }
    if (hx >= 0xc2cff1b5u) {
        return 0.0f;
    }
    let ax = hx & 0x7fffffffu;
    if (ax <= 0x39000000u) {
        // |x| <= 2^-14
        return 1.0f + x;
    }
    var k = 0;
    var hi = x;
    var lo = 0.0f;
    var r = x;
    if (ax > 0x3eb17218u) {
        let kf = round(x * 1.4426950216e+00f);
        k = i32(kf);
        // k ln2_hi is exact: ln2_hi has 16 significant bits, |k| <= 150.
        hi = x - kf * 6.9314575195e-01f;
        lo = kf * 1.4286067653e-06f;
        r = hi - lo;
    }
    let rr = r * r;
    let c = r - rr * (1.6666625440e-01f + rr * -2.7667332906e-03f);
    let y = 1.0f + (r * c / (2.0f - c) - lo + hi);
    return cubert_f32_scale(y, k);
}";

const EXPM1: &str = r"
// `exp(x) - 1` (msun's s_expm1f.c), accurate near zero; `tanh` is built on it.
fn cubert_expm1_f32(x_in: f32) -> f32 {
    var x = x_in;
    let hx = bitcast<u32>(x) & 0x7fffffffu;
    let negative = x < 0.0f;
    if (hx >= 0x4195b844u) {
        // |x| >= 27 ln2
        if (cubert_is_nan_f32(x)) {
            return bitcast<f32>(bitcast<u32>(x) | 0x00400000u);
        }
        if (negative) {
            return -1.0f;
        }
        if (hx > 0x42b17217u) {
            return bitcast<f32>(0x7f800000u);
        }
    }
    var c = 0.0f;
    var k = 0;
    if (hx > 0x3eb17218u) {
        let kf = round(x * 1.4426950216e+00f);
        k = i32(kf);
        // k ln2_hi is exact: ln2_hi has 16 significant bits.
        let hi = x - kf * 6.9313812256e-01f;
        let lo = kf * 9.0580006145e-06f;
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x33000000u) {
        // |x| < 2^-25
        return x;
    }
    let hfx = 0.5f * x;
    let hxs = x * hfx;
    let r1 = 1.0f + hxs * (-3.3333212137e-02f + hxs * 1.5807170421e-03f);
    let t = 3.0f - r1 * hfx;
    var e = hxs * ((r1 - t) / (6.0f - x * t));
    if (k == 0) {
        return x - (x * e - hxs);
    }
    e = x * (e - c) - c;
    e = e - hxs;
    if (k == -1) {
        return 0.5f * (x - e) - 0.5f;
    }
    if (k == 1) {
        if (x < -0.25f) {
            return -2.0f * (e - (x + 0.5f));
        }
        return 1.0f + 2.0f * (x - e);
    }
    if (k < 0 || k > 56) {
        return cubert_f32_scale(x - e + 1.0f, k) - 1.0f;
    }
    // 2^-k, exact
    let uf = cubert_f32_scale(1.0f, -k);
    if (k < 23) {
        return cubert_f32_scale(x - e + (1.0f - uf), k);
    }
    return cubert_f32_scale(x - (e + uf) + 1.0f, k);
}";

const LOG_PARTS: &str = r"
// The pieces of log(x) for a positive finite `x` (msun's e_logf.c): x = 2^k (1 + f) with
// sqrt(2)/2 < 1 + f < sqrt(2), s = f / (2 + f), r the approximation of the rest:
// log(1 + f) = f - hfsq + s (hfsq + r), hfsq = f^2 / 2.
struct CubertLogPartsF32 {
    k: f32,
    f: f32,
    hfsq: f32,
    s: f32,
    r: f32,
}

fn cubert_log_parts_f32(x: f32) -> CubertLogPartsF32 {
    var ix = bitcast<u32>(x);
    var k = 0;
    if (ix < 0x00800000u) {
        // subnormal: the bits of x 2^25
        ix = cubert_f32_unsubnormal(ix, 25u);
        k = -25;
    }
    ix = ix + (0x3f800000u - 0x3f3504f3u);
    k = k + i32(ix >> 23u) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    let f = bitcast<f32>(ix) - 1.0f;
    let hfsq = 0.5f * f * f;
    let s = f / (2.0f + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (4.0000972152e-01f + w * 2.4279078841e-01f);
    let t2 = z * (6.6666662693e-01f + w * 2.8498786688e-01f);
    return CubertLogPartsF32(f32(k), f, hfsq, s, t1 + t2);
}

// log(1 + f) as a head of 12 significant bits and a tail, for `log2` and `log10` to
// multiply each by their own head and tail of 1/ln2 or 1/ln10.
fn cubert_log_split_f32(p: CubertLogPartsF32) -> vec2<f32> {
    let hi = cubert_f32_head(p.f - p.hfsq);
    return vec2<f32>(hi, p.f - hi - p.hfsq + p.s * (p.hfsq + p.r));
}

// The special values of the logarithms: (1, result) when `x` is NaN, negative, zero, one
// or infinite, (0, 0) otherwise.
fn cubert_log_special_f32(x: f32) -> vec2<f32> {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return vec2<f32>(1.0f, bitcast<f32>(u | 0x00400000u));
    }
    if ((u & 0x7fffffffu) == 0u) {
        return vec2<f32>(1.0f, bitcast<f32>(0xff800000u));
    }
    if ((u & 0x80000000u) != 0u) {
        return vec2<f32>(1.0f, bitcast<f32>(0x7fc00000u));
    }
    if (u == 0x7f800000u) {
        return vec2<f32>(1.0f, x);
    }
    if (u == 0x3f800000u) {
        return vec2<f32>(1.0f, 0.0f);
    }
    return vec2<f32>(0.0f, 0.0f);
}";

fn log_parts(helpers: &mut Helpers) {
    bits(helpers);
    helpers.add("cubert_log_parts_f32", || LOG_PARTS.to_string());
}

const LN: &str = r"
// `ln(x)` (msun's e_logf.c).
fn cubert_ln_f32(x: f32) -> f32 {
    let special = cubert_log_special_f32(x);
    if (special.x != 0.0f) {
        return special.y;
    }
    let p = cubert_log_parts_f32(x);
    return p.s * (p.hfsq + p.r) + p.k * 9.0580006145e-06f - p.hfsq + p.f
        + p.k * 6.9313812256e-01f;
}";

const LOG2: &str = r"
// `log2(x)` (msun's e_log2f.c): log(1 + f) split into a 12-bit head and a tail, each
// times 1/ln2 split the same way, plus k.
fn cubert_log2_f32(x: f32) -> f32 {
    let special = cubert_log_special_f32(x);
    if (special.x != 0.0f) {
        return special.y;
    }
    let p = cubert_log_parts_f32(x);
    let split = cubert_log_split_f32(p);
    let hi = split.x;
    let lo = split.y;
    return (lo + hi) * -1.7605285393e-04f + lo * 1.4428710938e+00f + hi * 1.4428710938e+00f
        + p.k;
}";

const LOG10: &str = r"
// `log10(x)` (msun's e_log10f.c), as `log2` with 1/ln10 and k log10(2).
fn cubert_log10_f32(x: f32) -> f32 {
    let special = cubert_log_special_f32(x);
    if (special.x != 0.0f) {
        return special.y;
    }
    let p = cubert_log_parts_f32(x);
    let split = cubert_log_split_f32(p);
    let hi = split.x;
    let lo = split.y;
    return p.k * 7.9034151668e-07f + (lo + hi) * -3.1689971365e-05f + lo * 4.3432617188e-01f
        + hi * 4.3432617188e-01f + p.k * 3.0102920532e-01f;
}";

const REM_PIO2: &str = r"
// A reduced argument: x = n pi/2 + y0 + y1, |y0 + y1| <= pi/4, |y1| < ulp(y0).
struct CubertPio2F32 {
    n: i32,
    y0: f32,
    y1: f32,
}

// Word `i` of 2/pi's bits after the binary point, 32 to a word, most significant first:
// the window for the largest `f32` ends in word 6.
fn cubert_two_over_pi_word(i: i32) -> u32 {
    switch (i) {
        case 0: {
            return 0xa2f9836eu;
        }
        case 1: {
            return 0x4e441529u;
        }
        case 2: {
            return 0xfc2757d1u;
        }
        case 3: {
            return 0xf534ddc0u;
        }
        case 4: {
            return 0xdb629599u;
        }
        case 5: {
            return 0x3c439041u;
        }
        default: {
            return 0xfe5163abu;
        }
    }
}

// 32 bits of 2/pi from bit 32 i + b + 1 on (word `i` shifted left by `b`, 0 <= b < 32).
fn cubert_two_over_pi_window(i: i32, b: u32) -> u32 {
    let word = cubert_two_over_pi_word(i);
    return select((word << b) | (cubert_two_over_pi_word(i + 1) >> (32u - b)), word, b == 0u);
}

// The 64-bit product of `a` and `b` as (high, low) words, from 16-bit halves.
fn cubert_mul_wide_u32(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu;
    let ah = a >> 16u;
    let bl = b & 0xffffu;
    let bh = b >> 16u;
    let ll = al * bl;
    let middle = al * bh + (ll >> 16u);
    let middle2 = ah * bl + (middle & 0xffffu);
    let high = ah * bh + (middle >> 16u) + (middle2 >> 16u);
    return vec2<u32>(high, (middle2 << 16u) | (ll & 0xffffu));
}

// `x` (pi/4 < |x| <= 2^14 pi/2, about 25736) reduced modulo pi/2 by Cody and Waite's
// method, as msun's e_rem_pio2f.c does for smaller arguments: n = round(|x| 2/pi), then n
// pi/2 taken away in pieces of 10 bits of pi/2 (their products with n, below 2^15, are
// exact). The first two pieces leave an exact `r`; a third piece and its tail `w` give
// y0 = r - w. Where y0 came out 2^9, 2^19 or 2^29 times smaller than |x| (cancellation)
// the next piece is taken away too, its rounding error kept in `lo` (two-sum). Relative
// error of y0 + y1 below 2^-36 for every `f32` in the range (checked against a
// double-double reduction on the development VM). Every rounded product is a tail's, so
// a driver that fuses a product with its sum changes only the last bits of a correction.
fn cubert_rem_pio2_medium_f32(x: f32) -> CubertPio2F32 {
    let ax = abs(x);
    let nf = round(ax * 6.3661980629e-01f);
    var r = (ax - nf * 1.570312500e+00f) - nf * 4.835128784e-04f;
    var lo = 0.0f;
    var w = nf * 3.139164733e-07f;
    var y0 = r - w;
    let e = i32(bitcast<u32>(ax) >> 23u);
    if (e - i32((bitcast<u32>(y0) >> 23u) & 0xffu) > 9) {
        var t = r;
        var c = nf * 3.138557076e-07f;
        r = t - c;
        lo = (t - r) - c;
        w = nf * 6.077100628e-11f - lo;
        y0 = r - w;
        if (e - i32((bitcast<u32>(y0) >> 23u) & 0xffu) > 19) {
            t = r;
            c = nf * 6.070877134e-11f;
            r = t - c;
            lo = lo + ((t - r) - c);
            w = nf * 6.223371970e-14f - lo;
            y0 = r - w;
            if (e - i32((bitcast<u32>(y0) >> 23u) & 0xffu) > 29) {
                t = r;
                c = nf * 6.217248938e-14f;
                r = t - c;
                lo = lo + ((t - r) - c);
                w = nf * 6.123234263e-17f - lo;
                y0 = r - w;
            }
        }
    }
    let y1 = (r - y0) - w;
    let n = i32(nf);
    if (x < 0.0f) {
        return CubertPio2F32(-n, -y0, -y1);
    }
    return CubertPio2F32(n, y0, y1);
}

// `x` (finite, |x| > pi/4) reduced modulo pi/2: up to 2^14 pi/2 in floats
// (`cubert_rem_pio2_medium_f32`), past it on integers: |x| = m 2^e with a 24-bit m; the
// bits of 2/pi from bit e - 1 on make m (2/pi) 2^e mod 4 (earlier bits only add
// multiples of 4); its integer part mod 4 is the quadrant, its fraction (nearest integer
// taken away) times pi/2 the reduced argument.
fn cubert_rem_pio2_f32(x: f32) -> CubertPio2F32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) <= 0x46c90fdbu) {
        return cubert_rem_pio2_medium_f32(x);
    }
    let negative = (bits >> 31u) != 0u;
    let e = i32((bits >> 23u) & 0xffu) - 150;
    let m = (bits & 0x007fffffu) | 0x00800000u;
    // The 96-bit window (v2 v1 v0) of 2/pi's bits from bit `s` (the first after the point
    // is 1). e <= 104, so s <= 103 and the window ends in word 6.
    let s = max(1, e - 1);
    let q = (s - 1) >> 5u;
    let b = u32((s - 1) & 31);
    var v2 = 0xa2f9836eu;
    var v1 = 0x4e441529u;
    var v0 = 0xfc2757d1u;
    if (s > 1) {
        // |x| >= 2^26: the window starts further down the table
        v2 = cubert_two_over_pi_window(q, b);
        v1 = cubert_two_over_pi_window(q + 1, b);
        v0 = cubert_two_over_pi_window(q + 2, b);
    }
    // p = m * window, 120 bits in four words (p0 least significant)
    let t0 = cubert_mul_wide_u32(m, v0);
    let t1 = cubert_mul_wide_u32(m, v1);
    let t2 = cubert_mul_wide_u32(m, v2);
    let p0 = t0.y;
    let p1 = t0.x + t1.y;
    let c1 = select(0u, 1u, p1 < t1.y);
    let p2a = t1.x + c1;
    let p2 = p2a + t2.y;
    let c2 = select(0u, 1u, p2 < t2.y);
    let p3 = t2.x + c2;
    // x (2/pi) = p 2^(e - s - 95): the binary point is at bit s + 95 - e of p, which is
    // 94 + shift with 0 <= shift <= 26 (|x| > pi/4 makes e >= -24).
    let shift = u32(s + 1 - e);
    let r0 = cubert_funnel_u32(p1, p0, shift);
    let r1 = cubert_funnel_u32(p2, p1, shift);
    let r2 = cubert_funnel_u32(p3, p2, shift);
    // the quadrant: bits 94 and 95; the fraction: the 94 bits below, as fh fl fx
    var n = i32(r2 >> 30u);
    var fh = (r2 << 2u) | (r1 >> 30u);
    var fl = (r1 << 2u) | (r0 >> 30u);
    var fx = r0 << 2u;
    // fractions of a half or more: one quadrant up, the fraction negative
    let down = (fh >> 31u) != 0u;
    if (down) {
        n = n + 1;
        fx = ~fx + 1u;
        var carry = select(0u, 1u, fx == 0u);
        fl = ~fl + carry;
        carry = select(0u, 1u, carry == 1u && fl == 0u);
        fh = ~fh + carry;
    }
    // the leading 32 bits of |fraction|, its leading one at bit 31: fraction = top 2^-(32 + lead)
    var lead = 0u;
    var top = 0u;
    if (fh != 0u) {
        lead = countLeadingZeros(fh);
        top = cubert_funnel_u32(fh, fl, (32u - lead) & 31u);
        top = select(top, fh, lead == 0u);
    } else if (fl != 0u) {
        let z = countLeadingZeros(fl);
        lead = 32u + z;
        top = select(cubert_funnel_u32(fl, fx, (32u - z) & 31u), fl, z == 0u);
    } else {
        let z = countLeadingZeros(fx);
        lead = 64u + z;
        top = fx << z;
    }
    // times pi/2 (0xc90fdaa2 = pi/2 2^31): y = h 2^-(63 + lead), h's leading one at 62 or 63
    var h = cubert_mul_wide_u32(top, 0xc90fdaa2u);
    if ((h.x >> 31u) == 0u) {
        h = vec2<u32>((h.x << 1u) | (h.y >> 31u), h.y << 1u);
        lead = lead + 1u;
    }
    // y0: the leading 24 bits, in [2^-lead, 2^(1 - lead)); y1: the next 24 (both
    // truncated, so 0 <= y1 < ulp(y0)).
    let y0 = bitcast<f32>(((127u - lead) << 23u) | ((h.x >> 8u) & 0x007fffffu));
    let rest = ((h.x & 0xffu) << 16u) | (h.y >> 16u);
    let y1 = f32(rest) * bitcast<f32>((80u - lead) << 23u);
    var sign = 1.0f;
    if (down != negative) {
        sign = -1.0f;
    }
    if (negative) {
        n = -n;
    }
    return CubertPio2F32(n, sign * y0, sign * y1);
}";

fn rem_pio2(helpers: &mut Helpers) {
    funnel(helpers);
    helpers.add("cubert_rem_pio2_f32", || REM_PIO2.to_string());
}

const KERNELS: &str = r"
// sin(x + y) for |x + y| <= pi/4, y the tail of x (msun's k_sin.c, f32 coefficients).
fn cubert_k_sin_f32(x: f32, y: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = 8.333333768e-03f + z * (-1.984127011e-04f + z * 2.755731430e-06f)
        + z * w * (-2.505075969e-08f + z * 1.589691018e-10f);
    let v = z * x;
    return x - ((z * (0.5f * y - v * r) - y) - v * -1.666666716e-01f);
}

// cos(x + y) for |x + y| <= pi/4 (msun's k_cos.c, f32 coefficients).
fn cubert_k_cos_f32(x: f32, y: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = z * (4.166666791e-02f + z * (-1.388888923e-03f + z * 2.480158764e-05f))
        + w * w * (-2.755731430e-07f + z * (2.087572337e-09f + z * -1.135964760e-11f));
    let hz = 0.5f * z;
    let one_minus = 1.0f - hz;
    return one_minus + (((1.0f - one_minus) - hz) + (z * r - x * y));
}

// tan(x + y) for |x + y| <= pi/4 (msun's k_tan.c, f32 coefficients); -1 / tan(x + y) if
// `odd`.
fn cubert_k_tan_f32(x_in: f32, y_in: f32, odd: bool) -> f32 {
    var x = x_in;
    var y = y_in;
    let hx = bitcast<u32>(x);
    let big = (hx & 0x7fffffffu) >= 0x3f2ca140u;
    let negative = (hx >> 31u) != 0u;
    if (big) {
        // |x| >= 0.6744: tan(pi/4 - x) is better conditioned
        if (negative) {
            x = -x;
            y = -y;
        }
        x = (7.853981256e-01f - x) + (3.774894974e-08f - y);
        y = 0.0f;
    }
    let z = x * x;
    let w = z * z;
    let r = 1.333333403e-01f + w * (2.186948806e-02f + w * (3.592079040e-03f
        + w * (5.880412646e-04f + w * (7.817944424e-05f + w * -1.855863775e-05f))));
    let v = z * (5.396825448e-02f + w * (8.863239549e-03f + w * (1.456209458e-03f
        + w * (2.464631398e-04f + w * (7.140725211e-05f + w * 2.590730583e-05f)))));
    let s = z * x;
    let rr = y + z * (s * (r + v) + y) + s * 3.333333433e-01f;
    let sum = x + rr;
    if (big) {
        let so = select(1.0f, -1.0f, odd);
        let result = so - 2.0f * (x + (rr - sum * sum / (sum + so)));
        return select(result, -result, negative);
    }
    if (!odd) {
        return sum;
    }
    // -1 / (x + rr), with the quotient's head computed in pieces
    let w0 = cubert_f32_head(sum);
    let v0 = rr - (w0 - x);
    let a = -1.0f / sum;
    let a0 = cubert_f32_head(a);
    return a0 + a * (1.0f + a0 * w0 + a0 * v0);
}";

fn kernels(helpers: &mut Helpers) {
    bits(helpers);
    rem_pio2(helpers);
    helpers.add("cubert_k_trig_f32", || KERNELS.to_string());
}

const SIN: &str = r"
// `sin(x)`: NaN for infinities and NaNs.
fn cubert_sin_f32(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if (ix >= 0x7f800000u) {
        return bitcast<f32>(0x7fc00000u | bitcast<u32>(x));
    }
    if (ix <= 0x3f490fdbu) {
        if (ix < 0x39800000u) {
            // |x| < 2^-12: sin(x) rounds to x
            return x;
        }
        return cubert_k_sin_f32(x, 0.0f);
    }
    // quadrant n gives sin, cos, -sin, -cos of the reduced argument; both kernels run
    // and the result is selected (a switch would run up to four kernels where a
    // workgroup's arguments fall in every quadrant)
    let r = cubert_rem_pio2_f32(x);
    let s = cubert_k_sin_f32(r.y0, r.y1);
    let c = cubert_k_cos_f32(r.y0, r.y1);
    let v = select(s, c, (r.n & 1) == 1);
    return select(v, -v, (r.n & 2) == 2);
}";

const COS: &str = r"
// `cos(x)`: NaN for infinities and NaNs.
fn cubert_cos_f32(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if (ix >= 0x7f800000u) {
        return bitcast<f32>(0x7fc00000u | bitcast<u32>(x));
    }
    if (ix <= 0x3f490fdbu) {
        if (ix < 0x39800000u) {
            // |x| < 2^-12: cos(x) rounds to 1
            return 1.0f;
        }
        return cubert_k_cos_f32(x, 0.0f);
    }
    // quadrant n gives cos, -sin, -cos, sin of the reduced argument (selected, as in `sin`)
    let r = cubert_rem_pio2_f32(x);
    let s = cubert_k_sin_f32(r.y0, r.y1);
    let c = cubert_k_cos_f32(r.y0, r.y1);
    let v = select(c, s, (r.n & 1) == 1);
    return select(v, -v, ((r.n + 1) & 2) == 2);
}";

const TAN: &str = r"
// `tan(x)`: NaN for infinities and NaNs.
fn cubert_tan_f32(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if (ix >= 0x7f800000u) {
        return bitcast<f32>(0x7fc00000u | bitcast<u32>(x));
    }
    if (ix <= 0x3f490fdbu) {
        if (ix < 0x39800000u) {
            // |x| < 2^-12: tan(x) rounds to x
            return x;
        }
        return cubert_k_tan_f32(x, 0.0f, false);
    }
    let r = cubert_rem_pio2_f32(x);
    return cubert_k_tan_f32(r.y0, r.y1, (r.n & 1) == 1);
}";

const TANH: &str = r"
// `tanh(x)`: ±1 past 10, 1 - 2 / (expm1(2|x|) + 2) past ln(3) / 2 (msun's s_tanhf.c), an
// odd polynomial below, `x` below 2^-12.
fn cubert_tanh_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    let w = bits & 0x7fffffffu;
    let a = bitcast<f32>(w);
    var t: f32;
    if (w > 0x7f800000u) {
        return bitcast<f32>(bits | 0x00400000u);
    }
    if (w > 0x41200000u) {
        // |x| > 10, infinities included
        t = 1.0f;
    } else if (w > 0x3f0c9f54u) {
        // |x| > ln(3) / 2
        t = cubert_expm1_f32(2.0f * a);
        t = 1.0f - cubert_div_near_f32(2.0f, t + 2.0f);
    } else if (w >= 0x39800000u) {
        // |x| <= ln(3) / 2: an odd polynomial, tanh(x) = x + x z P(z) with z = x^2 (a
        // Chebyshev fit of degree 5, within 4e-9 relative with these f32 coefficients:
        // scripts/math/fit-tanh-f32.py; msun's expm1 quotients there were 3 ulps off on
        // NVIDIA's driver)
        let z = a * a;
        let p = -3.333333433e-01f + z * (1.333332360e-01f + z * (-5.396473408e-02f
            + z * (2.181879431e-02f + z * (-8.527798578e-03f + z * 2.528539393e-03f))));
        t = a + a * z * p;
    } else {
        // |x| < 2^-12: tanh(x) rounds to x
        return x;
    }
    return select(t, -t, (bits >> 31u) != 0u);
}";

const ERF: &str = r"
// `erf(x)` (msun's s_erff.c), whose coefficients are given by their bits. Rational
// approximations on [0, 0.84375), [0.84375, 1.25), erfc through exp on [1.25, 6), ±1
// past 6.
fn cubert_erf_f32(x: f32) -> f32 {
    let hx = bitcast<u32>(x);
    let ix = hx & 0x7fffffffu;
    let negative = (hx & 0x80000000u) != 0u;
    if (ix > 0x7f800000u) {
        return bitcast<f32>(hx | 0x00400000u);
    }
    if (ix == 0x7f800000u) {
        return select(1.0f, -1.0f, negative);
    }
    if (ix < 0x3f580000u) {
        if (ix < 0x31800000u) {
            // |x| < 2^-28: x + x * 2/sqrt(pi) - x (the last term underflows).
            if (ix < 0x04000000u) {
                return 0.125f * (8.0f * x + bitcast<f32>(0x3f8375d4u) * x);
            }
            return x + bitcast<f32>(0x3e0375d4u) * x;
        }
        let z = x * x;
        let r = bitcast<f32>(0x3e0375d4u) + z * (bitcast<f32>(0xbea66bebu) + z * (bitcast<f32>(0xbce9528fu)
            + z * (bitcast<f32>(0xbbbd1489u) + z * bitcast<f32>(0xb7c756b1u))));
        let s = 1.0f + z * (bitcast<f32>(0x3ecbbbceu) + z * (bitcast<f32>(0x3d852a63u)
            + z * (bitcast<f32>(0x3ba68116u) + z * (bitcast<f32>(0x390aee49u) + z * bitcast<f32>(0xb684e21au)))));
        return x + x * (r / s);
    }
    if (ix < 0x3fa00000u) {
        let s = abs(x) - 1.0f;
        let p = bitcast<f32>(0xbb1acdc6u) + s * (bitcast<f32>(0x3ed46805u) + s * (bitcast<f32>(0xbebe9208u)
            + s * (bitcast<f32>(0x3ea2fe54u) + s * (bitcast<f32>(0xbde31cc2u) + s * (bitcast<f32>(0x3d1151b3u)
            + s * bitcast<f32>(0xbb0df9c0u))))));
        let q = 1.0f + s * (bitcast<f32>(0x3dd9f331u) + s * (bitcast<f32>(0x3f0a5785u)
            + s * (bitcast<f32>(0x3d931ae7u) + s * (bitcast<f32>(0x3e013307u) + s * (bitcast<f32>(0x3c5f6e13u)
            + s * bitcast<f32>(0x3c445aa3u))))));
        let erx = bitcast<f32>(0x3f58560bu);
        return select(erx + p / q, -erx - p / q, negative);
    }
    if (ix >= 0x40c00000u) {
        return select(1.0f, -1.0f, negative);
    }
    let ax = abs(x);
    let s = 1.0f / (ax * ax);
    var big_r: f32;
    var big_s: f32;
    if (ix < 0x4036db6eu) {
        big_r = bitcast<f32>(0xbc21a093u) + s * (bitcast<f32>(0xbf31a0b7u) + s * (bitcast<f32>(0xc128f022u)
            + s * (bitcast<f32>(0xc2798057u) + s * (bitcast<f32>(0xc322658cu) + s * (bitcast<f32>(0xc3389ae7u)
            + s * (bitcast<f32>(0xc2a2932bu) + s * bitcast<f32>(0xc11d077eu)))))));
        big_s = 1.0f + s * (bitcast<f32>(0x419d35ceu) + s * (bitcast<f32>(0x4309a863u)
            + s * (bitcast<f32>(0x43d9486fu) + s * (bitcast<f32>(0x442158c9u) + s * (bitcast<f32>(0x43d6810bu)
            + s * (bitcast<f32>(0x42d9451fu) + s * (bitcast<f32>(0x40d23f7cu) + s * bitcast<f32>(0xbd777f97u))))))));
    } else {
        big_r = bitcast<f32>(0xbc21a092u) + s * (bitcast<f32>(0xbf4c9dd4u) + s * (bitcast<f32>(0xc18e104bu)
            + s * (bitcast<f32>(0xc320a2eau) + s * (bitcast<f32>(0xc41f6441u) + s * (bitcast<f32>(0xc480230bu)
            + s * bitcast<f32>(0xc3f1c275u))))));
        big_s = 1.0f + s * (bitcast<f32>(0x41f2b459u) + s * (bitcast<f32>(0x43a2e571u)
            + s * (bitcast<f32>(0x44c01759u) + s * (bitcast<f32>(0x4547fdbbu) + s * (bitcast<f32>(0x451f90ceu)
            + s * (bitcast<f32>(0x43ed43a7u) + s * bitcast<f32>(0xc1b38712u)))))));
    }
    // z: |x| with its low 12 bits cleared, so -z * z is exact.
    let z = cubert_f32_head(ax);
    let r = cubert_exp_f32(-z * z - 0.5625f) * cubert_exp_f32((z - ax) * (z + ax) + big_r / big_s);
    return select(1.0f - r / ax, r / ax - 1.0f, negative);
}";

const POW: &str = r"
// `powf(x, y)` (msun's e_powf.c): log2(|x|) in two pieces of extra precision, times y in
// two pieces, then 2^(y log2 |x|); C's special values.
fn cubert_pow_f32(x: f32, y: f32) -> f32 {
    let hx = bitcast<i32>(x);
    let hy = bitcast<i32>(y);
    var ix = hx & 0x7fffffff;
    let iy = hy & 0x7fffffff;
    // x^0 = 1 and 1^y = 1, NaNs included
    if (iy == 0 || hx == 0x3f800000) {
        return 1.0f;
    }
    if (ix > 0x7f800000 || iy > 0x7f800000) {
        return bitcast<f32>(0x7fc00000u);
    }
    // y_int: 0 if y is not an integer, 1 if odd, 2 if even (needed for negative x only)
    var y_int = 0;
    if (hx < 0) {
        if (iy >= 0x4b800000) {
            y_int = 2;
        } else if (iy >= 0x3f800000) {
            let k = (iy >> 23u) - 0x7f;
            let j = iy >> u32(23 - k);
            if ((j << u32(23 - k)) == iy) {
                y_int = 2 - (j & 1);
            }
        }
    }
    let inf = bitcast<f32>(0x7f800000u);
    if (iy == 0x7f800000) {
        // y is ±inf
        if (ix == 0x3f800000) {
            return 1.0f;
        }
        if (ix > 0x3f800000) {
            return select(0.0f, inf, hy >= 0);
        }
        return select(inf, 0.0f, hy >= 0);
    }
    if (iy == 0x3f800000) {
        if (hy >= 0) {
            return x;
        }
        return cubert_div_f32(1.0f, x);
    }
    if (hy == 0x40000000) {
        return x * x;
    }
    if (hy == 0x3f000000 && hx >= 0) {
        // y is 0.5, x is +0 or more
        return cubert_sqrt_f32(x);
    }
    var ax = abs(x);
    if (ix == 0x7f800000 || ix == 0 || ix == 0x3f800000) {
        // x is ±0, ±inf or ±1
        var z = ax;
        if (hy < 0) {
            z = cubert_div_f32(1.0f, z);
        }
        if (hx < 0) {
            if (((ix - 0x3f800000) | y_int) == 0) {
                return bitcast<f32>(0x7fc00000u);
            }
            if (y_int == 1) {
                z = -z;
            }
        }
        return z;
    }
    // the result's sign, on the bits (a driver may fold `-1.0 * 0.0` into `+0.0`)
    var sign = 0u;
    if (hx < 0) {
        if (y_int == 0) {
            return bitcast<f32>(0x7fc00000u);
        }
        if (y_int == 1) {
            sign = 0x80000000u;
        }
    }
    var t1: f32;
    var t2: f32;
    if (iy > 0x4d000000) {
        // |y| > 2^27: over- or underflows unless x is within 2^-20 of 1
        if (ix < 0x3f7ffff8) {
            return bitcast<f32>(sign | select(0u, 0x7f800000u, hy < 0));
        }
        if (ix > 0x3f800007) {
            return bitcast<f32>(sign | select(0u, 0x7f800000u, hy > 0));
        }
        // log(x) from its series
        let t = ax - 1.0f;
        let w = (t * t) * (0.5f - t * (0.333333333333f - t * 0.25f));
        let u = 1.4426879883e+00f * t;
        let v = t * 7.0526075433e-06f - w * 1.4426950216e+00f;
        t1 = cubert_f32_head(u + v);
        t2 = v - (t1 - u);
    } else {
        var n = 0;
        if (ix < 0x00800000) {
            // subnormal x: the bits of x 2^24
            ix = bitcast<i32>(cubert_f32_unsubnormal(u32(ix), 24u));
            n = n - 24;
        }
        n = n + (ix >> 23u) - 0x7f;
        let j = ix & 0x007fffff;
        ix = j | 0x3f800000;
        var k = 0;
        if (j <= 0x1cc471) {
            // |x| < sqrt(3/2)
            k = 0;
        } else if (j < 0x5db3d7) {
            // |x| < sqrt(3)
            k = 1;
        } else {
            n = n + 1;
            ix = ix - 0x00800000;
        }
        ax = bitcast<f32>(ix);
        let bp = select(1.0f, 1.5f, k == 1);
        let dp_h = select(0.0f, 5.84960938e-01f, k == 1);
        let dp_l = select(0.0f, 1.56322085e-06f, k == 1);
        // ss = s_h + s_l = (x - 1) / (x + 1) or (x - 1.5) / (x + 1.5)
        let u = ax - bp;
        let v = 1.0f / (ax + bp);
        let ss = u * v;
        let s_h = cubert_f32_head(ss);
        let t_h = bitcast<f32>((((u32(ix) >> 1u) & 0xfffff000u) | 0x20000000u) + 0x00400000u + (u32(k) << 21u));
        let t_l = ax - (t_h - bp);
        let s_l = v * ((u - s_h * t_h) - s_h * t_l);
        let s2 = ss * ss;
        var r = s2 * s2 * (6.0000002384e-01f + s2 * (4.2857143283e-01f + s2 * (3.3333334327e-01f
            + s2 * (2.7272811532e-01f + s2 * (2.3066075146e-01f + s2 * 2.0697501302e-01f)))));
        r = r + s_l * (s_h + ss);
        let sh2 = s_h * s_h;
        let th = cubert_f32_head(3.0f + sh2 + r);
        let tl = r - ((th - 3.0f) - sh2);
        let uu = s_h * th;
        let vv = s_l * th + tl * ss;
        let p_h = cubert_f32_head(uu + vv);
        let p_l = vv - (p_h - uu);
        // 2 / (3 ln 2) (ss + ...)
        let z_h = 9.6191406250e-01f * p_h;
        let z_l = -1.1736857402e-04f * p_h + p_l * 9.6179670095e-01f + dp_l;
        let tn = f32(n);
        t1 = cubert_f32_head(((z_h + z_l) + dp_h) + tn);
        t2 = z_l - (((t1 - tn) - dp_h) - z_h);
    }
    // (y1 + y2) (t1 + t2)
    let y1 = cubert_f32_head(y);
    let p_l = (y - y1) * t1 + y * t2;
    var p_h = y1 * t1;
    let z = p_l + p_h;
    let j = bitcast<i32>(z);
    if (j > 0x43000000) {
        // z > 128: overflows
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if ((j & 0x7fffffff) > 0x43160000) {
        // z < -150: underflows
        return bitcast<f32>(sign);
    }
    // Where z rounded to 128 or -150 exactly, the scaling below decides on the bits. (msun
    // compares p_l with z - p_h there, which a driver may fold into p_l: NVIDIA's then
    // gave infinity for results just under the largest f32.)
    // 2^(p_h + p_l)
    let i = j & 0x7fffffff;
    var k = (i >> 23u) - 0x7f;
    var n = 0;
    if (i > 0x3f000000) {
        // |z| > 0.5: n = [z + 0.5]
        n = j + (0x00800000 >> u32(k + 1));
        k = ((n & 0x7fffffff) >> 23u) - 0x7f;
        let t = bitcast<f32>(n & ~(0x007fffff >> u32(k)));
        n = ((n & 0x007fffff) | 0x00800000) >> u32(23 - k);
        if (j < 0) {
            n = -n;
        }
        p_h = p_h - t;
    }
    let t = bitcast<f32>(bitcast<u32>(p_l + p_h) & 0xffff8000u);
    let u = t * 6.93145752e-01f;
    let v = (p_l - (t - p_h)) * 6.9314718246e-01f + t * 1.42860654e-06f;
    var zz = u + v;
    let w = v - (zz - u);
    let tt = zz * zz;
    let c = zz - tt * (1.6666667163e-01f + tt * (-2.7777778450e-03f + tt * (6.6137559770e-05f
        + tt * (-1.6533901999e-06f + tt * 4.1381369442e-08f))));
    let r = (zz * c) / (c - 2.0f) - (w + zz * w);
    zz = 1.0f - (r - zz);
    return bitcast<f32>(sign ^ bitcast<u32>(cubert_f32_scale(zz, n)));
}";

/// The `f32` transcendental functions.
const TRANSCENDENTALS: Transcendentals = Transcendentals {
    format: Format::F32,
    functions: [
        ("exp", EXP),
        ("ln", LN),
        ("log2", LOG2),
        ("log10", LOG10),
        ("sin", SIN),
        ("cos", COS),
        ("tan", TAN),
        ("tanh", TANH),
        ("erf", ERF),
    ],
    expm1: EXPM1,
    common: bits,
    log_parts,
    kernels,
};

/// The `f32` helper of math function `name` (`exp`, `ln`, `log2`, `log10`, `sin`, `cos`,
/// `tan`, `tanh`, `erf`); returns its name, or `None` for another name.
pub(super) fn transcendental(helpers: &mut Helpers, name: &str) -> Option<String> {
    TRANSCENDENTALS.helper(helpers, name)
}

/// The `f32` `powf` helper; returns its name.
pub(super) fn pow(helpers: &mut Helpers) -> String {
    is_nan(helpers, Format::F32);
    div(helpers, Format::F32);
    sqrt(helpers, Format::F32);
    bits(helpers);
    helpers.add("cubert_pow_f32", || POW.to_string())
}
