//! Transfers between host and device at 1 GiB (64 MiB quick), in GB/s (1e9 bytes/s), named
//! like the anchors, then the size sweep (see `sweep`):
//!
//! - `cubert_h2d_pinned_*`: `client.create` of a buffer of `client.reserve_staging`
//!   (page-locked where the backend has pinned memory, heap memory otherwise; the note says
//!   which) then `sync`;
//! - `cubert_h2d_pageable_*`: `client.create(Bytes::from_bytes_vec(vec))` then `sync`;
//! - `cubert_h2d_pageable_slice_*`: `client.create_from_slice(&slice)` then `sync` (the
//!   upload reads the borrowed slice in place, through `Bytes::scoped`; the call returns
//!   once the upload no longer needs the slice);
//! - `cubert_h2d_file_*`: `client.create(Bytes::from_file(..))` of a temporary file
//!   (memory-mapped, in the page cache after the warm-up) then `sync`;
//! - `cubert_d2h_pinned_*`: `client.read_one(handle)`, which returns pooled pinned memory on
//!   CUDA (heap memory on the CPU);
//! - `cubert_d2h_pageable_*`: `client.read_into(handle, &mut vec)`, into a plain `Vec` the
//!   caller keeps from one read to the next (touched once before timing);
//! - `cubert_h2d_pinned_*_device` and `cubert_d2h_pinned_*_device`: the same pinned upload
//!   and read timed by `client.profile` (device events around the copy on CUDA) instead of
//!   the wall clock, so that the wall figure's distance from plain CUDA's splits into the
//!   copy's and the issuing and waiting around it.
//!
//! Host buffers are prepared outside the timed region; the time is wall time from the call
//! to the end of the sync (or read). Before each upload the device block is poisoned so
//! stale data can't pass; each upload carries a different stamp every MiB and is checked
//! at every stamp (sampled), the last one byte for byte. Every read is checked byte for
//! byte, and its buffer is poisoned before it goes back to the pool. Median of 5 runs (3
//! quick) after a warm-up.

use super::bytes_check::{check_device, first_difference, poison_device, poison_host, stamp};
use super::recorder::Recorder;
use super::sweep;
use super::timing::{gb_per_s, median, profile_clock, profiled_seconds};
use super::units::{GIB, MIB, size_label};
use crate::error::CliResult;
use crate::rng::mix;
use cubert::{AllocationProperty, Bytes, ComputeClient, Runtime};
use std::path::PathBuf;
use std::time::Instant;

/// Figures this group measures (for the progress bar): the headline figures and the
/// sweep's points.
pub fn figures(quick: bool) -> u64 {
    8 + sweep::points(quick)
}

/// What times a transfer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// The wall clock, from the call to the end of the sync (or the read).
    Wall,
    /// Device events around the copy (`client.profile`).
    Device,
}

impl Clock {
    /// The figure name's suffix.
    fn suffix(self) -> &'static str {
        match self {
            Clock::Wall => "",
            Clock::Device => "_device",
        }
    }

    /// How the figure was timed, for its note.
    fn note<R: Runtime>(self, client: &ComputeClient<R>) -> String {
        match self {
            Clock::Wall => "wall time".to_string(),
            Clock::Device => format!("timed by client.profile ({})", profile_clock(client)),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Pinned,
    Pageable,
    Slice,
    File,
}

/// Measures the headline transfers, then the sweep.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let size = super::units::fit(
        if quick { 64 * MIB } else { GIB },
        client.properties().memory.max_allocation_size,
        MIB,
    );
    let reps = if quick { 3 } else { 5 };
    let label = size_label(size);
    let mut source = vec![0u8; size];
    for (i, word) in source.chunks_exact_mut(8).enumerate() {
        word.copy_from_slice(&mix(0x7a5f, i as u64).to_le_bytes());
    }
    let mut headline = sweep::Largest::default();
    for (kind, clock, name) in [
        (Source::Pinned, Clock::Wall, "h2d_pinned"),
        (Source::Pinned, Clock::Device, "h2d_pinned"),
        (Source::Pageable, Clock::Wall, "h2d_pageable"),
        (Source::Slice, Clock::Wall, "h2d_pageable_slice"),
        (Source::File, Clock::Wall, "h2d_file"),
    ] {
        let name = format!("cubert_{name}_{label}{}", clock.suffix());
        let measured = upload(client, recorder, &name, kind, clock, reps, &mut source)?;
        match (kind, clock) {
            (Source::Pinned, Clock::Wall) => headline.h2d_pinned = measured,
            (Source::Pageable, _) => headline.h2d_pageable = measured,
            _ => {}
        }
    }
    for clock in [Clock::Wall, Clock::Device] {
        let name = format!("cubert_d2h_pinned_{label}{}", clock.suffix());
        let measured = download(client, recorder, &name, clock, reps, &source)?;
        if clock == Clock::Wall {
            headline.d2h = measured;
        }
    }
    download_into(
        client,
        recorder,
        &format!("cubert_d2h_pageable_{label}"),
        reps,
        &source,
    )?;
    sweep::run(client, quick, recorder, &mut source, headline)
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
            anyhow::Error::from(error).context(format!("can't write {}", file.path.display()))
        })?;
        Ok(file)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_file(&self.path) {
            tracing::warn!("can't remove {}: {error}", self.path.display());
        }
    }
}

