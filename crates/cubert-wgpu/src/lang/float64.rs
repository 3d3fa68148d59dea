//! The `f64` transcendental functions, in software.
//!
//! WGSL's `exp`, `log`, `sin`, `pow`, ... take `f32` only on every backend (SPIR-V's
//! GLSL.std.450, HLSL and MSL have no 64-bit versions), but `f64` addition,
//! multiplication, division and conversions exist wherever the adapter has `SHADER_F64`.
//! These helpers build `exp`, `ln`, `log2`, `log10`, `sin`, `cos`, `tan`, `tanh`, `erf`
//! and `powf` from them, with Rust's special values (NaN, infinities, signed zeros,
//! out-of-domain arguments) and within a few ulps of Rust's results everywhere else.
//!
//! The algorithms and coefficients are those of FreeBSD's msun (Sun Microsystems, 1993,
//! freely redistributable; the same ones the `libm` crate ports): `e_exp.c`, `e_log.c`,
//! `e_log2.c`, `e_log10.c`, `k_sin.c`, `k_cos.c`, `k_tan.c`, `s_expm1.c`, `s_tanh.c`,
//! `s_erf.c` and `e_pow.c`. Two parts are cubert's own, or partly so, because a WGSL
//! driver may reassociate and contract float arithmetic, which would break the exact
//! float tricks msun uses there:
//!
//! - **Argument reduction of `sin`, `cos` and `tan`** from 2^20 π/2 (about 1.6e6) on
//!   is done on integers: the argument's 53-bit significand times a 192-bit window of
//!   2/π's bits (from a 1184-bit table), the quadrant and a 128-bit fraction read off the
//!   product, and the fraction times π/2 in 128-bit fixed point, turned into `y0 + y1`
//!   on the bits. The result is exact to about 2^-65 relative, for `1e300` as for `2e6`.
//!   The products are written out on named 64-bit words, not indexed arrays, which
//!   NVIDIA's driver keeps in memory (`sin` ran five times slower with them). Below
//!   2^20 π/2, msun's own float reduction (`e_rem_pio2.c`'s medium path) is exact to
//!   2^-70 at a fraction of the cost (`f64` `sin` 2.4 times faster on the H200). Its
//!   error terms need sums in their written order: the strict SPIR-V path marks them
//!   so, and neither NVIDIA's driver nor lavapipe reassociated them on the WGSL path
//!   (`long::language::f64_functions_hold_where_the_float_reduction_runs`).
//! - **Scaling by 2^k** (the last step of `exp`, `expm1` and `powf`) adds `k` to the
//!   exponent field, and where the result is subnormal scales with one multiplication,
//!   so it is rounded once.

use super::float::{Format, Transcendentals, div, funnel, is_nan, sqrt};
use super::helpers::Helpers;

/// The high and low words of an `f64`, an `f64` from its words, and exact scaling by a
/// power of two.
const WORDS: &str = r"
// The high 32 bits of `x`.
fn cubert_f64_hi(x: f64) -> u32 {
    return u32(bitcast<u64>(x) >> 32u);
}

// The low 32 bits of `x`.
fn cubert_f64_lo(x: f64) -> u32 {
    return u32(bitcast<u64>(x) & 0xfffffffflu);
}

// The `f64` whose high and low words are `hi` and `lo`.
fn cubert_f64_of_words(hi: u32, lo: u32) -> f64 {
    return bitcast<f64>((u64(hi) << 32u) | u64(lo));
}

// `x` with its low word cleared (its 21 leading significand bits).
fn cubert_f64_zero_lo(x: f64) -> f64 {
    return bitcast<f64>(bitcast<u64>(x) & 0xffffffff00000000lu);
}

// `y * 2^k` for a normal `y`, rounded once: `k` is added to the exponent field where the
// result is normal; a subnormal result is `y` scaled to a normal number times 2^-54.
fn cubert_f64_scale(y: f64, k: i32) -> f64 {
    let bits = bitcast<u64>(y);
    let sign = bits & 0x8000000000000000lu;
    let e = i32((bits >> 52u) & 0x7fflu) + k;
    let rest = bits & 0x800ffffffffffffflu;
    if (e >= 2047) {
        return bitcast<f64>(sign | 0x7ff0000000000000lu);
    }
    if (e >= 1) {
        return bitcast<f64>(rest | (u64(u32(e)) << 52u));
    }
    if (e < -52) {
        return bitcast<f64>(sign);
    }
    let normal = bitcast<f64>(rest | (u64(u32(e + 54)) << 52u));
    return normal * bitcast<f64>(0x3c90000000000000lu);
}";

fn words(helpers: &mut Helpers) {
    helpers.add("cubert_f64_words", || WORDS.to_string());
}

const EXP: &str = r"
// `exp(x)` (msun's e_exp.c): x = k ln2 + r with |r| <= ln2 / 2, exp(r) from a rational
// approximation, then 2^k.
fn cubert_exp_f64(x: f64) -> f64 {
    if (cubert_is_nan_f64(x)) {
        return bitcast<f64>(bitcast<u64>(x) | 0x0008000000000000lu);
    }
    if (x > 709.782712893383973096lf) {
        return bitcast<f64>(0x7ff0000000000000lu);
    }
    if (x < -745.13321910194110842lf) {
        return 0.0lf;
    }
    let hx = cubert_f64_hi(x) & 0x7fffffffu;
    if (hx <= 0x3e300000u) {
        // |x| <= 2^-28
        return 1.0lf + x;
    }
    var k = 0;
    var hi = x;
    var lo = 0.0lf;
    var r = x;
    if (hx > 0x3fd62e42u) {
        let kf = round(x * 1.44269504088896338700e+00lf);
        k = i32(kf);
        // k ln2_hi is exact: ln2_hi has 32 significant bits.
        hi = x - kf * 6.93147180369123816490e-01lf;
        lo = kf * 1.90821492927058770002e-10lf;
        r = hi - lo;
    }
    let rr = r * r;
    let c = r - rr * (1.66666666666666019037e-01lf + rr * (-2.77777777770155933842e-03lf
        + rr * (6.61375632143793436117e-05lf + rr * (-1.65339022054652515390e-06lf
        + rr * 4.13813679705723846039e-08lf))));
    let y = 1.0lf + (r * c / (2.0lf - c) - lo + hi);
    return cubert_f64_scale(y, k);
}";

