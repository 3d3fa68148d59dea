//! Device-to-device copy bandwidth: `cubert_d2d_copy_4GiB`, GB/s counting every byte read
//! and written (2 × size), like the anchors' `cudaMemcpyAsync` D2D figure.
//!
//! The size is 4 GiB where the device's memory holds 3 × that within three quarters of it
//! (source, destination and room to spare), else the largest power-of-two fraction that
//! does (at least 256 MiB); quick mode uses 256 MiB. The name carries the size.
//!
//! The copy is `ops::copy` over f32 elements (4-byte words: the bits are copied as they
//! are). The source is built on the device from a 64 MiB pseudo-random block copied into
//! every 64 MiB of it, each copy then stamped with its index in its first 16 bytes, so a
//! copy that shifts or repeats blocks is caught. The destination is poisoned (all bits
//! set), one copy runs and the start and end of every block are checked; after a warm-up
//! of at least [`WARM_UP`](super::timing::WARM_UP), two timings of 5 runs each (3 quick)
//! are reported as medians:
//!
//! - `cubert_d2d_copy_<size>`: device time of one copy by `client.profile` (CUDA events on
//!   CUDA, the host clock around the finished copy on the CPU);
//! - `cubert_d2d_copy_<size>_wall`: wall time of the copy + `sync`.
//!
//! The destination is poisoned again before the last timed copy, whose result is checked.

use super::recorder::Recorder;
use super::timing::{gb_per_s, median, profile_clock, profiled_seconds, warm_up};
use super::units::{GIB, KIB, MIB, size_label};
use crate::error::CliResult;
use crate::rng::mix;
use cubert::{ComputeClient, ElemType, Handle, Runtime, ops};
use std::time::Instant;

/// Figures this part of the bandwidth group measures.
pub const FIGURES: u64 = 2;

/// The block the source is built of.
const BLOCK: usize = 64 * MIB;
/// Bytes stamped at the start of every block.
const STAMP_BYTES: usize = 16;
/// Stamp of block `k`: this, xor `k`.
const STAMP: u32 = 0xC0DE_0000;
/// Bytes checked at the start and at the end of every block.
const WINDOW: usize = 4 * KIB;
const SEED: u64 = 0xc0b1;
/// Smallest size of a full run.
const MIN_SIZE: usize = 256 * MIB;

/// The copy size for a device of `total_memory` bytes: 4 GiB if three times that fits in
/// three quarters of the memory, else halved until it does (at least 256 MiB).
pub fn copy_size(total_memory: u64, quick: bool) -> usize {
    if quick {
        return MIN_SIZE;
    }
    let room = total_memory / 4 * 3;
    let mut size = 4 * GIB;
    while size > MIN_SIZE && 3 * size as u64 > room {
        size /= 2;
    }
    size
}

/// The pseudo-random content of a block (before its stamp).
fn block_pattern(len: usize) -> Vec<u8> {
    let mut pattern = vec![0u8; len];
    for (i, word) in pattern.chunks_exact_mut(8).enumerate() {
        word.copy_from_slice(&mix(SEED, i as u64).to_le_bytes());
    }
    pattern
}

/// The byte expected at `offset` of the source (and of a correct copy).
fn expected(pattern: &[u8], block: usize, offset: usize) -> u8 {
    let (k, within) = (offset / block, offset % block);
    if within < STAMP_BYTES {
        (STAMP ^ k as u32).to_le_bytes()[within % 4]
    } else {
        pattern[within]
    }
}

/// Checks the first and last `WINDOW` bytes of every block of `dst`.
fn check<R: Runtime>(
    client: &ComputeClient<R>,
    dst: &Handle,
    pattern: &[u8],
    block: usize,
    size: usize,
) -> CliResult<Option<String>> {
    let window = WINDOW.min(block);
    let mut offsets = Vec::new();
    for start in (0..size).step_by(block) {
        offsets.push(start);
        offsets.push(start + block - window);
    }
    let mut views = Vec::with_capacity(offsets.len());
    for &offset in &offsets {
        views.push(dst.view(offset as u64, window as u64)?);
    }
    let got = client.read(views)?;
    for (offset, bytes) in offsets.into_iter().zip(got) {
        if bytes.len() != window {
            return Ok(Some(format!(
                "read {} bytes at offset {offset}, expected {window}",
                bytes.len()
            )));
        }
        for (i, value) in bytes.iter().enumerate() {
            let want = expected(pattern, block, offset + i);
            if *value != want {
                return Ok(Some(format!(
                    "byte {} of the copy is {value:#04x}, expected {want:#04x}",
                    offset + i
                )));
            }
        }
    }
    Ok(None)
}

