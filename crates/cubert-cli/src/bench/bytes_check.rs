//! Checking the bytes of transfers: stamps, poison and comparisons.
//!
//! Each upload carries a stamp unique to its repetition at every MiB (at least once), so a
//! transfer that didn't happen can't pass by leaving the previous repetition's bytes in a
//! reused block. Device blocks can be poisoned before an upload, and host buffers that a pool
//! hands out again (pinned read buffers) are poisoned before they are given back. A check
//! compares every byte, or `SAMPLE` bytes at every MiB (the stamps included).

use super::units::MIB;
use crate::error::CliResult;
use cubert::{ComputeClient, Handle, Runtime, ops};

/// Bytes read back around each MiB when an upload is checked by sampling.
pub const SAMPLE: usize = 256;

/// Byte written over host buffers before they are dropped (see [`poison_host`]).
const HOST_POISON: u8 = 0xA5;

/// Writes a stamp unique to `rep` (the low 32 bits of it) at the start of every MiB of
/// `data`: 8 bytes, the repetition first, then the MiB's index.
pub fn stamp(data: &mut [u8], rep: usize) {
    for (k, block) in data.chunks_mut(MIB).enumerate() {
        let value = ((k as u64) << 32 | (rep as u64 & 0xffff_ffff)) ^ 0x5ca1_ab1e_0000_0000;
        let bytes = value.to_le_bytes();
        let len = bytes.len().min(block.len());
        block[..len].copy_from_slice(&bytes[..len]);
    }
}

/// Fills a throwaway block of `size` bytes with 0xDEADBEEF and frees it, so the next
/// allocation of that size (which reuses it) doesn't start with the expected bytes.
///
/// # Errors
/// A runtime error.
pub fn poison_device<R: Runtime>(client: &ComputeClient<R>, size: usize) -> CliResult<()> {
    let block = client.empty(size)?;
    ops::fill(client, &block, size / 4, 0xDEAD_BEEFu32)?;
    drop(block);
    client.sync()?;
    Ok(())
}

/// Overwrites a host buffer before it is dropped, so a pool that hands it out again (the
/// pinned buffers reads return) can't hand out the expected bytes.
pub fn poison_host(bytes: &mut [u8]) {
    bytes.fill(HOST_POISON);
}

/// Describes the first difference between `got` (at `offset` of the buffer) and `want`.
pub fn first_difference(got: &[u8], want: &[u8], offset: usize) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!(
            "read {} bytes at offset {offset}, expected {}",
            got.len(),
            want.len()
        ));
    }
    if got == want {
        return None;
    }
    let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
    let first = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
    Some(format!(
        "{bad} wrong byte(s) in {} bytes at offset {offset}, first at byte {} (got {:#04x}, want {:#04x})",
        want.len(),
        offset + first,
        got.get(first).copied().unwrap_or(0),
        want.get(first).copied().unwrap_or(0)
    ))
}

/// Checks `handle` against `want`: every byte, or `SAMPLE` bytes at every MiB.
///
/// # Errors
/// A runtime error of the read.
pub fn check_device<R: Runtime>(
    client: &ComputeClient<R>,
    handle: &Handle,
    want: &[u8],
    every_byte: bool,
) -> CliResult<Option<String>> {
    if every_byte || want.len() <= SAMPLE {
        let mut got = client.read_one(handle.clone())?;
        let problem = first_difference(&got, want, 0);
        poison_host(&mut got);
        return Ok(problem);
    }
    let offsets: Vec<usize> = (0..want.len()).step_by(MIB).collect();
    let mut views = Vec::with_capacity(offsets.len());
    for &offset in &offsets {
        let len = SAMPLE.min(want.len() - offset);
        views.push(handle.view(offset as u64, len as u64)?);
    }
    let got = client.read(views)?;
    for (offset, mut bytes) in offsets.into_iter().zip(got) {
        let len = SAMPLE.min(want.len() - offset);
        let problem = first_difference(&bytes, &want[offset..offset + len], offset);
        poison_host(&mut bytes);
        if problem.is_some() {
            return Ok(problem);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_differ_per_repetition_and_cover_every_mib() {
        let mut a = vec![0u8; 2 * MIB + 10];
        let mut b = a.clone();
        stamp(&mut a, 1);
        stamp(&mut b, 2);
        for offset in [0, MIB, 2 * MIB] {
            assert_ne!(a[offset..offset + 8], b[offset..offset + 8]);
        }
        let mut small = vec![0u8; 4];
        stamp(&mut small, 3);
        assert_ne!(small, vec![0u8; 4]);
    }

    #[test]
    fn differences_are_located() {
        assert_eq!(first_difference(b"abc", b"abc", 0), None);
        let problem = first_difference(b"abd", b"abc", 10).unwrap();
        assert!(
            problem.contains("1 wrong byte(s)") && problem.contains("byte 12"),
            "{problem}"
        );
        assert!(first_difference(b"ab", b"abc", 0).is_some());
    }
}
