//! Fast maps keyed by the allocator's integers: [`IdHasher`], [`IdMap`] and [`FastMap`].
//!
//! The memory manager, the block pools and the servers look memory ids, sizes and stream
//! values up on every allocation, and the servers' streams and compiled kernels up on every
//! launch; the standard SipHash is needlessly slow for such keys.
//! Its own module so that the manager and the pools share it without using each other.

use crate::handle::MemoryId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for the allocator's integer keys (memory ids, sizes, stream values): the
/// Fx multiply-rotate mix. Not resistant to adversarial keys, which these maps never see.
#[derive(Default)]
pub struct IdHasher(u64);

impl IdHasher {
    fn add(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }
}

/// A map keyed by memory id.
pub type IdMap<V> = HashMap<MemoryId, V, BuildHasherDefault<IdHasher>>;

/// A map hashed by [`IdHasher`], for keys the process makes itself (stream ids, graph ids,
/// kernel ids), never an adversary's: what the servers look up on every launch.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
