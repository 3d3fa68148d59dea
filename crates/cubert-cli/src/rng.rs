//! Deterministic pseudo-random inputs.
//!
//! The demo draws its inputs from a seeded [`fastrand::Rng`] through [`Draw`] (floats in a
//! range, any `i32`, a vector of draws). [`mix`] is a counter-based generator (SplitMix64's
//! finalizer), kept hand-written because no small crate offers one: the value at any index
//! is known without generating the ones before it, so the benchmarks can check a sample of
//! a huge result without keeping its inputs in memory.

use fastrand::Rng;

/// The draws the demo makes from a seeded generator.
pub trait Draw {
    /// A float in `[low, high)`.
    fn range_f32(&mut self, low: f32, high: f32) -> f32;
    /// A float in `[low, high)`.
    fn range_f64(&mut self, low: f64, high: f64) -> f64;
    /// Any `i32`.
    fn any_i32(&mut self) -> i32;
    /// `len` values of `next`.
    fn draws<T>(&mut self, len: usize, next: impl FnMut(&mut Self) -> T) -> Vec<T>;
}

impl Draw for Rng {
    fn range_f32(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * self.f32()
    }

    fn range_f64(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.f64()
    }

    fn any_i32(&mut self) -> i32 {
        self.i32(..)
    }

    fn draws<T>(&mut self, len: usize, mut next: impl FnMut(&mut Self) -> T) -> Vec<T> {
        (0..len).map(|_| next(self)).collect()
    }
}

/// 64 random bits for `index` of stream `seed` (SplitMix64 finalizer).
pub fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0xd1b5_4a32_d192_ed03)
        .wrapping_add(index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A float in `[-1, 1)` with 24 random bits for `index` of stream `seed`: exact in f32,
/// never zero-filled memory by accident (zero has probability 2^-24).
pub fn mix_f32(seed: u64, index: u64) -> f32 {
    ((mix(seed, index) >> 40) as f32 / (1u64 << 23) as f32) - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_deterministic_and_in_range() {
        let a: Vec<i32> = Rng::with_seed(7).draws(4, Draw::any_i32);
        let b: Vec<i32> = Rng::with_seed(7).draws(4, Draw::any_i32);
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        let floats = Rng::with_seed(1).draws(1000, |r| r.range_f32(-2.0, 2.0));
        assert!(floats.iter().all(|v| (-2.0..2.0).contains(v)));
        assert!(floats.iter().any(|v| *v != floats[0]));
    }

    #[test]
    fn counter_values_are_reproducible_and_in_range() {
        assert_eq!(mix(3, 10), mix(3, 10));
        assert_ne!(mix(3, 10), mix(3, 11));
        assert_ne!(mix(3, 10), mix(4, 10));
        for i in 0..1000 {
            let v = mix_f32(9, i);
            assert!((-1.0..1.0).contains(&v));
        }
    }
}
