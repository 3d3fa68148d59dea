//! The transfer size sweep: GB/s against size, 4 KiB to 1 GiB (64 MiB quick) by powers of
//! 4, as three series of the report (not figures):
//!
//! - `cubert_h2d_pinned_sweep`: `client.create` of a `reserve_staging` buffer + `sync`;
//! - `cubert_h2d_pageable_sweep`: `client.create(Bytes::from_bytes_vec(vec))` + `sync`;
//! - `cubert_d2h_sweep`: `client.read_one` (pooled pinned memory on CUDA).
//!
//! Each point is the median of 3 to 100 repetitions (20 quick; the smaller the size, the
//! more), after one warm-up, wall time from the call to the end of the sync (or the read).
//! Every upload carries a stamp unique to it and is checked: every byte up to 1 MiB, a
//! sample at every MiB above. Every read is checked byte for byte, and its buffer poisoned
//! before it is dropped. A failed check fails that point, and the sweep goes on with the
//! next. The largest point is the headline figure of that size (`cubert_h2d_pinned_1GiB`...:
//! the same operation, measured just before), so it isn't measured twice.

use super::bytes_check::{check_device, first_difference, poison_host, stamp};
use super::recorder::Recorder;
use super::timing::{gb_per_s, median};
use super::units::{GIB, KIB, MIB, size_label};
use crate::error::CliResult;
use cubert::{Bytes, ComputeClient, Runtime};
use std::time::Instant;

/// Name of the host-to-device series from pinned memory.
pub const H2D_PINNED: &str = "cubert_h2d_pinned_sweep";
/// Name of the host-to-device series from pageable memory.
pub const H2D_PAGEABLE: &str = "cubert_h2d_pageable_sweep";
/// Name of the device-to-host series.
pub const D2H: &str = "cubert_d2h_sweep";

/// Upload sizes up to which every byte is checked.
const CHECK_ALL_UP_TO: usize = MIB;

/// The largest size of the sweep.
pub fn max_size(quick: bool) -> usize {
    if quick { 64 * MIB } else { GIB }
}

/// The sizes of the sweep: 4 KiB, 16 KiB, ... up to [`max_size`].
pub fn sizes(quick: bool) -> Vec<usize> {
    std::iter::successors(Some(4 * KIB), |size| Some(size * 4))
        .take_while(|size| *size <= max_size(quick))
        .collect()
}

/// Points the sweep measures (for the progress bar).
pub fn points(quick: bool) -> u64 {
    3 * sizes(quick).len() as u64
}

/// Timed repetitions at `size`: about 512 MiB (64 MiB quick) moved per point, 3 to 100
/// (20 quick) repetitions.
fn reps(size: usize, quick: bool) -> usize {
    let (budget, most) = if quick {
        (64 * MIB, 20)
    } else {
        (512 * MIB, 100)
    };
    (budget / size).clamp(3, most)
}

/// The headline figures at the largest size (GB/s), `None` where their check failed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Largest {
    /// `cubert_h2d_pinned_<size>`.
    pub h2d_pinned: Option<f64>,
    /// `cubert_h2d_pageable_<size>`.
    pub h2d_pageable: Option<f64>,
    /// `cubert_d2h_pinned_<size>`.
    pub d2h: Option<f64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Upload {
    Pinned,
    Pageable,
}

