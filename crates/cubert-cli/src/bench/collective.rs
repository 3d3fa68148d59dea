//! `cubert bench collective`: all-reduce bus bandwidth and peer-copy bandwidth across
//! devices, every result checked (all-gather, reduce-scatter and broadcast: `gather_scatter`).
//!
//! **All-reduce** (in place, f32, sum, over every device): for sizes 1 MiB to 4 GiB doubling
//! (CUDA; `--quick` stops at 256 MiB) or 1 MiB to 64 MiB by ×4 (the CPU's virtual devices;
//! `--quick` stops at 4 MiB), as `allreduce.py` measures torch:
//!
//! - rank `r`'s input is `base * (r + 1) + r` with integer `base` in `[-8, 8]` (exact in
//!   f32), so the sum is `base * n(n+1)/2 + n(n-1)/2`; one all-reduce from fresh inputs is
//!   checked at the start, middle and end of every size against that;
//! - then each trial times K and 2K back-to-back all-reduces (K = 30 up to 16 MiB, 20 up to
//!   256 MiB, 10 above), host wall time from the first call until every device is synced;
//!   the time per operation is the median over trials of `(T(2K) − T(K)) / K`
//!   ([`steady_time_per_op`]), which cancels the once-per-run costs (waking the runner
//!   threads, the first launch, the final syncs) that torch's device-event timing never
//!   sees;
//! - `algbw = bytes / time`, `busbw = algbw × 2(n−1)/n` (GB = 1e9 bytes, as nccl-tests).
//!
//! Figures: `cubert_allreduce_busbw_<size>` (GB/s) and `cubert_allreduce_time_<size>` (µs)
//! at 1 MiB, 64 MiB, 1 GiB and 4 GiB where measured, and the series
//! `cubert_allreduce_busbw_sweep` (every size).
//!
//! **Peer copy**: `to_client` of 1 GiB (CUDA; 256 MiB quick; 64 MiB on the CPU) from device
//! 0 to device 1, steady state like the collectives (K = 5 and 10 back-to-back copies):
//! `cubert_peer_copy_<size>` (GB/s). On CUDA also the pinned host round trip (`[cuda] peer_copy = false`), wall time:
//! `cubert_peer_copy_via_host_<size>`. Each copy is checked at the start, middle and end.

use super::gather_scatter;
use super::recorder::Recorder;
use super::report::{BenchReport, Figures, SeriesMap, iso8601};
use super::timing::{gb_per_s, median};
use super::units::{GIB, KIB, MIB, size_label};
use crate::backend::Backend;
use crate::error::{CliResult, EXIT_FAILURE};
use crate::rng::mix;
use cubert::properties::TimingMethod;
use cubert::server::ReduceOperation;
use cubert::{Bytes, ComputeClient, DeviceId, ElemType, Handle, Runtime, ServerError, ops};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

/// The arguments of `cubert bench collective` (defined with the command line).
pub use crate::args::CollectiveArgs;

/// Elements of the block every input is tiled from.
const BLOCK: usize = 16 * MIB;
/// Bytes checked at each of the start, middle and end of a result.
const WINDOW: usize = 64 * KIB;
const SEED: u64 = 0xa11_5ed;
/// Back-to-back peer copies in the shorter run of a steady-state trial.
const PEER_COPIES: usize = 5;

/// `base` at element `index`: an integer in [-8, 8].
pub(super) fn base(index: usize) -> f32 {
    ((mix(SEED, (index % BLOCK) as u64) % 17) as i64 - 8) as f32
}

/// The devices of one bench run.
struct Devices<R: Runtime> {
    clients: Vec<ComputeClient<R>>,
    /// Devices 0 and 1 with direct copies switched off, where the backend has both paths.
    host_pair: Option<(ComputeClient<R>, ComputeClient<R>)>,
}

