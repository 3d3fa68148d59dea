//! `cubert bench collective`, continued: all-gather, reduce-scatter and broadcast bus
//! bandwidth over every device, every result checked.
//!
//! The size is that of the largest buffer, as nccl-tests counts it: the gathered output,
//! the scattered input, the broadcast buffer. CUDA measures 64 MiB and 1 GiB (`--quick`:
//! 64 MiB), the CPU's virtual devices 1 MiB and 16 MiB (`--quick`: 1 MiB).
//!
//! - Inputs are those of the all-reduce (`base(i) × (r + 1) + r` on rank `r`); one
//!   operation from fresh inputs is checked at the start, middle and end of every device's
//!   result: the all-gather's part `r` is rank `r`'s input, the reduce-scatter's part of
//!   rank `r` is the sum over ranks of elements `r × part ..`, the broadcast (from device
//!   0) leaves `base(i)` everywhere.
//! - Timing as the all-reduce's: the steady-state time per operation, the median over
//!   trials of `(T(2K) − T(K)) / K` with `T` the host wall time of back-to-back operations
//!   until every device is synced.
//! - `algbw = size / time`; `busbw = algbw × (n − 1)/n` for the all-gather and the
//!   reduce-scatter, `busbw = algbw` for the broadcast (nccl-tests' definitions).
//!
//! Figures: `cubert_<allgather|reducescatter|broadcast>_busbw_<size>` (GB/s) and
//! `..._time_<size>` (µs).

use super::collective::{base, check, input, repetitions, steady_time_per_op, sync_every};
use super::recorder::Recorder;
use super::timing::gb_per_s;
use super::units::{GIB, MIB, size_label};
use crate::error::CliResult;
use cubert::server::ReduceOperation;
use cubert::{ComputeClient, DeviceId, ElemType, Handle, Runtime, ServerError};
use std::time::Instant;

/// The collectives measured here.
#[derive(Clone, Copy, Debug)]
enum Collective {
    AllGather,
    ReduceScatter,
    Broadcast,
}

impl Collective {
    const ALL: [Self; 3] = [Self::AllGather, Self::ReduceScatter, Self::Broadcast];

    /// The name in figure names.
    fn figure(self) -> &'static str {
        match self {
            Self::AllGather => "allgather",
            Self::ReduceScatter => "reducescatter",
            Self::Broadcast => "broadcast",
        }
    }

    /// busbw / algbw over `n` devices.
    fn bus_factor(self, n: usize) -> f64 {
        match self {
            Self::AllGather | Self::ReduceScatter => (n as f64 - 1.0) / n as f64,
            Self::Broadcast => 1.0,
        }
    }
}

/// The sizes measured (the largest buffer's bytes).
pub fn sizes(gpu: bool, quick: bool) -> Vec<usize> {
    match (gpu, quick) {
        (true, false) => vec![64 * MIB, GIB],
        (true, true) => vec![64 * MIB],
        (false, false) => vec![MIB, 16 * MIB],
        (false, true) => vec![MIB],
    }
}

/// Number of figures [`run`] emits for `sizes`.
pub fn figure_count(sizes: &[usize]) -> u64 {
    (Collective::ALL.len() * sizes.len() * 2) as u64
}

/// One device's buffers for `collective` of `size`: what it sends and what it receives
/// (one buffer for the broadcast).
struct Buffers {
    send: Handle,
    receive: Handle,
}

/// Measures every collective at every size; a failed check is recorded and the rest goes on.
///
/// # Errors
/// A device error that stops the measurements.
pub fn run<R: Runtime>(
    clients: &[ComputeClient<R>],
    sizes: &[usize],
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    for collective in Collective::ALL {
        for &size in sizes {
            measure(clients, collective, size, quick, recorder)?;
        }
    }
    Ok(())
}

fn measure<R: Runtime>(
    clients: &[ComputeClient<R>],
    collective: Collective,
    size: usize,
    quick: bool,
    recorder: &mut Recorder,
) -> CliResult<()> {
    let n = clients.len();
    let part = size / n / 4 * 4;
    let size = part * n;
    let ids: Vec<DeviceId> = clients.iter().map(ComputeClient::device_id).collect();
    let label = size_label(size);
    let name = format!("cubert_{}_busbw_{label}", collective.figure());
    recorder.start(&format!("{} {label}", collective.figure()));
    let buffers: Vec<Buffers> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| -> CliResult<Buffers> {
            Ok(match collective {
                Collective::AllGather => Buffers {
                    send: input(client, rank, part)?,
                    receive: client.empty(size)?,
                },
                Collective::ReduceScatter => Buffers {
                    send: input(client, rank, size)?,
                    receive: client.empty(part)?,
                },
                Collective::Broadcast => {
                    let buffer = input(client, rank, size)?;
                    Buffers {
                        send: buffer.clone(),
                        receive: buffer,
                    }
                }
            })
        })
        .collect::<CliResult<_>>()?;
    let call_all = || -> Result<(), ServerError> {
        for (client, buffers) in clients.iter().zip(&buffers) {
            let (send, receive) = (buffers.send.clone(), buffers.receive.clone());
            match collective {
                Collective::AllGather => {
                    client.all_gather(send, receive, ElemType::F32, ids.clone())?;
                }
                Collective::ReduceScatter => client.reduce_scatter(
                    send,
                    receive,
                    ElemType::F32,
                    ids.clone(),
                    ReduceOperation::Sum,
                )?,
                Collective::Broadcast => {
                    client.broadcast(receive, ElemType::F32, ids[0], ids.clone())?;
                }
            }
        }
        Ok(())
    };
    call_all()?;
    let part_elems = part / 4;
    let (s1, s0) = ((n * (n + 1) / 2) as f32, (n * (n - 1) / 2) as f32);
    for (rank, (client, buffers)) in clients.iter().zip(&buffers).enumerate() {
        client.sync_collective()?;
        let problem = match collective {
            Collective::AllGather => check(client, &buffers.receive, size, |i| {
                let from = (i / part_elems) as f32;
                base(i % part_elems) * (from + 1.0) + from
            })?,
            Collective::ReduceScatter => check(client, &buffers.receive, part, |i| {
                base(rank * part_elems + i) * s1 + s0
            })?,
            Collective::Broadcast => check(client, &buffers.receive, size, base)?,
        };
        if let Some(problem) = problem {
            recorder.skip(&name, &format!("the result is wrong: {problem}"));
            recorder.step();
            return Ok(());
        }
    }
    // Timing: steady-state time per operation from K and 2K back-to-back operations.
    let (k, trials) = repetitions(size, quick);
    let time = steady_time_per_op(k, trials, |count| {
        for client in clients {
            client.sync()?;
        }
        let start = Instant::now();
        (0..count).try_for_each(|_| call_all())?;
        sync_every(clients)?;
        Ok(start.elapsed().as_secs_f64())
    })?;
    let busbw = gb_per_s(size, time) * collective.bus_factor(n);
    let note = format!("{n} devices, f32, K = {k}, {trials} trials");
    recorder.emit(&name, busbw, "GB/s", &note);
    recorder.emit(
        &format!("cubert_{}_time_{label}", collective.figure()),
        time * 1e6,
        "us",
        &note,
    );
    Ok(())
}
