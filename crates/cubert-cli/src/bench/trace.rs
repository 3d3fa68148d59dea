//! Replaying allocation traces, like the anchors' fragmentation probe. For each trace:
//! `cubert_trace[_MODEL]_peak_reserved` and `_peak_live` (GiB), `_reserved_over_live`
//! (ratio), `_replay_s` and `_replay_warm_s` (seconds), `_device_allocs` and
//! `_device_frees` (how many times the allocator called the device's allocation and free).
//!
//! The traces: the anchors' trace file (no `MODEL` in the names; skipped when not found)
//! and the generated training loops of `cubert::memory::training_trace` (`MODEL` is
//! `transformer`, `mlp`, `convnet`). `--write-traces DIR` also writes the generated ones
//! as `DIR/MODEL.txt` (and the anchors' as `DIR/alloc_trace.txt`), for peers to replay the
//! same events (`scripts/anchors/torch_trace.py`).
//!
//! Each trace (`alloc ID SIZE` / `free ID` lines, parsed by `AllocationTrace::parse`) is
//! replayed through fresh clients of their own servers (so the memory reports' peaks belong
//! to the trace): `client.empty(size)` per alloc, the handle kept by id, dropped per free,
//! then `sync`.
//!
//! The replays run inside `client.exclusive`, so every event reaches the allocator in trace
//! order, as in the peers' allocators. Peak reserved is the server's `peak_bytes_reserved`
//! after the first replay; peak live is the trace's largest sum of live requested sizes.
//! The replay time is wall time over all events including the final sync: from an empty
//! cache (`replay_s`, the anchors' "cold" replay) and once more with the cache populated
//! (`replay_warm_s`).
//!
//! A third replay runs on another fresh client in the configured (threaded) mode, without
//! `exclusive`; its time and peaks are printed as a comment. There the caller runs ahead of
//! the device's runner thread, and a dropped handle is freed as soon as its allocation ran,
//! possibly before allocations the caller issued earlier: a trace of bare allocations whose
//! memory is never used then needs far less memory than the trace says, depending on
//! timing, which makes it no measure of the allocator.
//!
//! On the CPU backend the server's memory limit is raised to twice the live peak plus 1 GiB:
//! `empty` never touches memory and large blocks are lazily committed memory maps, so a
//! 20 GiB trace replays on a machine with less physical memory.
//!
//! Checks: no error at the sync (no allocation failed); replayed in order, the server's
//! peak bytes in use (requested bytes of live allocations) equals the trace's live peak;
//! every allocation is freed at the end of each replay.

use super::recorder::Recorder;
use super::units::GIB;
use crate::backend::CliRuntime;
use crate::error::CliResult;
use cubert::memory::trace::{AllocationTrace, TraceEvent};
use cubert::memory::training_trace::TrainingModel;
use cubert::{ComputeClient, Handle};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Figures this group measures: 7 per trace, for the anchors' trace and the generated
/// ones.
pub const FIGURES: u64 = 7 * (1 + TrainingModel::ALL.len() as u64);

/// The figure names of the trace labelled `label` (empty for the anchors' trace).
fn names(label: &str) -> [String; 7] {
    let prefix = if label.is_empty() {
        "cubert_trace".to_string()
    } else {
        format!("cubert_trace_{label}")
    };
    [
        "peak_reserved",
        "peak_live",
        "reserved_over_live",
        "replay_s",
        "replay_warm_s",
        "device_allocs",
        "device_frees",
    ]
    .map(|figure| format!("{prefix}_{figure}"))
}

/// The trace file to replay when `--trace` isn't given: `alloc_trace.txt` of the anchors,
/// looked for as `../shared/anchors/` or `.anchors/` (the copy the device tool carries) from
/// the current directory and its parents, then from the source tree the binary was built
/// from.
pub fn default_trace() -> Option<std::path::PathBuf> {
    let candidates = |dir: &Path| {
        [
            dir.join("../shared/anchors/alloc_trace.txt"),
            dir.join(".anchors/alloc_trace.txt"),
        ]
    };
    let current = std::env::current_dir().ok();
    let from_current = current
        .iter()
        .flat_map(|dir| dir.ancestors())
        .flat_map(candidates);
    let build_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    from_current
        .chain(candidates(&build_tree))
        .find(|path| path.is_file())
}