/// Runs `cubert bench collective` on `backend`.
///
/// # Errors
/// A usage error for a backend that can't run here or fewer than 2 devices; a device's
/// start error; a report that can't be written. Failed checks are counted in the exit code.
pub fn run(backend: Backend, args: CollectiveArgs) -> CliResult<ExitCode> {
    let failures = match backend {
        Backend::Cpu => {
            let count = args.devices.unwrap_or(2);
            let mut config = cubert::config::global_config().clone();
            config.cpu.devices = config.cpu.devices.max(count);
            let clients = (0..count)
                .map(|index| {
                    let server =
                        cubert::cpu::CpuServer::new(cubert::CpuDevice::new(index), &config)?;
                    Ok(ComputeClient::<cubert::CpuRuntime>::from_server(
                        server,
                        config.runtime.device_handle,
                    )?)
                })
                .collect::<CliResult<Vec<_>>>()?;
            bench(
                Devices {
                    clients,
                    host_pair: None,
                },
                &args,
            )?
        }
        Backend::Cuda => {
            let status = cubert::cuda::driver_status();
            if !status.is_available() {
                return Err(crate::error::usage(format!(
                    "the CUDA backend can't run here: {}",
                    status.describe()
                )));
            }
            let gpus = cubert::cuda::device_count();
            let count = args.devices.unwrap_or(gpus);
            if count < 2 || count > gpus {
                return Err(crate::error::usage(format!(
                    "bench collective needs 2 or more GPUs (asked for {count}, this machine has \
                     {gpus})"
                )));
            }
            let config = cubert::config::global_config().clone();
            let cuda = |index: u32,
                        config: &cubert::config::CubertConfig|
             -> CliResult<ComputeClient<cubert::CudaRuntime>> {
                let server = cubert::cuda::CudaServer::new(cubert::CudaDevice::new(index), config)?;
                Ok(ComputeClient::from_server(
                    server,
                    config.runtime.device_handle,
                )?)
            };
            let clients = (0..count)
                .map(|index| cuda(index, &config))
                .collect::<CliResult<Vec<_>>>()?;
            let mut host_only = config.clone();
            host_only.cuda.peer_copy = false;
            let host_pair = Some((cuda(0, &host_only)?, cuda(1, &host_only)?));
            bench(Devices { clients, host_pair }, &args)?
        }
        Backend::Wgpu => {
            return Err(crate::error::usage(
                "bench collective: the wgpu backend has no collectives (wgpu can't share \
                 memory between devices); use --backend cuda or cpu",
            ));
        }
    };
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    })
}

/// The all-reduce sizes.
fn sizes(gpu: bool, quick: bool) -> Vec<usize> {
    let (largest, step) = match (gpu, quick) {
        (true, false) => (4 * GIB, 2),
        (true, true) => (256 * MIB, 2),
        (false, false) => (64 * MIB, 4),
        (false, true) => (4 * MIB, 4),
    };
    std::iter::successors(Some(MIB), |size| Some(size * step))
        .take_while(|size| *size <= largest)
        .collect()
}

/// Operations per timed trial, and trials, for `size`.
pub(super) fn repetitions(size: usize, quick: bool) -> (usize, usize) {
    match (size <= 16 * MIB, size <= 256 * MIB, quick) {
        (true, _, false) => (30, 20),
        (true, _, true) => (30, 5),
        (false, true, false) => (20, 10),
        (false, true, true) => (20, 3),
        (false, false, false) => (10, 5),
        (false, false, true) => (10, 2),
    }
}

