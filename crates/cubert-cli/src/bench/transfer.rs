//! Transfers between host and device: `cubert_h2d_pageable_*`, `cubert_h2d_pinned_*`,
//! `cubert_h2d_file_*` and `cubert_d2h_*`, in GB/s (1e9 bytes/s), 1 GiB (64 MiB quick).
//!
//! - pageable: `client.create(Bytes::from_bytes_vec(vec))` then `sync`;
//! - pinned: the same from a buffer of `client.reserve_staging` (page-locked where the
//!   backend has pinned memory, heap memory otherwise; the note says which);
//! - file: `client.create(Bytes::from_file(..))` of a temporary file (memory-mapped, in the
//!   page cache after the warm-up) then `sync`;
//! - d2h: `client.read_one(handle)`.
//!
//! Host buffers are prepared outside the timed region; the time is wall time from the call
//! to the end of the sync (or read). Before each upload the device block is poisoned so
//! stale data can't pass; each upload carries a different stamp every MiB and is checked
//! at every stamp (sampled), the last one byte for byte. Every read is checked byte for
//! byte. Median of 5 runs (3 quick) after a warm-up.

use super::recorder::Recorder;
use super::timing::{gb_per_s, median};
use crate::error::{CliError, CliResult};
use crate::rng::mix;
use crate::units::{GIB, MIB, size_label};
use cubert::{AllocationProperty, Bytes, ComputeClient, Handle, Runtime, ops};
use std::path::PathBuf;
use std::time::Instant;

/// Figures this group measures.
pub const FIGURES: u64 = 4;

/// Bytes read back around each stamp when an upload is checked by sampling.
const SAMPLE: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Pageable,
    Pinned,
    File,
}

/// Measures the four transfers.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let size = if quick { 64 * MIB } else { GIB };
    let reps = if quick { 3 } else { 5 };
    let label = size_label(size);
    let mut source = vec![0u8; size];
    for (i, word) in source.chunks_exact_mut(8).enumerate() {
        word.copy_from_slice(&mix(0x7a5f, i as u64).to_le_bytes());
    }
    upload(
        client,
        recorder,
        &format!("cubert_h2d_pageable_{label}"),
        Source::Pageable,
        reps,
        &mut source,
    )?;
    upload(
        client,
        recorder,
        &format!("cubert_h2d_pinned_{label}"),
        Source::Pinned,
        reps,
        &mut source,
    )?;
    upload(
        client,
        recorder,
        &format!("cubert_h2d_file_{label}"),
        Source::File,
        reps,
        &mut source,
    )?;
    download(
        client,
        recorder,
        &format!("cubert_d2h_{label}"),
        reps,
        &source,
    )?;
    Ok(())
}

/// Writes a stamp unique to `rep` at every MiB of `data`.
fn stamp(data: &mut [u8], rep: usize) {
    for (k, block) in data.chunks_mut(MIB).enumerate() {
        let value = ((rep as u64) << 32 | k as u64) ^ 0x5ca1_ab1e_0000_0000;
        let bytes = value.to_le_bytes();
        let len = bytes.len().min(block.len());
        block[..len].copy_from_slice(&bytes[..len]);
    }
}

/// Fills a throwaway block of `size` bytes with 0xDEADBEEF and frees it, so the next
/// allocation of that size (which reuses it) doesn't start with the expected bytes.
fn poison<R: Runtime>(client: &ComputeClient<R>, size: usize) -> CliResult<()> {
    let block = client.empty(size)?;
    ops::fill(client, &block, size / 4, 0xDEAD_BEEFu32)?;
    drop(block);
    client.sync()?;
    Ok(())
}