/// Replays the anchors' trace at `path` (`None`: none was found; its figures are then not
/// measured, which is no failure) and the generated training traces, writing those to
/// `write_to` first if given.
///
/// # Errors
/// A runtime error that stops the group (an allocation failure shows at the sync), or a
/// trace file that can't be written.
pub fn run<R: CliRuntime>(
    path: Option<&Path>,
    write_to: Option<&Path>,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let generated: Vec<(&str, AllocationTrace)> = TrainingModel::ALL
        .iter()
        .map(|model| (model.name(), model.trace()))
        .collect();
    if let Some(dir) = write_to {
        std::fs::create_dir_all(dir).map_err(|error| {
            crate::error::failure(format!("can't create {}: {error}", dir.display()))
        })?;
        for (name, trace) in &generated {
            let file = dir.join(format!("{name}.txt"));
            std::fs::write(&file, trace.to_text()).map_err(|error| {
                crate::error::failure(format!("can't write {}: {error}", file.display()))
            })?;
        }
        recorder.info(&format!(
            "wrote the generated traces to {}/{{{}}}.txt",
            dir.display(),
            TrainingModel::ALL.map(TrainingModel::name).join(",")
        ));
    }
    let anchor = names("");
    let anchor: Vec<&str> = anchor.iter().map(String::as_str).collect();
    recorder.start(anchor[3]);
    match path {
        None => recorder.not_measured(
            &anchor,
            "no trace file: pass --trace FILE (no ../shared/anchors/alloc_trace.txt or \
             .anchors/alloc_trace.txt was found)",
        ),
        Some(path) => match AllocationTrace::read(path) {
            Ok(trace) => {
                if let Some(dir) = write_to {
                    let copy = dir.join("alloc_trace.txt");
                    std::fs::write(&copy, trace.to_text()).map_err(|error| {
                        crate::error::failure(format!("can't write {}: {error}", copy.display()))
                    })?;
                }
                let file = path
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                replay_trace::<R>("", &file, &trace, recorder)?;
            }
            Err(error) if error.line == 0 => return Err(crate::error::failure(error.to_string())),
            Err(error) => {
                for name in anchor {
                    recorder.skip(name, &format!("{}: {error}", path.display()));
                }
            }
        },
    }
    for (name, trace) in &generated {
        recorder.start(&names(name)[3]);
        replay_trace::<R>(
            name,
            &format!("the generated {name} training loop"),
            trace,
            recorder,
        )?;
    }
    Ok(())
}

