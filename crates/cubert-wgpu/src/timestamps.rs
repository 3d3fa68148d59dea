//! Device timing of profiled work with timestamp queries, where the adapter has them
//! (`TIMESTAMP_QUERY` and `TIMESTAMP_QUERY_INSIDE_ENCODERS`).
//!
//! A profile writes one timestamp into the pending command encoder when it starts and one
//! when it ends; each is taken once all commands recorded before it have finished (Vulkan's
//! bottom-of-pipe, Metal's and DX12's equivalents), so their difference is the device time
//! of the work between them, without stopping the queue at the start. The end resolves
//! both into a buffer and copies them into a mapped one; the duration is read on the
//! thread that awaits it, in nanoseconds by the queue's timestamp period. Adapters without
//! timestamps time profiles on the host clock around synchronized work
//! (`TimingMethod::System`).

use crate::readback::Readback;
use cubert_runtime::ServerError;
use std::time::{Duration, Instant};

/// Bytes of the two resolved timestamps.
const RESOLVED_BYTES: u64 = 2 * std::mem::size_of::<u64>() as u64;

/// The features a device needs for device-timed profiles.
pub const FEATURES: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

/// A started profile: its query set (start written) and the host instant of the start.
#[derive(Debug)]
pub struct StartedProfile {
    queries: wgpu::QuerySet,
    host_start: Instant,
}

impl StartedProfile {
    /// Writes the start timestamp of a new profile into `encoder`.
    pub fn start(device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder) -> Self {
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("cubert profile"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        encoder.write_timestamp(&queries, 0);
        Self {
            queries,
            host_start: Instant::now(),
        }
    }

    /// Writes the end timestamp into `encoder` and records reading both back; the returned
    /// [`FinishedProfile`] can be waited on once `encoder` is submitted.
    pub fn finish(
        self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        period_ns: f32,
    ) -> FinishedProfile {
        encoder.write_timestamp(&self.queries, 1);
        let resolved = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cubert profile timestamps"),
            size: RESOLVED_BYTES,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        encoder.resolve_query_set(&self.queries, 0..2, &resolved, 0);
        let readback = Readback::record(device, encoder, &resolved, 0, RESOLVED_BYTES);
        FinishedProfile {
            readback,
            host_start: self.host_start,
            period_ns,
        }
    }
}

/// A profile whose end is recorded: the readback of its two timestamps.
#[derive(Debug)]
pub struct FinishedProfile {
    readback: Readback,
    host_start: Instant,
    period_ns: f32,
}

impl FinishedProfile {
    /// The host instant of the start and the device time between the two timestamps,
    /// once the device has written them (their commands must have been submitted).
    ///
    /// # Errors
    /// [`ServerError::Generic`] when the device is lost or the readback can't be mapped,
    /// or the end timestamp precedes the start (a driver that reset its clock).
    pub fn wait(self) -> Result<(Instant, Duration), ServerError> {
        let bytes = self.readback.wait()?;
        let stamps: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|word| u64::from_le_bytes(word.try_into().unwrap_or_default()))
            .collect();
        let [start, end] = stamps[..] else {
            return Err(ServerError::generic(format!(
                "wgpu read back {} bytes of timestamps, not {RESOLVED_BYTES}",
                bytes.len()
            )));
        };
        let ticks = end.checked_sub(start).ok_or_else(|| {
            ServerError::generic(format!(
                "wgpu timestamps went backwards: start {start}, end {end} (device ticks)"
            ))
        })?;
        let nanos = ticks as f64 * f64::from(self.period_ns);
        Ok((self.host_start, Duration::from_nanos(nanos.round() as u64)))
    }
}