/// Describes the first difference between `got` (at `offset` of the buffer) and `want`.
fn first_difference(got: &[u8], want: &[u8], offset: usize) -> Option<String> {
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
fn check<R: Runtime>(
    client: &ComputeClient<R>,
    handle: &Handle,
    want: &[u8],
    every_byte: bool,
) -> CliResult<Option<String>> {
    if every_byte {
        let got = client.read_one(handle.clone())?;
        return Ok(first_difference(&got, want, 0));
    }
    let offsets: Vec<usize> = (0..want.len()).step_by(MIB).collect();
    let mut views = Vec::with_capacity(offsets.len());
    for &offset in &offsets {
        let len = SAMPLE.min(want.len() - offset);
        views.push(handle.view(offset as u64, len as u64)?);
    }
    let got = client.read(views)?;
    for (offset, bytes) in offsets.into_iter().zip(got) {
        let len = SAMPLE.min(want.len() - offset);
        if let Some(problem) = first_difference(&bytes, &want[offset..offset + len], offset) {
            return Ok(Some(problem));
        }
    }
    Ok(None)
}

/// A temporary file, removed on drop.
struct TempFile {
    path: PathBuf,
}

impl TempFile {
    fn create(data: &[u8]) -> CliResult<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("cubert-bench-{}-{nanos}.bin", std::process::id()));
        let file = Self { path };
        std::fs::write(&file.path, data).map_err(|error| {
            CliError::from(error).context(format!("can't write {}", file.path.display()))
        })?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_file(&self.path) {
            log::warn!("can't remove {}: {error}", self.path.display());
        }
    }
}

fn upload<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    name: &str,
    kind: Source,
    reps: usize,
    source: &mut [u8],
) -> CliResult<()> {
    recorder.start(name);
    let size = source.len();
    let file = if kind == Source::File {
        stamp(source, usize::MAX >> 32);
        Some(TempFile::create(source)?)
    } else {
        None
    };
    let mut property = AllocationProperty::Native;
    let mut seconds = Vec::with_capacity(reps);
    for rep in 0..=reps {
        if file.is_none() {
            stamp(source, rep);
        }
        poison(client, size)?;
        let bytes = match (&file, kind) {
            (Some(file), _) => Bytes::from_file(&file.path, 0, size)?,
            (None, Source::Pinned) => {
                let mut staging = client
                    .reserve_staging(&[size])
                    .pop()
                    .ok_or_else(|| CliError::failure("reserve_staging returned no buffer"))?;
                staging.copy_from_slice(source);
                staging
            }
            (None, _) => Bytes::from_bytes_vec(source.to_vec()),
        };
        property = bytes.property();
        client.sync()?;
        let start = Instant::now();
        let handle = client.create(bytes)?;
        client.sync()?;
        let elapsed = start.elapsed().as_secs_f64();
        if let Some(problem) = check(client, &handle, source, rep == reps)? {
            recorder.skip(name, &format!("upload {rep} is wrong: {problem}"));
            return Ok(());
        }
        if rep > 0 {
            seconds.push(elapsed);
        }
    }
    let how = match kind {
        Source::Pageable => "client.create(Bytes::from_bytes_vec) + sync".to_string(),
        Source::Pinned => format!(
            "client.create of a reserve_staging buffer ({}) + sync",
            match property {
                AllocationProperty::Pinned => "pinned",
                _ => "no pinned memory on this backend: heap",
            }
        ),
        Source::File => "client.create(Bytes::from_file) of a cached temp file + sync".to_string(),
    };
    recorder.emit(
        name,
        gb_per_s(size, median(&seconds)),
        "GB/s",
        &format!("{how}, median of {reps} (every upload checked)"),
    );
    Ok(())
}

fn download<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    name: &str,
    reps: usize,
    source: &[u8],
) -> CliResult<()> {
    recorder.start(name);
    let size = source.len();
    let handle = client.create(Bytes::from_bytes_vec(source.to_vec()))?;
    client.sync()?;
    let mut seconds = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = Instant::now();
        let bytes = client.read_one(handle.clone())?;
        let elapsed = start.elapsed().as_secs_f64();
        if let Some(problem) = first_difference(&bytes, source, 0) {
            recorder.skip(name, &format!("read {rep} is wrong: {problem}"));
            return Ok(());
        }
        if rep > 0 {
            seconds.push(elapsed);
        }
    }
    recorder.emit(
        name,
        gb_per_s(size, median(&seconds)),
        "GB/s",
        &format!("client.read_one into new host memory, median of {reps} (every byte checked)"),
    );
    Ok(())
}