fn bench<R: Runtime>(devices: Devices<R>, args: &CollectiveArgs) -> CliResult<usize> {
    let Devices { clients, host_pair } = devices;
    let date = iso8601(SystemTime::now());
    let gpu = clients[0].properties().timing_method == TimingMethod::Device;
    let quick = args.quick;
    let sizes = sizes(gpu, quick);
    let copy_size = match (gpu, quick) {
        (true, false) => GIB,
        (true, true) => 256 * MIB,
        (false, _) => 64 * MIB,
    };
    let device = clients[0].properties().name.clone();
    outln!(
        "# cubert bench collective{}: backend {}, {} x {device}, {date}",
        if quick { " --quick" } else { "" },
        R::name(),
        clients.len()
    );
    let other_sizes = gather_scatter::sizes(gpu, quick);
    let mut recorder =
        Recorder::new(sizes.len() as u64 + 3 + gather_scatter::figure_count(&other_sizes));
    if let Err(error) = all_reduce(&clients, &sizes, quick, &mut recorder) {
        recorder.fail(&format!("all_reduce stopped: {error:#}"));
    }
    if let Err(error) = gather_scatter::run(&clients, &other_sizes, quick, &mut recorder) {
        recorder.fail(&format!(
            "all_gather, reduce_scatter, broadcast stopped: {error:#}"
        ));
    }
    let copies = [(&clients[0], &clients[1], "cubert_peer_copy", true)]
        .into_iter()
        .chain(
            host_pair
                .iter()
                .map(|(a, b)| (a, b, "cubert_peer_copy_via_host", false)),
        );
    for (from, to, name, wants_direct) in copies {
        let name = format!("{name}_{}", size_label(copy_size));
        if let Err(error) = peer_copy(
            from,
            to,
            copy_size,
            &name,
            wants_direct,
            quick,
            &mut recorder,
        ) {
            recorder.fail(&format!("{name} stopped: {error:#}"));
        }
    }
    recorder.finish();
    let (figures, series, failures) = recorder.into_parts();
    let report = BenchReport {
        tool: "cubert",
        version: env!("CARGO_PKG_VERSION"),
        device,
        backend: R::name().to_string(),
        date,
        quick,
        figures: Figures(figures),
        series: SeriesMap(series),
        failures: failures.len(),
        failed_checks: failures.clone(),
    };
    if let Some(path) = &args.json {
        report.write(path)?;
        outln!("# wrote {}", path.display());
    }
    if failures.is_empty() {
        outln!("# cubert bench collective: all checks passed");
    } else {
        outln!("# cubert bench collective: {} FAILURE(S)", failures.len());
    }
    Ok(failures.len())
}

/// Waits for every device's collectives and work.
///
/// # Errors
/// A device's error.
pub(super) fn sync_every<R: Runtime>(clients: &[ComputeClient<R>]) -> CliResult<()> {
    for client in clients {
        client.sync_collective()?;
        client.sync()?;
    }
    Ok(())
}

/// The steady-state time of one operation: `timed(n)` runs `n` back-to-back operations on
/// every device and returns the host wall time from the first call until every device is
/// synced; this is the median over `trials` of `(timed(2k) − timed(k)) / k`, after one
/// warm-up of each. The difference cancels what a run pays once (waking the runner threads,
/// the first launch, the final syncs), which device-event timing (torch's anchors, nccl-tests)
/// never sees, and keeps what every operation costs, host work included where the device
/// waits for it.
///
/// # Errors
/// `timed`'s error.
pub(super) fn steady_time_per_op(
    k: usize,
    trials: usize,
    mut timed: impl FnMut(usize) -> CliResult<f64>,
) -> CliResult<f64> {
    let mut per_op = Vec::with_capacity(trials);
    for trial in 0..=trials {
        let once = timed(k)?;
        let twice = timed(2 * k)?;
        if trial > 0 {
            per_op.push((twice - once) / k as f64);
        }
    }
    Ok(median(&per_op))
}

/// Rank `rank`'s input of `bytes`, built on the device from one uploaded block.
pub(super) fn input<R: Runtime>(
    client: &ComputeClient<R>,
    rank: usize,
    bytes: usize,
) -> CliResult<Handle> {
    let block_elems = (bytes / 4).min(BLOCK);
    let values: Vec<f32> = (0..block_elems)
        .map(|i| base(i) * (rank as f32 + 1.0) + rank as f32)
        .collect();
    let block = client.create(Bytes::from_slice(&values))?;
    let handle = client.empty(bytes)?;
    let block_bytes = block_elems * 4;
    let mut offset = 0;
    while offset < bytes {
        let len = block_bytes.min(bytes - offset);
        let target = handle.view(offset as u64, len as u64)?;
        ops::copy(client, &block, &target, len / 4, ElemType::F32)?;
        offset += len;
    }
    Ok(handle)
}