/// Measures the copy.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let memory = &client.properties().memory;
    let size = super::units::fit(
        copy_size(memory.total_memory, quick),
        memory.max_allocation_size,
        BLOCK,
    );
    let reps = if quick { 3 } else { 5 };
    let name = format!("cubert_d2d_copy_{}", size_label(size));
    let wall_name = format!("{name}_wall");
    recorder.start(&name);
    let block = BLOCK.min(size);
    let pattern = block_pattern(block);
    let src = {
        let source_block = client.create_from_slice(&pattern)?;
        let src = client.empty(size)?;
        for (k, start) in (0..size).step_by(block).enumerate() {
            let view = src.view(start as u64, block as u64)?;
            ops::copy(client, &source_block, &view, block / 4, ElemType::F32)?;
            let head = src.view(start as u64, STAMP_BYTES as u64)?;
            ops::fill(client, &head, STAMP_BYTES / 4, STAMP ^ k as u32)?;
        }
        src
    };
    let dst = client.empty(size)?;
    let poison = |client: &ComputeClient<R>| -> CliResult<()> {
        ops::fill(client, &dst, size / 4, u32::MAX)?;
        client.sync()?;
        Ok(())
    };
    let copy = || ops::copy(client, &src, &dst, size / 4, ElemType::F32);
    poison(client)?;
    copy()?;
    client.sync()?;
    if let Some(problem) = check(client, &dst, &pattern, block, size)? {
        recorder.skip(&name, &problem);
        recorder.skip(&wall_name, "the first copy is wrong (see above)");
        return Ok(());
    }
    warm_up(client, copy)?;
    let mut device = Vec::with_capacity(reps);
    for _ in 0..reps {
        device.push(profiled_seconds(client, "d2d copy", copy)?);
    }
    recorder.start(&wall_name);
    let mut wall = Vec::with_capacity(reps);
    for rep in 0..reps {
        if rep + 1 == reps {
            poison(client)?;
        }
        client.sync()?;
        let start = Instant::now();
        copy()?;
        client.sync()?;
        wall.push(start.elapsed().as_secs_f64());
    }
    if let Some(problem) = check(client, &dst, &pattern, block, size)? {
        recorder.skip(&name, &format!("the last timed copy is wrong: {problem}"));
        recorder.skip(
            &wall_name,
            &format!("the last timed copy is wrong: {problem}"),
        );
        return Ok(());
    }
    let bytes = 2 * size;
    recorder.emit(
        &name,
        gb_per_s(bytes, median(&device)),
        "GB/s",
        &format!(
            "ops::copy f32, bytes = 2*size (read + written), device time by client.profile \
             ({}), median of {reps} (block starts and ends checked)",
            profile_clock(client)
        ),
    );
    recorder.emit(
        &wall_name,
        gb_per_s(bytes, median(&wall)),
        "GB/s",
        &format!("ops::copy f32 + sync, bytes = 2*size, wall time, median of {reps}"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_adapts_to_the_memory() {
        assert_eq!(copy_size(141 * GIB as u64, false), 4 * GIB);
        assert_eq!(copy_size(23 * GIB as u64, false), 4 * GIB);
        assert_eq!(copy_size(8 * GIB as u64, false), 2 * GIB);
        assert_eq!(copy_size(4 * GIB as u64, false), GIB);
        assert_eq!(copy_size(GIB as u64, false), MIN_SIZE);
        assert_eq!(copy_size(141 * GIB as u64, true), MIN_SIZE);
    }

    #[test]
    fn blocks_are_stamped_with_their_index() {
        let pattern = block_pattern(64);
        assert_eq!(expected(&pattern, 64, 0), (STAMP & 0xff) as u8);
        assert_eq!(expected(&pattern, 64, 64), ((STAMP ^ 1) & 0xff) as u8);
        assert_eq!(expected(&pattern, 64, 64 + 20), pattern[20]);
    }
}
