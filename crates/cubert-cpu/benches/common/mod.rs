//! What the CPU benches share: deterministic inputs, the bit-for-bit check of a device sum
//! against the plain loop's, and how a bench stops on an error.

use std::fmt::Display;

/// Prints what failed in bench `bench` and ends it with exit code 1.
pub fn fail(bench: &str, what: &str, error: impl Display) -> ! {
    eprintln!("{bench} bench: {what}: {error}");
    std::process::exit(1)
}

/// `len` deterministic inputs in [-1, 1): a small multiplicative hash of the index.
pub fn input(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            let h = (i ^ seed).wrapping_mul(0x9E37_79B9).rotate_left(13) ^ seed;
            (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Ends bench `bench` unless `got` (the device's sum) equals `want` (the plain loop's) bit
/// for bit.
pub fn check_sum(bench: &str, got: &[f32], want: &[f32]) {
    let wrong = got
        .iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    if got.len() != want.len() || wrong > 0 {
        fail(
            bench,
            "check",
            format!(
                "the device's sum differs from the plain loop's in {wrong} of {} elements ({} \
                 read)",
                want.len(),
                got.len()
            ),
        );
    }
}