/// Byte offsets of the windows checked in a result of `bytes`.
fn windows(bytes: usize) -> Vec<(usize, usize)> {
    let len = WINDOW.min(bytes);
    let last = bytes - len;
    let mut starts = vec![0, ((bytes / 2) & !3).min(last), last];
    starts.sort_unstable();
    starts.dedup();
    starts.into_iter().map(|start| (start, len)).collect()
}

/// Compares the windows of `handle` with `expected(element index)`.
pub(super) fn check<R: Runtime>(
    client: &ComputeClient<R>,
    handle: &Handle,
    bytes: usize,
    expected: impl Fn(usize) -> f32,
) -> CliResult<Option<String>> {
    for (start, len) in windows(bytes) {
        let got = client.read_one(handle.view(start as u64, len as u64)?)?;
        for (k, word) in got.chunks_exact(4).enumerate() {
            let value = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            let index = start / 4 + k;
            let want = expected(index);
            if value != want {
                return Ok(Some(format!(
                    "element {index} is {value}, expected {want} (on {:?})",
                    client.device_id()
                )));
            }
        }
    }
    Ok(None)
}

fn all_reduce<R: Runtime>(
    clients: &[ComputeClient<R>],
    sizes: &[usize],
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let n = clients.len();
    let ids: Vec<DeviceId> = clients.iter().map(ComputeClient::device_id).collect();
    let largest = sizes.iter().copied().max().unwrap_or(MIB);
    let pristine: Vec<Handle> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| input(client, rank, largest))
        .collect::<CliResult<_>>()?;
    let work: Vec<Handle> = clients
        .iter()
        .map(|client| client.empty(largest).map_err(anyhow::Error::from))
        .collect::<CliResult<_>>()?;
    let (s1, s0) = ((n * (n + 1) / 2) as f32, (n * (n - 1) / 2) as f32);
    let factor = 2.0 * (n as f64 - 1.0) / n as f64;
    recorder.series(
        "cubert_allreduce_busbw_sweep",
        "GB/s",
        &format!(
            "in-place f32 sum over {n} devices, busbw = algbw x 2(n-1)/n, steady-state time \
             per op: median of (T(2K) - T(K)) / K, T = host wall time of back-to-back ops \
             until every device is synced"
        ),
    );
    let reset = |size: usize| -> CliResult<()> {
        for ((client, from), to) in clients.iter().zip(&pristine).zip(&work) {
            ops::copy(client, from, to, size / 4, ElemType::F32)?;
        }
        for client in clients {
            client.sync()?;
        }
        Ok(())
    };
    let reduce_all = |size: usize| -> Result<(), ServerError> {
        for (client, buffer) in clients.iter().zip(&work) {
            let view = buffer.view(0, size as u64)?;
            client.all_reduce(
                view.clone(),
                view,
                ElemType::F32,
                ids.clone(),
                ReduceOperation::Sum,
            )?;
        }
        Ok(())
    };
    for &size in sizes {
        let label = size_label(size);
        recorder.start(&format!("all_reduce {label}"));
        // Correctness from fresh inputs.
        reset(size)?;
        reduce_all(size)?;
        let mut wrong = None;
        for (client, buffer) in clients.iter().zip(&work) {
            client.sync_collective()?;
            if let Some(problem) = check(client, buffer, size, |i| base(i) * s1 + s0)? {
                wrong = Some(problem);
                break;
            }
        }
        if let Some(problem) = wrong {
            recorder.skip(
                &format!("cubert_allreduce_busbw_{label}"),
                &format!("the sum is wrong: {problem}"),
            );
            continue;
        }
        // Timing: steady-state time per operation from K and 2K back-to-back operations.
        let (k, trials) = repetitions(size, quick);
        let time = steady_time_per_op(k, trials, |count| {
            reset(size)?;
            let start = Instant::now();
            (0..count).try_for_each(|_| reduce_all(size))?;
            sync_every(clients)?;
            Ok(start.elapsed().as_secs_f64())
        })?;
        let busbw = gb_per_s(size, time) * factor;
        recorder.point("cubert_allreduce_busbw_sweep", size, busbw);
        if [MIB, 64 * MIB, GIB, 4 * GIB].contains(&size) {
            let note = format!("{n} devices, f32 in place, K = {k}, {trials} trials");
            recorder.emit(
                &format!("cubert_allreduce_busbw_{label}"),
                busbw,
                "GB/s",
                &note,
            );
            recorder.emit(
                &format!("cubert_allreduce_time_{label}"),
                time * 1e6,
                "us",
                &note,
            );
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn peer_copy<R: Runtime>(
    from: &ComputeClient<R>,
    to: &ComputeClient<R>,
    size: usize,
    name: &str,
    wants_direct: bool,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    recorder.start(name);
    let direct = from.peer_copy_supported(to);
    if wants_direct && !direct {
        recorder.not_measured(&[name], "the devices can't copy directly");
        return Ok(());
    }
    let source = input(from, 0, size)?;
    from.sync()?;
    let copy = from.to_client(source.clone(), to, ElemType::F32)?;
    if let Some(problem) = check(to, &copy, size, base)? {
        recorder.skip(name, &format!("the copy is wrong: {problem}"));
        return Ok(());
    }
    drop(copy);
    let trials = if quick { 3 } else { 10 };
    if direct && wants_direct {
        // Steady state, as the collectives: K and 2K back-to-back copies (each into a new
        // handle, dropped at once: the memory is reused in stream order).
        let time = steady_time_per_op(PEER_COPIES, trials, |count| {
            to.sync()?;
            let start = Instant::now();
            for _ in 0..count {
                drop(from.to_client(source.clone(), to, ElemType::F32)?);
            }
            to.sync()?;
            Ok(start.elapsed().as_secs_f64())
        })?;
        recorder.emit(
            name,
            gb_per_s(size, time),
            "GB/s",
            &format!(
                "direct copy, device 0 to 1, steady state: median of (T(2K) - T(K)) / K, \
                 K = {PEER_COPIES}, {trials} trials"
            ),
        );
        return Ok(());
    }
    let mut seconds = Vec::with_capacity(trials);
    for _ in 0..trials {
        to.sync()?;
        let start = Instant::now();
        let copy = from.to_client(source.clone(), to, ElemType::F32)?;
        to.sync()?;
        drop(copy);
        seconds.push(start.elapsed().as_secs_f64());
    }
    to.sync()?;
    let how = "through pinned host memory, device 0 to 1, wall time incl. sync";
    recorder.emit(
        name,
        gb_per_s(size, median(&seconds)),
        "GB/s",
        &format!("{how}, median of {trials}"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_sizes_double_from_one_mebibyte_to_four_gibibytes() {
        let gpu = sizes(true, false);
        assert_eq!(
            (gpu[0], *gpu.last().unwrap(), gpu.len()),
            (MIB, 4 * GIB, 13)
        );
        assert_eq!(sizes(false, false), vec![MIB, 4 * MIB, 16 * MIB, 64 * MIB]);
    }

    #[test]
    fn checked_windows_stay_inside_the_result() {
        for bytes in [4usize, 4 * KIB, MIB, 3 * MIB + 4] {
            for (start, len) in windows(bytes) {
                assert!(start + len <= bytes && start % 4 == 0);
            }
        }
    }

    #[test]
    fn inputs_are_small_integers() {
        assert!((0..10_000).all(|i| base(i).fract() == 0.0 && base(i).abs() <= 8.0));
    }
}