const EXPM1: &str = r"
// `exp(x) - 1` (msun's s_expm1.c), accurate near zero; `tanh` is built on it.
fn cubert_expm1_f64(x_in: f64) -> f64 {
    var x = x_in;
    let hx = cubert_f64_hi(x) & 0x7fffffffu;
    let negative = x < 0.0lf;
    if (hx >= 0x4043687au) {
        // |x| >= 56 ln2
        if (cubert_is_nan_f64(x)) {
            return bitcast<f64>(bitcast<u64>(x) | 0x0008000000000000lu);
        }
        if (negative) {
            return -1.0lf;
        }
        if (x > 7.09782712893383973096e+02lf) {
            return bitcast<f64>(0x7ff0000000000000lu);
        }
    }
    var c = 0.0lf;
    var k = 0;
    if (hx > 0x3fd62e42u) {
        let kf = round(x * 1.44269504088896338700e+00lf);
        k = i32(kf);
        let hi = x - kf * 6.93147180369123816490e-01lf;
        let lo = kf * 1.90821492927058770002e-10lf;
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (hx < 0x3c900000u) {
        // |x| < 2^-54
        return x;
    }
    let hfx = 0.5lf * x;
    let hxs = x * hfx;
    let r1 = 1.0lf + hxs * (-3.33333333333331316428e-02lf + hxs * (1.58730158725481460165e-03lf
        + hxs * (-7.93650757867487942473e-05lf + hxs * (4.00821782732936239552e-06lf
        + hxs * -2.01099218183624371326e-07lf))));
    let t = 3.0lf - r1 * hfx;
    var e = hxs * ((r1 - t) / (6.0lf - x * t));
    if (k == 0) {
        return x - (x * e - hxs);
    }
    e = x * (e - c) - c;
    e = e - hxs;
    if (k == -1) {
        return 0.5lf * (x - e) - 0.5lf;
    }
    if (k == 1) {
        if (x < -0.25lf) {
            return -2.0lf * (e - (x + 0.5lf));
        }
        return 1.0lf + 2.0lf * (x - e);
    }
    if (k < 0 || k > 56) {
        return cubert_f64_scale(x - e + 1.0lf, k) - 1.0lf;
    }
    // 2^-k, exact
    let uf = cubert_f64_scale(1.0lf, -k);
    if (k < 20) {
        return cubert_f64_scale(x - e + (1.0lf - uf), k);
    }
    return cubert_f64_scale(x - (e + uf) + 1.0lf, k);
}";

const LOG_PARTS: &str = r"
// The pieces of log(x) for a positive finite `x` (msun's e_log.c): x = 2^k (1 + f) with
// sqrt(2)/2 < 1 + f < sqrt(2), s = f / (2 + f), r the approximation of the rest:
// log(1 + f) = f - hfsq + s (hfsq + r), hfsq = f^2 / 2.
struct CubertLogParts {
    k: f64,
    f: f64,
    hfsq: f64,
    s: f64,
    r: f64,
}

fn cubert_log_parts_f64(x_in: f64) -> CubertLogParts {
    var x = x_in;
    var hx = cubert_f64_hi(x);
    var k = 0;
    if (hx < 0x00100000u) {
        // subnormal: scale by 2^54
        x = x * 18014398509481984.0lf;
        hx = cubert_f64_hi(x);
        k = -54;
    }
    hx = hx + (0x3ff00000u - 0x3fe6a09eu);
    k = k + i32(hx >> 20u) - 0x3ff;
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    let f = cubert_f64_of_words(hx, cubert_f64_lo(x)) - 1.0lf;
    let hfsq = 0.5lf * f * f;
    let s = f / (2.0lf + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (3.999999999940941908e-01lf + w * (2.222219843214978396e-01lf
        + w * 1.531383769920937332e-01lf));
    let t2 = z * (6.666666666666735130e-01lf + w * (2.857142874366239149e-01lf
        + w * (1.818357216161805012e-01lf + w * 1.479819860511658591e-01lf)));
    return CubertLogParts(f64(k), f, hfsq, s, t1 + t2);
}

// log(1 + f) as a head of 21 significant bits and a tail, for `log2` and `log10` to
// multiply each by their own head and tail of 1/ln2 or 1/ln10.
fn cubert_log_split_f64(p: CubertLogParts) -> vec2<f64> {
    let hi = cubert_f64_zero_lo(p.f - p.hfsq);
    return vec2<f64>(hi, p.f - hi - p.hfsq + p.s * (p.hfsq + p.r));
}

// The special values of the logarithms: (1, result) when `x` is NaN, negative, zero, one
// or infinite, (0, 0) otherwise.
fn cubert_log_special_f64(x: f64) -> vec2<f64> {
    let u = bitcast<u64>(x);
    let a = u & 0x7ffffffffffffffflu;
    if (a > 0x7ff0000000000000lu) {
        return vec2<f64>(1.0lf, bitcast<f64>(u | 0x0008000000000000lu));
    }
    if (a == 0lu) {
        return vec2<f64>(1.0lf, bitcast<f64>(0xfff0000000000000lu));
    }
    if ((u >> 63u) != 0lu) {
        return vec2<f64>(1.0lf, bitcast<f64>(0x7ff8000000000000lu));
    }
    if (u == 0x7ff0000000000000lu) {
        return vec2<f64>(1.0lf, x);
    }
    if (u == 0x3ff0000000000000lu) {
        return vec2<f64>(1.0lf, 0.0lf);
    }
    return vec2<f64>(0.0lf, 0.0lf);
}";

fn log_parts(helpers: &mut Helpers) {
    words(helpers);
    helpers.add("cubert_log_parts_f64", || LOG_PARTS.to_string());
}

const LN: &str = r"
// `ln(x)` (msun's e_log.c).
fn cubert_ln_f64(x: f64) -> f64 {
    let special = cubert_log_special_f64(x);
    if (special.x != 0.0lf) {
        return special.y;
    }
    let p = cubert_log_parts_f64(x);
    return p.s * (p.hfsq + p.r) + p.k * 1.90821492927058770002e-10lf - p.hfsq + p.f
        + p.k * 6.93147180369123816490e-01lf;
}";

const LOG2: &str = r"
// `log2(x)` (msun's e_log2.c): log(1 + f) split into a 21-bit head and a tail, each
// times 1/ln2 split the same way, plus k.
fn cubert_log2_f64(x: f64) -> f64 {
    let special = cubert_log_special_f64(x);
    if (special.x != 0.0lf) {
        return special.y;
    }
    let p = cubert_log_parts_f64(x);
    let split = cubert_log_split_f64(p);
    let hi = split.x;
    let lo = split.y;
    let val_hi = hi * 1.44269504072144627571e+00lf;
    var val_lo = (lo + hi) * 1.67517131648865118353e-10lf + lo * 1.44269504072144627571e+00lf;
    let w = p.k + val_hi;
    val_lo = val_lo + ((p.k - w) + val_hi);
    return val_lo + w;
}";

const LOG10: &str = r"
// `log10(x)` (msun's e_log10.c), as `log2` with 1/ln10 and k log10(2).
fn cubert_log10_f64(x: f64) -> f64 {
    let special = cubert_log_special_f64(x);
    if (special.x != 0.0lf) {
        return special.y;
    }
    let p = cubert_log_parts_f64(x);
    let split = cubert_log_split_f64(p);
    let hi = split.x;
    let lo = split.y;
    let val_hi = hi * 4.34294481878168880939e-01lf;
    let y = p.k * 3.01029995663611771306e-01lf;
    var val_lo = p.k * 3.69423907715893078616e-13lf + (lo + hi) * 2.50829467116452752298e-11lf
        + lo * 4.34294481878168880939e-01lf;
    let w = y + val_hi;
    val_lo = val_lo + ((y - w) + val_hi);
    return val_lo + w;
}";

const REM_PIO2: &str = r"
// A reduced argument: x = n pi/2 + y0 + y1, |y0 + y1| <= pi/4, |y1| < ulp(y0).
struct CubertPio2 {
    n: i32,
    y0: f64,
    y1: f64,
}

// 2/pi's bits after the binary point, 32 to a word, most significant first: the window
// for the largest `f64` ends at bit 1161.
const CUBERT_TWO_OVER_PI = array<u32, 37>(
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
    0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu,
    0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u,
    0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu, 0xde05980fu,
    0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
    0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u,
    0x56033046u,
);

// The 128-bit product of `a` and `b` as (high, low) halves, from 32-bit pieces.
fn cubert_mul64_wide(a: u64, b: u64) -> vec2<u64> {
    let a0 = a & 0xfffffffflu;
    let a1 = a >> 32u;
    let b0 = b & 0xfffffffflu;
    let b1 = b >> 32u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let middle = (p00 >> 32u) + (p01 & 0xfffffffflu) + (p10 & 0xfffffffflu);
    let high = a1 * b1 + (p01 >> 32u) + (p10 >> 32u) + (middle >> 32u);
    return vec2<u64>(high, (middle << 32u) | (p00 & 0xfffffffflu));
}

// The high 128 bits of the product of two 128-bit numbers, given as (high, low) halves.
// Written out, without arrays: an indexed array may be kept in memory.
fn cubert_mul128_hi(a: vec2<u64>, b: vec2<u64>) -> vec2<u64> {
    let ll = cubert_mul64_wide(a.y, b.y);
    let lh = cubert_mul64_wide(a.y, b.x);
    let hl = cubert_mul64_wide(a.x, b.y);
    let hh = cubert_mul64_wide(a.x, b.x);
    // bits 64 .. 127: only their carries reach the result
    let s1 = ll.x + lh.y;
    let s2 = s1 + hl.y;
    let carry = select(0lu, 1lu, s1 < ll.x) + select(0lu, 1lu, s2 < s1);
    // bits 128 .. 191, then 192 .. 255
    let t1 = hh.y + lh.x;
    let t2 = t1 + hl.x;
    let t3 = t2 + carry;
    let top = hh.x + select(0lu, 1lu, t1 < hh.y) + select(0lu, 1lu, t2 < t1)
        + select(0lu, 1lu, t3 < t2);
    return vec2<u64>(top, t3);
}

// `x` (pi/4 < |x| < 2^20 pi/2, about 1.6e6) reduced modulo pi/2 as msun's e_rem_pio2.c
// reduces such arguments (Cody and Waite): n = round(|x| 2/pi), n pi/2 taken away in
// pieces of 33 bits (products with n, below 2^20, are exact) with a tail each; a second
// and a third piece only where the first left a result 2^16 and 2^49 times smaller than
// |x|, where the subtraction before was exact. Relative error of y0 + y1 below 2^-70
// (checked against 300-bit arithmetic on the development VM, the double nearest every
// multiple n pi/2 included). Every rounded product is a tail's, so a driver that fuses a
// product with its sum changes only the last bits of a correction.
fn cubert_rem_pio2_medium_f64(x: f64) -> CubertPio2 {
    let ax = abs(x);
    let nf = round(ax * bitcast<f64>(0x3fe45f306dc9c883lu));
    var r = ax - nf * bitcast<f64>(0x3ff921fb54400000lu);
    var w = nf * bitcast<f64>(0x3dd0b4611a626331lu);
    var y0 = r - w;
    let j = i32(cubert_f64_hi(ax) >> 20u);
    if (j - i32((cubert_f64_hi(y0) >> 20u) & 0x7ffu) > 16) {
        let t = r;
        w = nf * bitcast<f64>(0x3dd0b4611a600000lu);
        r = t - w;
        w = nf * bitcast<f64>(0x3ba3198a2e037073lu) - ((t - r) - w);
        y0 = r - w;
        if (j - i32((cubert_f64_hi(y0) >> 20u) & 0x7ffu) > 49) {
            let t2 = r;
            w = nf * bitcast<f64>(0x3ba3198a2e000000lu);
            r = t2 - w;
            w = nf * bitcast<f64>(0x397b839a252049c1lu) - ((t2 - r) - w);
            y0 = r - w;
        }
    }
    let y1 = (r - y0) - w;
    let n = i32(nf);
    if (x < 0.0lf) {
        return CubertPio2(-n, -y0, -y1);
    }
    return CubertPio2(n, y0, y1);
}

// `x` (finite, |x| > pi/4) reduced modulo pi/2: below 2^20 pi/2 in floats
// (`cubert_rem_pio2_medium_f64`), from there on integers: |x| = m 2^e with a 53-bit m;
// the bits of 2/pi from bit e - 1 on make m (2/pi) 2^e mod 4 (earlier bits only add
// multiples of 4); its integer part mod 4 is the quadrant, its fraction (nearest integer
// taken away) times pi/2 the reduced argument.
fn cubert_rem_pio2_f64(x: f64) -> CubertPio2 {
    if ((cubert_f64_hi(x) & 0x7fffffffu) < 0x413921fbu) {
        return cubert_rem_pio2_medium_f64(x);
    }
    let bits = bitcast<u64>(x);
    let negative = (bits >> 63u) != 0lu;
    let e = i32((bits >> 52u) & 0x7fflu) - 1075;
    let m = (bits & 0x000ffffffffffffflu) | 0x0010000000000000lu;
    // The 192-bit window of 2/pi's bits from bit `s` (the first bit after the point is 1).
    let s = max(1, e - 1);
    let q = (s - 1) >> 5u;
    let b = u32((s - 1) & 31);
    // e <= 971 (the largest f64), so s <= 970, q <= 30 and q + 6 is the table's last word.
    // Least significant word first; below 2^55 the window is the table's first six words.
    var window = array<u32, 6>(0x3c439041u, 0xdb629599u, 0xf534ddc0u, 0xfc2757d1u,
        0x4e441529u, 0xa2f9836eu);
    if (s > 1) {
        var table = CUBERT_TWO_OVER_PI;
        for (var i = 0; i < 6; i = i + 1) {
            let first = table[q + i];
            let next = table[q + i + 1];
            window[5 - i] = select((first << b) | (next >> (32u - b)), first, b == 0u);
        }
    }
    // p = m * window, 245 bits, in 64-bit limbs P0 .. P3 (least significant first)
    let w0 = (u64(window[1]) << 32u) | u64(window[0]);
    let w1 = (u64(window[3]) << 32u) | u64(window[2]);
    let w2 = (u64(window[5]) << 32u) | u64(window[4]);
    let t0 = cubert_mul64_wide(m, w0);
    let t1 = cubert_mul64_wide(m, w1);
    let t2 = cubert_mul64_wide(m, w2);
    let big1 = t0.x + t1.y;
    let big2a = t1.x + select(0lu, 1lu, big1 < t1.y);
    let big2 = big2a + t2.y;
    let big3 = t2.x + select(0lu, 1lu, big2 < t2.y);
    // its 32-bit words 1 .. 7
    let p1 = u32(t0.y >> 32u);
    let p2 = u32(big1 & 0xfffffffflu);
    let p3 = u32(big1 >> 32u);
    let p4 = u32(big2 & 0xfffffffflu);
    let p5 = u32(big2 >> 32u);
    let p6 = u32(big3 & 0xfffffffflu);
    let p7 = u32(big3 >> 32u);
    // x (2/pi) = p 2^(e - s - 191): the binary point is at bit s + 191 - e of p, which is
    // 190 + offset with 0 <= offset <= 55 (|x| > pi/4 makes e >= -53). Words r1 .. r5
    // of p >> offset, from fixed words of p (no dynamic index: it would put p in memory).
    let offset = u32(s + 1 - e);
    let up = (offset >> 5u) == 1u;
    let bit = offset & 31u;
    let a1 = select(p1, p2, up);
    let a2 = select(p2, p3, up);
    let a3 = select(p3, p4, up);
    let a4 = select(p4, p5, up);
    let a5 = select(p5, p6, up);
    let a6 = select(p6, p7, up);
    let r1 = cubert_funnel_u32(a2, a1, bit);
    let r2 = cubert_funnel_u32(a3, a2, bit);
    let r3 = cubert_funnel_u32(a4, a3, bit);
    let r4 = cubert_funnel_u32(a5, a4, bit);
    let r5 = cubert_funnel_u32(a6, a5, bit);
    // the quadrant: bits 190 and 191; the fraction: bits 62 .. 189 as hi and lo
    var n = i32(r5 >> 30u);
    var hi = (u64(r5 & 0x3fffffffu) << 34u) | (u64(r4) << 2u) | u64(r3 >> 30u);
    var lo = (u64(r3 & 0x3fffffffu) << 34u) | (u64(r2) << 2u) | u64(r1 >> 30u);
    // fractions of a half or more: one quadrant up, the fraction negative
    let down = (hi >> 63u) != 0lu;
    if (down) {
        n = n + 1;
        lo = ~lo + 1lu;
        hi = ~hi + select(0lu, 1lu, lo == 0lu);
    }
    // |fraction| (2^-128 units) times pi/2 (2^-126 units): y = h 2^-126
    let h = cubert_mul128_hi(vec2<u64>(hi, lo), vec2<u64>(0x6487ed5110b4611alu, 0x62633145c06e0e68lu));
    var lead = 0u;
    var top = h.x;
    var low = h.y;
    if (top == 0lu) {
        top = low;
        low = 0lu;
        lead = 64u;
    }
    var shift = 0u;
    let top_hi = u32(top >> 32u);
    if (top_hi != 0u) {
        shift = countLeadingZeros(top_hi);
    } else {
        shift = 32u + countLeadingZeros(u32(top & 0xfffffffflu));
    }
    lead = lead + shift;
    if (shift != 0u) {
        top = (top << shift) | (low >> (64u - shift));
        low = low << shift;
    }
    // y0: the leading 53 bits; y1: the next 53 (both truncated, so 0 <= y1 < ulp(y0)).
    let y0 = bitcast<f64>(((u64(1024u - lead) << 52u)) | ((top >> 11u) & 0x000ffffffffffffflu));
    let next = ((top & 0x7fflu) << 42u) | (low >> 22u);
    let y1 = f64(next) * bitcast<f64>(u64(919u - lead) << 52u);
    var sign = 1.0lf;
    if (down != negative) {
        sign = -1.0lf;
    }
    if (negative) {
        n = -n;
    }
    return CubertPio2(n, sign * y0, sign * y1);
}";

fn rem_pio2(helpers: &mut Helpers) {
    funnel(helpers);
    helpers.add("cubert_rem_pio2_f64", || REM_PIO2.to_string());
}

const KERNELS: &str = r"
// sin(x + y) for |x + y| <= pi/4, y the tail of x (msun's k_sin.c).
fn cubert_k_sin_f64(x: f64, y: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = 8.33333333332248946124e-03lf + z * (-1.98412698298579493134e-04lf
        + z * 2.75573137070700676789e-06lf) + z * w * (-2.50507602534068634195e-08lf
        + z * 1.58969099521155010221e-10lf);
    let v = z * x;
    return x - ((z * (0.5lf * y - v * r) - y) - v * -1.66666666666666324348e-01lf);
}

// cos(x + y) for |x + y| <= pi/4 (msun's k_cos.c).
fn cubert_k_cos_f64(x: f64, y: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = z * (4.16666666666666019037e-02lf + z * (-1.38888888888741095749e-03lf
        + z * 2.48015872894767294178e-05lf)) + w * w * (-2.75573143513906633035e-07lf
        + z * (2.08757232129817482790e-09lf + z * -1.13596475577881948265e-11lf));
    let hz = 0.5lf * z;
    let one_minus = 1.0lf - hz;
    return one_minus + (((1.0lf - one_minus) - hz) + (z * r - x * y));
}

// tan(x + y) for |x + y| <= pi/4 (msun's k_tan.c); -1 / tan(x + y) if `odd`.
fn cubert_k_tan_f64(x_in: f64, y_in: f64, odd: bool) -> f64 {
    var x = x_in;
    var y = y_in;
    let hx = cubert_f64_hi(x);
    let big = (hx & 0x7fffffffu) >= 0x3fe59428u;
    let negative = (hx >> 31u) != 0u;
    if (big) {
        if (negative) {
            x = -x;
            y = -y;
        }
        x = (7.85398163397448278999e-01lf - x) + (3.06161699786838301793e-17lf - y);
        y = 0.0lf;
    }
    let z = x * x;
    let w = z * z;
    let r = 1.33333333333201242699e-01lf + w * (2.18694882948595424599e-02lf
        + w * (3.59207910759131235356e-03lf + w * (5.88041240820264096874e-04lf
        + w * (7.81794442939557092300e-05lf + w * -1.85586374855275456654e-05lf))));
    let v = z * (5.39682539762260521377e-02lf + w * (8.86323982359930005737e-03lf
        + w * (1.45620945432529025516e-03lf + w * (2.46463134818469906812e-04lf
        + w * (7.14072491382608190305e-05lf + w * 2.59073051863633712884e-05lf)))));
    let s = z * x;
    let rr = y + z * (s * (r + v) + y) + s * 3.33333333333334091986e-01lf;
    let sum = x + rr;
    if (big) {
        let so = select(1.0lf, -1.0lf, odd);
        let result = so - 2.0lf * (x + (rr - sum * sum / (sum + so)));
        return select(result, -result, negative);
    }
    if (!odd) {
        return sum;
    }
    // -1 / (x + rr), with the quotient's head computed in pieces
    let w0 = cubert_f64_zero_lo(sum);
    let v0 = rr - (w0 - x);
    let a = -1.0lf / sum;
    let a0 = cubert_f64_zero_lo(a);
    return a0 + a * (1.0lf + a0 * w0 + a0 * v0);
}";

fn kernels(helpers: &mut Helpers) {
    words(helpers);
    rem_pio2(helpers);
    helpers.add("cubert_k_trig_f64", || KERNELS.to_string());
}

const SIN: &str = r"
// `sin(x)`: NaN for infinities and NaNs.
fn cubert_sin_f64(x: f64) -> f64 {
    let ix = cubert_f64_hi(x) & 0x7fffffffu;
    if (ix >= 0x7ff00000u) {
        return bitcast<f64>(0x7ff8000000000000lu | bitcast<u64>(x));
    }
    if (ix <= 0x3fe921fbu) {
        if (ix < 0x3e500000u) {
            return x;
        }
        return cubert_k_sin_f64(x, 0.0lf);
    }
    // quadrant n gives sin, cos, -sin, -cos of the reduced argument; both kernels run
    // and the result is selected (a switch would run up to four kernels where a
    // workgroup's arguments fall in every quadrant)
    let r = cubert_rem_pio2_f64(x);
    let s = cubert_k_sin_f64(r.y0, r.y1);
    let c = cubert_k_cos_f64(r.y0, r.y1);
    let v = select(s, c, (r.n & 1) == 1);
    return select(v, -v, (r.n & 2) == 2);
}";

const COS: &str = r"
// `cos(x)`: NaN for infinities and NaNs.
fn cubert_cos_f64(x: f64) -> f64 {
    let ix = cubert_f64_hi(x) & 0x7fffffffu;
    if (ix >= 0x7ff00000u) {
        return bitcast<f64>(0x7ff8000000000000lu | bitcast<u64>(x));
    }
    if (ix <= 0x3fe921fbu) {
        if (ix < 0x3e46a09eu) {
            return 1.0lf;
        }
        return cubert_k_cos_f64(x, 0.0lf);
    }
    // quadrant n gives cos, -sin, -cos, sin of the reduced argument (selected, as in `sin`)
    let r = cubert_rem_pio2_f64(x);
    let s = cubert_k_sin_f64(r.y0, r.y1);
    let c = cubert_k_cos_f64(r.y0, r.y1);
    let v = select(c, s, (r.n & 1) == 1);
    return select(v, -v, ((r.n + 1) & 2) == 2);
}";

const TAN: &str = r"
// `tan(x)`: NaN for infinities and NaNs.
fn cubert_tan_f64(x: f64) -> f64 {
    let ix = cubert_f64_hi(x) & 0x7fffffffu;
    if (ix >= 0x7ff00000u) {
        return bitcast<f64>(0x7ff8000000000000lu | bitcast<u64>(x));
    }
    if (ix <= 0x3fe921fbu) {
        if (ix < 0x3e400000u) {
            return x;
        }
        return cubert_k_tan_f64(x, 0.0lf, false);
    }
    let r = cubert_rem_pio2_f64(x);
    return cubert_k_tan_f64(r.y0, r.y1, (r.n & 1) == 1);
}";

const TANH: &str = r"
// `tanh(x)` (msun's s_tanh.c) through expm1: ±1 past 22, `x` below 2^-55.
fn cubert_tanh_f64(x: f64) -> f64 {
    let bits = bitcast<u64>(x);
    let a = bitcast<f64>(bits & 0x7ffffffffffffffflu);
    let w = cubert_f64_hi(a);
    var t: f64;
    if (w > 0x7ff00000u || (w == 0x7ff00000u && cubert_f64_lo(a) != 0u)) {
        return bitcast<f64>(bits | 0x0008000000000000lu);
    }
    if (w > 0x40360000u) {
        // |x| > 22, infinities included
        t = 1.0lf;
    } else if (w > 0x3fe193eau) {
        // |x| > ln(3) / 2
        t = cubert_expm1_f64(2.0lf * a);
        t = 1.0lf - 2.0lf / (t + 2.0lf);
    } else if (w > 0x3fd058aeu) {
        // |x| > ln(5/3) / 2
        t = cubert_expm1_f64(2.0lf * a);
        t = t / (t + 2.0lf);
    } else if (w >= 0x3c800000u) {
        t = cubert_expm1_f64(-2.0lf * a);
        t = -t / (t + 2.0lf);
    } else {
        return x;
    }
    return select(t, -t, (bits >> 63u) != 0lu);
}";

const ERF: &str = r"
// `erf(x)` (msun's s_erf.c): rational approximations on [0, 0.84375) and
// [0.84375, 1.25), erfc through exp on [1.25, 6), ±1 past 6.
fn cubert_erf_f64(x: f64) -> f64 {
    let bits = bitcast<u64>(x);
    let negative = (bits >> 63u) != 0lu;
    let ix = cubert_f64_hi(x) & 0x7fffffffu;
    if (cubert_is_nan_f64(x)) {
        return bitcast<f64>(bits | 0x0008000000000000lu);
    }
    if (ix >= 0x40180000u) {
        // |x| >= 6, infinities included
        return select(1.0lf, -1.0lf, negative);
    }
    if (ix < 0x3feb0000u) {
        if (ix < 0x3e300000u) {
            // |x| < 2^-28
            return 0.125lf * (8.0lf * x + 1.02703333676410069053e+00lf * x);
        }
        let z = x * x;
        let r = 1.28379167095512558561e-01lf + z * (-3.25042107247001499370e-01lf
            + z * (-2.84817495755985104766e-02lf + z * (-5.77027029648944159157e-03lf
            + z * -2.37630166566501626084e-05lf)));
        let s = 1.0lf + z * (3.97917223959155352819e-01lf + z * (6.50222499887672944485e-02lf
            + z * (5.08130628187576562776e-03lf + z * (1.32494738004321644526e-04lf
            + z * -3.96022827877536812320e-06lf))));
        return x + x * (r / s);
    }
    let ax = abs(x);
    var erfc: f64;
    if (ix < 0x3ff40000u) {
        // |x| < 1.25
        let s = ax - 1.0lf;
        let p = -2.36211856075265944077e-03lf + s * (4.14856118683748331666e-01lf
            + s * (-3.72207876035701323847e-01lf + s * (3.18346619901161753674e-01lf
            + s * (-1.10894694282396677476e-01lf + s * (3.54783043256182359371e-02lf
            + s * -2.16637559486879084300e-03lf)))));
        let q = 1.0lf + s * (1.06420880400844228286e-01lf + s * (5.40397917702171048937e-01lf
            + s * (7.18286544141962662868e-02lf + s * (1.26171219808761642112e-01lf
            + s * (1.36370839120290507362e-02lf + s * 1.19844998467991074170e-02lf)))));
        erfc = 1.0lf - 8.45062911510467529297e-01lf - p / q;
    } else {
        let s = 1.0lf / (ax * ax);
        var r: f64;
        var big_s: f64;
        if (ix < 0x4006db6du) {
            // |x| < 1 / 0.35
            r = -9.86494403484714822705e-03lf + s * (-6.93858572707181764372e-01lf
                + s * (-1.05586262253232909814e+01lf + s * (-6.23753324503260060396e+01lf
                + s * (-1.62396669462573470355e+02lf + s * (-1.84605092906711035994e+02lf
                + s * (-8.12874355063065934246e+01lf + s * -9.81432934416914548592e+00lf))))));
            big_s = 1.0lf + s * (1.96512716674392571292e+01lf + s * (1.37657754143519042600e+02lf
                + s * (4.34565877475229228821e+02lf + s * (6.45387271733267880336e+02lf
                + s * (4.29008140027567833386e+02lf + s * (1.08635005541779435134e+02lf
                + s * (6.57024977031928170135e+00lf + s * -6.04244152148580987438e-02lf)))))));
        } else {
            r = -9.86494292470009928597e-03lf + s * (-7.99283237680523006574e-01lf
                + s * (-1.77579549177547519889e+01lf + s * (-1.60636384855821916062e+02lf
                + s * (-6.37566443368389627722e+02lf + s * (-1.02509513161107724954e+03lf
                + s * -4.83519191608651397019e+02lf)))));
            big_s = 1.0lf + s * (3.03380607434824582924e+01lf + s * (3.25792512996573918826e+02lf
                + s * (1.53672958608443695994e+03lf + s * (3.19985821950859553908e+03lf
                + s * (2.55305040643316442583e+03lf + s * (4.74528541206955367215e+02lf
                + s * -2.24409524465858183362e+01lf))))));
        }
        // z: |x| with its low word cleared, so -z * z is exact.
        let z = cubert_f64_zero_lo(ax);
        erfc = cubert_exp_f64(-z * z - 0.5625lf) * cubert_exp_f64((z - ax) * (z + ax) + r / big_s)
            / ax;
    }
    let y = 1.0lf - erfc;
    return select(y, -y, negative);
}";

const POW: &str = r"
// `powf(x, y)` (msun's e_pow.c): log2(|x|) in two pieces of extra precision, times y in
// two pieces, then 2^(y log2 |x|); C's special values.
fn cubert_pow_f64(x: f64, y: f64) -> f64 {
    let hx = bitcast<i32>(cubert_f64_hi(x));
    let lx = cubert_f64_lo(x);
    let hy = bitcast<i32>(cubert_f64_hi(y));
    let ly = cubert_f64_lo(y);
    var ix = hx & 0x7fffffff;
    let iy = hy & 0x7fffffff;
    // x^0 = 1 and 1^y = 1, NaNs included
    if ((u32(iy) | ly) == 0u || (hx == 0x3ff00000 && lx == 0u)) {
        return 1.0lf;
    }
    if (cubert_is_nan_f64(x) || cubert_is_nan_f64(y)) {
        return bitcast<f64>(0x7ff8000000000000lu);
    }
    // y_int: 0 if y is not an integer, 1 if odd, 2 if even (needed for negative x only)
    var y_int = 0;
    if (hx < 0) {
        if (iy >= 0x43400000) {
            y_int = 2;
        } else if (iy >= 0x3ff00000) {
            let k = (iy >> 20u) - 0x3ff;
            if (k > 20) {
                let j = ly >> u32(52 - k);
                if ((j << u32(52 - k)) == ly) {
                    y_int = 2 - i32(j & 1u);
                }
            } else if (ly == 0u) {
                let j = iy >> u32(20 - k);
                if ((j << u32(20 - k)) == iy) {
                    y_int = 2 - (j & 1);
                }
            }
        }
    }
    let inf = bitcast<f64>(0x7ff0000000000000lu);
    if (ly == 0u) {
        if (iy == 0x7ff00000) {
            // y is ±inf
            if (((ix - 0x3ff00000) | i32(lx)) == 0) {
                return 1.0lf;
            }
            if (ix >= 0x3ff00000) {
                return select(0.0lf, inf, hy >= 0);
            }
            return select(inf, 0.0lf, hy >= 0);
        }
        if (iy == 0x3ff00000) {
            if (hy >= 0) {
                return x;
            }
            return cubert_div_f64(1.0lf, x);
        }
        if (hy == 0x40000000) {
            return x * x;
        }
        if (hy == 0x3fe00000 && hx >= 0) {
            // y is 0.5, x is +0 or more
            return cubert_sqrt_f64(x);
        }
    }
    var ax = abs(x);
    if (lx == 0u && (ix == 0x7ff00000 || ix == 0 || ix == 0x3ff00000)) {
        // x is ±0, ±inf or ±1
        var z = ax;
        if (hy < 0) {
            z = cubert_div_f64(1.0lf, z);
        }
        if (hx < 0) {
            if (((ix - 0x3ff00000) | y_int) == 0) {
                return bitcast<f64>(0x7ff8000000000000lu);
            }
            if (y_int == 1) {
                z = -z;
            }
        }
        return z;
    }
    // the result's sign, on the bits (a driver may fold `-1.0 * 0.0` into `+0.0`)
    var sign = 0lu;
    if (hx < 0) {
        if (y_int == 0) {
            return bitcast<f64>(0x7ff8000000000000lu);
        }
        if (y_int == 1) {
            sign = 0x8000000000000000lu;
        }
    }
    var t1: f64;
    var t2: f64;
    if (iy > 0x41e00000) {
        // |y| > 2^31
        if (iy > 0x43f00000) {
            // |y| > 2^64: over- or underflows unless x is 1
            if (ix <= 0x3fefffff) {
                return select(0.0lf, inf, hy < 0);
            }
            return select(0.0lf, inf, hy > 0);
        }
        if (ix < 0x3fefffff) {
            return bitcast<f64>(sign | select(0lu, 0x7ff0000000000000lu, hy < 0));
        }
        if (ix > 0x3ff00000) {
            return bitcast<f64>(sign | select(0lu, 0x7ff0000000000000lu, hy > 0));
        }
        // |1 - x| <= 2^-20: log(x) from its series
        let t = ax - 1.0lf;
        let w = (t * t) * (0.5lf - t * (0.3333333333333333333333lf - t * 0.25lf));
        let u = 1.44269502162933349609e+00lf * t;
        let v = t * 1.92596299112661746887e-08lf - w * 1.44269504088896338700e+00lf;
        t1 = cubert_f64_zero_lo(u + v);
        t2 = v - (t1 - u);
    } else {
        var n = 0;
        if (ix < 0x00100000) {
            // subnormal x
            ax = ax * 9007199254740992.0lf;
            n = n - 53;
            ix = bitcast<i32>(cubert_f64_hi(ax));
        }
        n = n + (ix >> 20u) - 0x3ff;
        let j = ix & 0x000fffff;
        ix = j | 0x3ff00000;
        var k = 0;
        if (j <= 0x3988e) {
            k = 0;
        } else if (j < 0xbb67a) {
            k = 1;
        } else {
            n = n + 1;
            ix = ix - 0x00100000;
        }
        ax = cubert_f64_of_words(u32(ix), cubert_f64_lo(ax));
        let bp = select(1.0lf, 1.5lf, k == 1);
        let dp_h = select(0.0lf, 5.84962487220764160156e-01lf, k == 1);
        let dp_l = select(0.0lf, 1.35003920212974897128e-08lf, k == 1);
        // ss = s_h + s_l = (x - 1) / (x + 1) or (x - 1.5) / (x + 1.5)
        let u = ax - bp;
        let v = 1.0lf / (ax + bp);
        let ss = u * v;
        let s_h = cubert_f64_zero_lo(ss);
        let t_h = cubert_f64_of_words(((u32(ix) >> 1u) | 0x20000000u) + 0x00080000u + (u32(k) << 18u), 0u);
        let t_l = ax - (t_h - bp);
        let s_l = v * ((u - s_h * t_h) - s_h * t_l);
        let s2 = ss * ss;
        var r = s2 * s2 * (5.99999999999994648725e-01lf + s2 * (4.28571428578550184252e-01lf
            + s2 * (3.33333329818377432918e-01lf + s2 * (2.72728123808534006489e-01lf
            + s2 * (2.30660745775561754067e-01lf + s2 * 2.06975017800338417784e-01lf)))));
        r = r + s_l * (s_h + ss);
        let sh2 = s_h * s_h;
        let th = cubert_f64_zero_lo(3.0lf + sh2 + r);
        let tl = r - ((th - 3.0lf) - sh2);
        let uu = s_h * th;
        let vv = s_l * th + tl * ss;
        let p_h = cubert_f64_zero_lo(uu + vv);
        let p_l = vv - (p_h - uu);
        // 2 / (3 ln 2) (ss + ...)
        let z_h = 9.61796700954437255859e-01lf * p_h;
        let z_l = -7.02846165095275826516e-09lf * p_h + p_l * 9.61796693925975554329e-01lf + dp_l;
        let tn = f64(n);
        t1 = cubert_f64_zero_lo(((z_h + z_l) + dp_h) + tn);
        t2 = z_l - (((t1 - tn) - dp_h) - z_h);
    }
    // (y1 + y2) (t1 + t2)
    let y1 = cubert_f64_zero_lo(y);
    let p_l = (y - y1) * t1 + y * t2;
    var p_h = y1 * t1;
    let z = p_l + p_h;
    var j = bitcast<i32>(cubert_f64_hi(z));
    let i = bitcast<i32>(cubert_f64_lo(z));
    // z > 1024 overflows and z < -1075 underflows. Where z rounded to 1024 or -1075
    // exactly, the scaling below decides on the bits (msun compares p_l with z - p_h
    // there, which a driver may fold into p_l).
    if (j >= 0x40900000) {
        if (((j - 0x40900000) | i) != 0) {
            return bitcast<f64>(sign | 0x7ff0000000000000lu);
        }
    } else if ((j & 0x7fffffff) >= 0x4090cc00) {
        if (((bitcast<u32>(j) - 0xc090cc00u) | bitcast<u32>(i)) != 0u) {
            return bitcast<f64>(sign);
        }
    }
    // 2^(p_h + p_l)
    let ij = j & 0x7fffffff;
    var k = (ij >> 20u) - 0x3ff;
    var n = 0;
    if (ij > 0x3fe00000) {
        // |z| > 0.5: n = [z + 0.5]
        n = j + (0x00100000 >> u32(k + 1));
        k = ((n & 0x7fffffff) >> 20u) - 0x3ff;
        let t = cubert_f64_of_words(bitcast<u32>(n & ~(0x000fffff >> u32(k))), 0u);
        n = ((n & 0x000fffff) | 0x00100000) >> u32(20 - k);
        if (j < 0) {
            n = -n;
        }
        p_h = p_h - t;
    }
    let t = cubert_f64_zero_lo(p_l + p_h);
    let u = t * 6.93147182464599609375e-01lf;
    let v = (p_l - (t - p_h)) * 6.93147180559945286227e-01lf + t * -1.90465429995776804525e-09lf;
    var zz = u + v;
    let w = v - (zz - u);
    let tt = zz * zz;
    let c = zz - tt * (1.66666666666666019037e-01lf + tt * (-2.77777777770155933842e-03lf
        + tt * (6.61375632143793436117e-05lf + tt * (-1.65339022054652515390e-06lf
        + tt * 4.13813679705723846039e-08lf))));
    let r = (zz * c) / (c - 2.0lf) - (w + zz * w);
    zz = 1.0lf - (r - zz);
    return bitcast<f64>(sign ^ bitcast<u64>(cubert_f64_scale(zz, n)));
}";

/// The `f64` transcendental functions.
const TRANSCENDENTALS: Transcendentals = Transcendentals {
    format: Format::F64,
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
    common: words,
    log_parts,
    kernels,
};

/// The `f64` helper of math function `name` (`exp`, `ln`, `log2`, `log10`, `sin`, `cos`,
/// `tan`, `tanh`, `erf`); returns its name, or `None` for another name.
pub(super) fn transcendental(helpers: &mut Helpers, name: &str) -> Option<String> {
    TRANSCENDENTALS.helper(helpers, name)
}

/// The `f64` `powf` helper; returns its name.
pub(super) fn pow(helpers: &mut Helpers) -> String {
    is_nan(helpers, Format::F64);
    div(helpers, Format::F64);
    sqrt(helpers, Format::F64);
    words(helpers);
    helpers.add("cubert_pow_f64", || POW.to_string())
}
