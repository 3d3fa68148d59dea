//! Deterministic pseudo-random inputs, with no dependency.
//!
//! [`XorShift`] is a sequential generator (xorshift64*) for the demo's inputs.
//! [`mix`] is a counter-based generator (SplitMix64's finalizer): the value at any index is
//! known without generating the ones before it, so the benchmarks can check a sample of a
//! huge result without keeping its inputs in memory.

/// A xorshift64* generator. Never yields the same value twice in a row, never gets stuck at 0.
#[derive(Clone, Debug)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator seeded with `seed` (0 is replaced by a fixed non-zero seed).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9e37_79b9_7f4a_7c15
            } else {
                seed
            },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A float in `[0, 1)` with 24 random bits.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A float in `[0, 1)` with 53 random bits.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A float in `[low, high)`.
    pub fn range_f32(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * self.unit_f32()
    }

    /// A float in `[low, high)`.
    pub fn range_f64(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit_f64()
    }

    /// Any `i32`.
    pub fn any_i32(&mut self) -> i32 {
        (self.next_u64() >> 32) as u32 as i32
    }

    /// `len` values of `next`.
    pub fn fill<T>(&mut self, len: usize, mut next: impl FnMut(&mut Self) -> T) -> Vec<T> {
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
    fn sequences_are_deterministic_and_not_constant() {
        let a: Vec<u64> = XorShift::new(7).fill(4, XorShift::next_u64);
        let b: Vec<u64> = XorShift::new(7).fill(4, XorShift::next_u64);
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        let floats = XorShift::new(1).fill(1000, |r| r.range_f32(-2.0, 2.0));
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
