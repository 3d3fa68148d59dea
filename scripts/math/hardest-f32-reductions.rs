//! The `f32` arguments nearest a multiple of π/2: for every positive finite `f32` past π/4,
//! how many zero bits follow the binary point in the distance of x·2/π to the nearest
//! integer; prints the twelve with the most. Their output is the test suite's
//! `HARDEST_F32_REDUCTIONS` (`crates/cubert-test-suite/src/language/math.rs`).
//!
//!   rustc -O -o /tmp/hardest scripts/math/hardest-f32-reductions.rs && /tmp/hardest
//!
//! About a minute on one core. x = m·2^e with a 24-bit m; the bits of 2/π before bit
//! e - 1 only add multiples of 4 to x·2/π, so a 100-bit window from there, times m, holds
//! the quadrant and 70-odd bits of the fraction, on `u128`.

/// 2/π's first 384 bits after the binary point, 32 to a word.
const TWO_OVER_PI: [u32; 12] = [
    0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041, 0xfe5163ab, 0xdebbc561,
    0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c,
];

/// Bit `i` (1 = the first after the binary point) of 2/π.
fn bit(i: usize) -> u128 {
    let word = TWO_OVER_PI[(i - 1) / 32];
    u128::from((word >> (31 - (i - 1) % 32)) & 1)
}

fn main() {
    let mut best: Vec<(u32, u32)> = Vec::new();
    // from the first f32 above π/4 to the largest finite one
    for bits in 0x3f49_0fdcu32..0x7f80_0000 {
        let e = ((bits >> 23) & 0xff) as i32 - 150;
        let m = u128::from((bits & 0x7f_ffff) | 0x80_0000);
        let start = 1.max(e - 1) as usize;
        let window = (0..100).fold(0u128, |w, j| (w << 1) | bit(start + j));
        // x·2/π = m·window·2^(e - start - 99): the binary point is at bit `point`
        let product = m * window;
        let point = (start as i32 + 99 - e) as u32;
        let fraction = product & ((1u128 << point) - 1);
        let half = 1u128 << (point - 1);
        let distance = if fraction >= half {
            (1u128 << point) - fraction
        } else {
            fraction
        };
        let zeros = point - (128 - distance.leading_zeros());
        if best.len() < 12 || zeros > best[best.len() - 1].1 {
            best.push((bits, zeros));
            best.sort_by(|a, b| b.1.cmp(&a.1));
            best.truncate(12);
        }
    }
    for (bits, zeros) in best {
        println!("{bits:#010x} {:e}: {zeros} zero bits", f32::from_bits(bits));
    }
}
