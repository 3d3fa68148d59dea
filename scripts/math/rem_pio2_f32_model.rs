//! A model of the wgpu backend's `f32` `sin`, `cos` and `tan` from pi/4 to 2^14 pi/2
//! (`cubert_rem_pio2_medium_f32` and msun's kernels in
//! `crates/cubert-wgpu/src/lang/float32.rs`), every operation an `f32` one rounded once,
//! as the strict SPIR-V path makes the driver compute it. It runs every `f32` of the range,
//! both signs, and prints the largest relative error of the reduced argument `y0 + y1`
//! (against `x - n pi/2` in double-double) and the largest error of each function in ulps
//! of `f64`'s result. Keep it in step with the WGSL.
//!
//! ```text
//! rustc --edition 2021 -O scripts/math/rem_pio2_f32_model.rs -o /tmp/rem_pio2 && /tmp/rem_pio2
//! ```
//!
//! 2026-11-30, this repository's VM, about 13 s: reduction 2^-36.4, sin 0.802, cos 0.784,
//! tan 0.954 ulps, none over 1.

fn head(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xfffff000)
}
fn k_sin(x: f32, y: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = 8.333333768e-03f32
        + z * (-1.984127011e-04f32 + z * 2.755731430e-06f32)
        + z * w * (-2.505075969e-08f32 + z * 1.589691018e-10f32);
    let v = z * x;
    x - ((z * (0.5f32 * y - v * r) - y) - v * -1.666666716e-01f32)
}
fn k_cos(x: f32, y: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = z * (4.166666791e-02f32 + z * (-1.388888923e-03f32 + z * 2.480158764e-05f32))
        + w * w * (-2.755731430e-07f32 + z * (2.087572337e-09f32 + z * -1.135964760e-11f32));
    let hz = 0.5f32 * z;
    let one_minus = 1.0f32 - hz;
    one_minus + (((1.0f32 - one_minus) - hz) + (z * r - x * y))
}
fn k_tan(x_in: f32, y_in: f32, odd: bool) -> f32 {
    let (mut x, mut y) = (x_in, y_in);
    let hx = x.to_bits();
    let big = (hx & 0x7fffffff) >= 0x3f2ca140;
    let negative = (hx >> 31) != 0;
    if big {
        if negative {
            x = -x;
            y = -y;
        }
        x = (7.853981256e-01f32 - x) + (3.774894974e-08f32 - y);
        y = 0.0;
    }
    let z = x * x;
    let w = z * z;
    let r = 1.333333403e-01f32
        + w * (2.186948806e-02f32
            + w * (3.592079040e-03f32
                + w * (5.880412646e-04f32 + w * (7.817944424e-05f32 + w * -1.855863775e-05f32))));
    let v = z
        * (5.396825448e-02f32
            + w * (8.863239549e-03f32
                + w * (1.456209458e-03f32
                    + w * (2.464631398e-04f32
                        + w * (7.140725211e-05f32 + w * 2.590730583e-05f32)))));
    let s = z * x;
    let rr = y + z * (s * (r + v) + y) + s * 3.333333433e-01f32;
    let sum = x + rr;
    if big {
        let so = if odd { -1.0f32 } else { 1.0 };
        let result = so - 2.0f32 * (x + (rr - sum * sum / (sum + so)));
        return if negative { -result } else { result };
    }
    if !odd {
        return sum;
    }
    let w0 = head(sum);
    let v0 = rr - (w0 - x);
    let a = -1.0f32 / sum;
    let a0 = head(a);
    a0 + a * (1.0f32 + a0 * w0 + a0 * v0)
}
const C: [f32; 7] = [
    1.5703125,
    0.00048351287841796875,
    3.1385570764541626e-07,
    6.070877134334296e-11,
    6.217248937900877e-14,
    6.114900252818245e-17,
    8.33268661861418e-20,
];
const T: [f32; 7] = [
    0.0004838267923332751,
    3.1391647326017846e-07,
    6.07710062827671e-11,
    6.223371969669989e-14,
    6.123234262925839e-17,
    8.333743212599745e-20,
    1.056299898220315e-23,
];
fn ex(v: f32) -> i32 {
    ((v.to_bits() >> 23) & 0xff) as i32
}
fn rem_medium(x: f32) -> (i32, f32, f32) {
    let ax = x.abs();
    let nf = (ax * 6.3661980629e-01f32).round_ties_even();
    // exact: nf < 2^14, C1 and C2 of 11 bits, results aligned
    let mut r = (ax - nf * C[0]) - nf * C[1];
    let mut lo = 0.0f32;
    let mut w = nf * T[1];
    let mut y0 = r - w;
    let e = ex(ax);
    for k in 0..3 {
        if e - ex(y0) <= TH[k] {
            break;
        }
        let t = r;
        let c = nf * C[2 + k];
        r = t - c;
        lo = lo + ((t - r) - c);
        w = nf * T[2 + k] - lo;
        y0 = r - w;
    }
    let y1 = (r - y0) - w;
    let n = nf as i32;
    if x < 0.0 {
        (-n, -y0, -y1)
    } else {
        (n, y0, y1)
    }
}
const TH: [i32; 3] = [9, 19, 29];
fn sin(x: f32) -> f32 {
    let (n, y0, y1) = rem_medium(x);
    let s = k_sin(y0, y1);
    let c = k_cos(y0, y1);
    let v = if n & 1 == 1 { c } else { s };
    if n & 2 == 2 {
        -v
    } else {
        v
    }
}
fn cos(x: f32) -> f32 {
    let (n, y0, y1) = rem_medium(x);
    let s = k_sin(y0, y1);
    let c = k_cos(y0, y1);
    let v = if n & 1 == 1 { s } else { c };
    if (n + 1) & 2 == 2 {
        -v
    } else {
        v
    }
}
fn tan(x: f32) -> f32 {
    let (n, y0, y1) = rem_medium(x);
    k_tan(y0, y1, n & 1 == 1)
}
fn ulps(got: f32, want: f64) -> f64 {
    // error in ulps of the f32 nearest `want`
    let w = want as f32;
    let u = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
    ((got as f64) - want).abs() / u
}
fn main() {
    let lo = 0x3f490fdcu32; // just past pi/4
    let hi: u32 = std::env::args()
        .nth(1)
        .map(|s| u32::from_str_radix(&s, 16).unwrap())
        .unwrap_or(0x46c90fdb);
    let mut worst = [(0.0f64, 0u32); 3];
    let mut over1 = [0u64; 3];
    let mut redworst = 0.0f64;
    for bits in lo..=hi {
        for sign in [0u32, 0x80000000] {
            let x = f32::from_bits(bits | sign);
            let xd = x as f64;
            // reduction check vs f64 double-double
            let (n, y0, y1) = rem_medium(x);
            let nd = n as f64;
            let rref = (-nd).mul_add(1.5707963267948966, xd) - nd * 6.123233995736766e-17;
            let rel = (((y0 as f64) + (y1 as f64)) - rref).abs() / rref.abs();
            if rel > redworst {
                redworst = rel;
            }
            for (k, (got, want)) in [(sin(x), xd.sin()), (cos(x), xd.cos()), (tan(x), xd.tan())]
                .into_iter()
                .enumerate()
            {
                let e = ulps(got, want);
                if e > worst[k].0 {
                    worst[k] = (e, bits | sign);
                }
                if e > 1.0 {
                    over1[k] += 1;
                }
            }
        }
    }
    println!(
        "reduction worst rel err {redworst:e} (log2 {:.1})",
        redworst.log2()
    );
    for (k, name) in ["sin", "cos", "tan"].iter().enumerate() {
        println!(
            "{name}: worst {:.3} ulp at {:e} ({:#x}), >1ulp: {}",
            worst[k].0,
            f32::from_bits(worst[k].1),
            worst[k].1,
            over1[k]
        );
    }
}