/// Measures the sweep below `source.len()` (the headline size, [`max_size`]), whose points
/// are `largest`. `source` holds the data; its stamps are rewritten.
///
/// # Errors
/// A runtime error that stops the group.
pub fn run<R: Runtime>(
    client: &ComputeClient<R>,
    quick: bool,
    recorder: &mut Recorder,
    source: &mut [u8],
    largest: Largest,
) -> CliResult<()> {
    let all = sizes(quick);
    let sizes: Vec<usize> = all
        .iter()
        .copied()
        .filter(|size| *size < source.len())
        .collect();
    let how = format!(
        "median of 3 to {} repetitions by size, wall time incl. sync; at {} the headline \
         figure",
        if quick { 20 } else { 100 },
        size_label(source.len())
    );
    recorder.series(
        H2D_PINNED,
        "GB/s",
        &format!("client.create of a reserve_staging buffer + sync, {how} (every upload checked)"),
    );
    recorder.series(
        H2D_PAGEABLE,
        "GB/s",
        &format!("client.create(Bytes::from_bytes_vec) + sync, {how} (every upload checked)"),
    );
    recorder.series(
        D2H,
        "GB/s",
        &format!("client.read_one, {how} (every byte of every read checked)"),
    );
    // Every upload gets a stamp no other upload had.
    let mut stamp_id = 1usize << 20;
    for (name, kind) in [
        (H2D_PINNED, Upload::Pinned),
        (H2D_PAGEABLE, Upload::Pageable),
    ] {
        for &size in &sizes {
            recorder.start(&format!("{name}@{}", size_label(size)));
            let mut seconds = Vec::new();
            let mut problem = None;
            for rep in 0..=reps(size, quick) {
                stamp_id += 1;
                let data = &mut source[..size];
                stamp(data, stamp_id);
                let bytes = match kind {
                    Upload::Pinned => {
                        let mut staging =
                            client.reserve_staging(&[size])?.pop().ok_or_else(|| {
                                crate::error::failure("reserve_staging returned no buffer")
                            })?;
                        staging.copy_from_slice(data);
                        staging
                    }
                    Upload::Pageable => Bytes::from_bytes_vec(data.to_vec()),
                };
                client.sync()?;
                let start = Instant::now();
                let handle = client.create(bytes)?;
                client.sync()?;
                let elapsed = start.elapsed().as_secs_f64();
                if let Some(wrong) = check_device(client, &handle, data, size <= CHECK_ALL_UP_TO)? {
                    problem = Some(format!("upload {rep} is wrong: {wrong}"));
                    break;
                }
                if rep > 0 {
                    seconds.push(elapsed);
                }
            }
            finish_point(recorder, name, size, problem, &seconds);
        }
        let headline = match kind {
            Upload::Pinned => largest.h2d_pinned,
            Upload::Pageable => largest.h2d_pageable,
        };
        add_largest(recorder, name, source.len(), &all, headline);
    }
    for &size in &sizes {
        recorder.start(&format!("{D2H}@{}", size_label(size)));
        let want = &source[..size];
        let handle = client.create_from_slice(want)?;
        client.sync()?;
        let mut seconds = Vec::new();
        let mut problem = None;
        for rep in 0..=reps(size, quick) {
            let start = Instant::now();
            let mut bytes = client.read_one(handle.clone())?;
            let elapsed = start.elapsed().as_secs_f64();
            let wrong = first_difference(&bytes, want, 0);
            poison_host(&mut bytes);
            if let Some(wrong) = wrong {
                problem = Some(format!("read {rep} is wrong: {wrong}"));
                break;
            }
            if rep > 0 {
                seconds.push(elapsed);
            }
        }
        finish_point(recorder, D2H, size, problem, &seconds);
    }
    add_largest(recorder, D2H, source.len(), &all, largest.d2h);
    Ok(())
}

/// Adds the headline figure as the point at `size` (if `size` is a size of the sweep; a
/// failed headline figure was reported already).
fn add_largest(
    recorder: &mut Recorder,
    name: &str,
    size: usize,
    sizes: &[usize],
    headline: Option<f64>,
) {
    if !sizes.contains(&size) {
        return;
    }
    match headline {
        Some(value) => recorder.point(name, size, value),
        None => recorder.step(),
    }
}

/// Records the point of `name` at `size`, or the failure of its check.
fn finish_point(
    recorder: &mut Recorder,
    name: &str,
    size: usize,
    problem: Option<String>,
    seconds: &[f64],
) {
    match problem {
        Some(problem) => {
            recorder.fail(&format!("{name}@{}: {problem}", size_label(size)));
            recorder.step();
        }
        None => recorder.point(name, size, gb_per_s(size, median(seconds))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_go_by_powers_of_four() {
        let full = sizes(false);
        assert_eq!(full.first(), Some(&(4 * KIB)));
        assert_eq!(full.last(), Some(&GIB));
        assert_eq!(full.len(), 10);
        assert!(full.windows(2).all(|pair| pair[1] == 4 * pair[0]));
        assert_eq!(sizes(true).last(), Some(&(64 * MIB)));
        assert_eq!(points(true), 3 * 8);
    }

    #[test]
    fn small_sizes_repeat_more() {
        assert_eq!(reps(4 * KIB, false), 100);
        assert_eq!(reps(GIB, false), 3);
        assert_eq!(reps(4 * KIB, true), 20);
        assert_eq!(reps(64 * MIB, true), 3);
    }
}