/// Replays one trace (labelled `label` in the figure names, `what` in the notes) and
/// records its figures.
fn replay_trace<R: CliRuntime>(
    label: &str,
    what: &str,
    trace: &AllocationTrace,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let names = names(label);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let allocs = trace
        .events
        .iter()
        .filter(|event| matches!(event, TraceEvent::Alloc { .. }))
        .count();
    recorder.info(&format!(
        "trace {what}: {} events, {allocs} allocations, peak live {} bytes",
        trace.events.len(),
        trace.peak_live_bytes
    ));
    let room = trace
        .peak_live_bytes
        .saturating_mul(2)
        .saturating_add(GIB as u64);

    // In trace order, as the peers' allocators see the events.
    let ordered = R::isolated_client(room)?;
    let memory = ordered.properties().memory.total_memory;
    let largest = ordered.properties().memory.max_allocation_size;
    let biggest = trace
        .events
        .iter()
        .filter_map(|event| match event {
            TraceEvent::Alloc { size, .. } => Some(*size),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    if biggest > largest {
        let biggest = usize::try_from(biggest).unwrap_or(usize::MAX);
        recorder.not_measured(&names, &super::units::too_big(biggest, largest));
        return Ok(());
    }
    if trace.peak_live_bytes > memory {
        recorder.not_measured(
            &names,
            &format!(
                "the trace's live peak of {} bytes exceeds the device's {memory} bytes",
                trace.peak_live_bytes
            ),
        );
        return Ok(());
    }
    let cold = ordered.exclusive(|| replay(&ordered, trace))??;
    let report = ordered.memory_report()?;
    let warm = ordered.exclusive(|| replay(&ordered, trace))??;
    let warm_report = ordered.memory_report()?;
    let leftover = ordered.memory_usage()?;
    drop(ordered);

    // As a threaded client issues them: the caller runs ahead of the runner thread.
    let threaded = R::isolated_client(room)?;
    let threaded_seconds = replay(&threaded, trace)?;
    let threaded_report = threaded.memory_report()?;
    let usage = threaded.memory_usage()?;
    drop(threaded);

    let peak_live = trace.peak_live_bytes;
    let problem = if report.peak_bytes_in_use != peak_live {
        Some(format!(
            "replayed in order, the server's peak bytes in use is {}, the trace's live peak \
             {peak_live}",
            report.peak_bytes_in_use
        ))
    } else if let Some(live) = [leftover, usage]
        .into_iter()
        .find(|usage| usage.number_allocs != 0 || usage.bytes_in_use != 0)
    {
        Some(format!(
            "{} allocation(s) of {} bytes still live after a replay",
            live.number_allocs, live.bytes_in_use
        ))
    } else if peak_live == 0 {
        Some("the trace allocates nothing".to_string())
    } else {
        None
    };
    if let Some(problem) = problem {
        for name in names {
            recorder.skip(name, &problem);
        }
        return Ok(());
    }
    let gib = |bytes: u64| bytes as f64 / GIB as f64;
    let warm_driver = warm_report.storage_time.saturating_sub(report.storage_time);
    recorder.info(&format!(
        "device memory calls: {:.1} ms of the cold replay ({} allocations, {} frees, {} \
         remaps), {:.1} ms of the warm one ({} allocations, {} frees, {} remaps)",
        report.storage_time.as_secs_f64() * 1e3,
        report.storage_allocations,
        report.storage_deallocations,
        report.storage_remaps,
        warm_driver.as_secs_f64() * 1e3,
        warm_report.storage_allocations - report.storage_allocations,
        warm_report.storage_deallocations - report.storage_deallocations,
        warm_report.storage_remaps - report.storage_remaps,
    ));
    recorder.info(&format!(
        "threaded replay (frees reach the allocator as soon as dropped, possibly before \
         allocations issued earlier): {threaded_seconds:.4} s, peak in use {:.3} GiB, peak \
         reserved {:.3} GiB",
        gib(threaded_report.peak_bytes_in_use),
        gib(threaded_report.peak_bytes_reserved)
    ));
    recorder.emit(
        names[0],
        gib(report.peak_bytes_reserved),
        "GiB",
        &format!("peak_bytes_reserved of a fresh server after replaying {what} in trace order"),
    );
    recorder.emit(
        names[1],
        gib(peak_live),
        "GiB",
        "largest sum of live requested sizes over the trace (the parser's; the server's \
         peak in use matched it)",
    );
    recorder.emit(
        names[2],
        report.peak_bytes_reserved as f64 / peak_live as f64,
        "ratio",
        "peak reserved / peak live requested, replayed in trace order",
    );
    recorder.emit(
        names[3],
        cold,
        "s",
        &format!(
            "{} events (client.empty / drop) in trace order + sync, wall, from an empty cache",
            trace.events.len()
        ),
    );
    recorder.emit(
        names[4],
        warm,
        "s",
        "the same replay again, the cache populated",
    );
    recorder.emit(
        names[5],
        report.storage_allocations as f64,
        "allocations",
        "device allocations (cuMemAlloc on CUDA) during the cold replay",
    );
    recorder.emit(
        names[6],
        report.storage_deallocations as f64,
        "allocations",
        "device frees during the cold replay (segments given back)",
    );
    Ok(())
}

/// Replays `trace` on `client`; returns the wall seconds including the final sync.
fn replay<R: CliRuntime>(client: &ComputeClient<R>, trace: &AllocationTrace) -> CliResult<f64> {
    let mut live: HashMap<u64, Handle> = HashMap::new();
    let start = Instant::now();
    for event in &trace.events {
        match *event {
            TraceEvent::Alloc { id, size } => {
                let size = usize::try_from(size).map_err(|_| {
                    crate::error::failure(format!("allocation {id} of {size} bytes is too large"))
                })?;
                live.insert(id, client.empty(size)?);
            }
            TraceEvent::Free { id } => {
                live.remove(&id);
            }
        }
    }
    client.sync()?;
    let seconds = start.elapsed().as_secs_f64();
    drop(live);
    Ok(seconds)
}