fn upload<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    name: &str,
    kind: Source,
    clock: Clock,
    reps: usize,
    source: &mut [u8],
) -> CliResult<Option<f64>> {
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
        poison_device(client, size)?;
        // `None`: the slice itself is uploaded (`create_from_slice`).
        let bytes = match (&file, kind) {
            (Some(file), _) => Some(Bytes::from_file(&file.path, 0, size)?),
            (None, Source::Pinned) => {
                let mut staging = client
                    .reserve_staging(&[size])?
                    .pop()
                    .ok_or_else(|| crate::error::failure("reserve_staging returned no buffer"))?;
                staging.copy_from_slice(source);
                Some(staging)
            }
            (None, Source::Slice) => None,
            (None, _) => Some(Bytes::from_bytes_vec(source.to_vec())),
        };
        if let Some(bytes) = &bytes {
            property = bytes.property();
        }
        client.sync()?;
        let create = || match bytes {
            Some(bytes) => client.create(bytes),
            None => client.create_from_slice(source),
        };
        let (handle, elapsed) = match clock {
            Clock::Wall => {
                let start = Instant::now();
                let handle = create()?;
                client.sync()?;
                (handle, start.elapsed().as_secs_f64())
            }
            Clock::Device => {
                let mut handle = None;
                let elapsed = profiled_seconds(client, name, || {
                    handle = Some(create()?);
                    Ok::<_, cubert::IoError>(())
                })?;
                let handle =
                    handle.ok_or_else(|| crate::error::failure("the upload made no handle"))?;
                (handle, elapsed)
            }
        };
        if let Some(problem) = check_device(client, &handle, source, rep == reps)? {
            recorder.skip(name, &format!("upload {rep} is wrong: {problem}"));
            return Ok(None);
        }
        if rep > 0 {
            seconds.push(elapsed);
        }
    }
    let how = match kind {
        Source::Pageable => "client.create(Bytes::from_bytes_vec) + sync".to_string(),
        Source::Slice => "client.create_from_slice (reads the slice in place) + sync".to_string(),
        Source::Pinned => format!(
            "client.create of a reserve_staging buffer ({}) + sync",
            match property {
                AllocationProperty::Pinned => "pinned",
                _ => "no pinned memory on this backend: heap",
            }
        ),
        Source::File => "client.create(Bytes::from_file) of a cached temp file + sync".to_string(),
    };
    let value = gb_per_s(size, median(&seconds));
    recorder.emit(
        name,
        value,
        "GB/s",
        &format!(
            "{how}, {}, median of {reps} (every upload checked)",
            clock.note(client)
        ),
    );
    Ok(Some(value))
}

fn download<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    name: &str,
    clock: Clock,
    reps: usize,
    source: &[u8],
) -> CliResult<Option<f64>> {
    recorder.start(name);
    let size = source.len();
    let handle = client.create_from_slice(source)?;
    client.sync()?;
    let mut property = AllocationProperty::Native;
    let mut seconds = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let (mut bytes, elapsed) = match clock {
            Clock::Wall => {
                let start = Instant::now();
                let bytes = client.read_one(handle.clone())?;
                (bytes, start.elapsed().as_secs_f64())
            }
            Clock::Device => {
                // Queued inside the profile, waited for after it: the profile ends right
                // behind the copy on the stream.
                let mut pending = None;
                let elapsed = profiled_seconds(client, name, || {
                    pending = Some(client.read_lazy(vec![handle.clone()]));
                    Ok::<_, cubert::IoError>(())
                })?;
                let bytes = pending
                    .ok_or_else(|| crate::error::failure("the read was not queued"))?
                    .wait()?
                    .pop()
                    .ok_or_else(|| crate::error::failure("the read returned no buffer"))?;
                (bytes, elapsed)
            }
        };
        property = bytes.property();
        let problem = first_difference(&bytes, source, 0);
        poison_host(&mut bytes);
        if let Some(problem) = problem {
            recorder.skip(name, &format!("read {rep} is wrong: {problem}"));
            return Ok(None);
        }
        if rep > 0 {
            seconds.push(elapsed);
        }
    }
    let into = match property {
        AllocationProperty::Pinned => "pooled pinned memory",
        AllocationProperty::Native => "heap memory (no pinned memory on this backend)",
        _ => "host memory",
    };
    let value = gb_per_s(size, median(&seconds));
    recorder.emit(
        name,
        value,
        "GB/s",
        &format!(
            "{}, which returns {into}, {}, median of {reps} (every byte checked)",
            match clock {
                Clock::Wall => "client.read_one",
                Clock::Device => "client.read_lazy queued inside the profile",
            },
            clock.note(client)
        ),
    );
    Ok(Some(value))
}

/// `client.read_into` a `Vec` the caller keeps (touched before timing, poisoned between
/// reads).
fn download_into<R: Runtime>(
    client: &ComputeClient<R>,
    recorder: &mut Recorder,
    name: &str,
    reps: usize,
    source: &[u8],
) -> CliResult<()> {
    recorder.start(name);
    let size = source.len();
    let handle = client.create_from_slice(source)?;
    client.sync()?;
    let mut out = vec![0x5Au8; size];
    let mut seconds = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = Instant::now();
        client.read_into(handle.clone(), &mut out)?;
        let elapsed = start.elapsed().as_secs_f64();
        if let Some(at) = out.iter().zip(source).position(|(a, b)| a != b) {
            recorder.skip(name, &format!("read {rep} is wrong at byte {at}"));
            return Ok(());
        }
        out.fill(0x5A);
        if rep > 0 {
            seconds.push(elapsed);
        }
    }
    recorder.emit(
        name,
        gb_per_s(size, median(&seconds)),
        "GB/s",
        &format!(
            "client.read_into a Vec kept from one read to the next, median of {reps} (every \
             byte checked)"
        ),
    );
    Ok(())
}
