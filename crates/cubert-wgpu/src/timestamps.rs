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
//!
//! Where a profile lies on the host clock: the device's timestamps are mapped onto it by
//! one [`ClockAnchor`] per server, so that profiles of one device nest and order as their
//! timestamps do. (Each profile used to start at the host instant its start was recorded,
//! plus its device time: a profile nested in another, recorded later on the host than the
//! outer one's device work took, then seemed to end after it; on lavapipe, one run in
//! eight of the nested-profile test.)

use crate::readback::Readback;
use cubert_runtime::ServerError;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Bytes of the two resolved timestamps.
const RESOLVED_BYTES: u64 = 2 * std::mem::size_of::<u64>() as u64;

/// The features a device needs for device-timed profiles.
pub const FEATURES: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

/// How one server's device timestamps map onto the host clock: the first profile to
/// resolve anchors it (the host instant its start was recorded at ↔ its start timestamp, in
/// nanoseconds); every profile is then placed by its timestamps' distance from the anchor.
/// The anchor's own offset (recording precedes execution) shifts every profile alike.
#[derive(Debug, Default)]
pub struct ClockAnchor(OnceLock<(Instant, u64)>);

impl ClockAnchor {
    /// A new, unset anchor, shared by a server's profiles.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The host instant of device time `device_ns`, anchoring the mapping at
    /// (`host`, `device_ns`) if it isn't yet; `host` where the mapping overflows.
    fn host_instant(&self, host: Instant, device_ns: u64) -> Instant {
        let (anchor_host, anchor_ns) = *self.0.get_or_init(|| (host, device_ns));
        let mapped = if device_ns >= anchor_ns {
            anchor_host.checked_add(Duration::from_nanos(device_ns - anchor_ns))
        } else {
            anchor_host.checked_sub(Duration::from_nanos(anchor_ns - device_ns))
        };
        mapped.unwrap_or(host)
    }
}

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
        anchor: Arc<ClockAnchor>,
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
            anchor,
        }
    }
}

/// A profile whose end is recorded: the readback of its two timestamps.
#[derive(Debug)]
pub struct FinishedProfile {
    readback: Readback,
    host_start: Instant,
    period_ns: f32,
    anchor: Arc<ClockAnchor>,
}

impl FinishedProfile {
    /// The host instant of the start (mapped by the server's [`ClockAnchor`]) and the
    /// device time between the two timestamps, once the device has written them (their
    /// commands must have been submitted).
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
        // Both ends from their own timestamps, so that nested profiles keep their order
        // after rounding.
        let nanos = |ticks: u64| (ticks as f64 * f64::from(self.period_ns)).round() as u64;
        let (start_ns, end_ns) = (nanos(start), nanos(start + ticks));
        let started = self.anchor.host_instant(self.host_start, start_ns);
        Ok((
            started,
            Duration::from_nanos(end_ns.saturating_sub(start_ns)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_nest_as_their_timestamps_whatever_host_instants_they_were_recorded_at() {
        let anchor = ClockAnchor::default();
        let now = Instant::now();
        let second = 1_000_000_000;
        // The inner profile resolves first; it was recorded 5 ms after the outer one on the
        // host, though on the device it started 1 µs into the outer one.
        let inner = anchor.host_instant(now + Duration::from_millis(5), second + 1_000);
        let outer = anchor.host_instant(now, second);
        assert_eq!(inner - outer, Duration::from_nanos(1_000));
        // Any later profile is placed by its distance from the anchor, not by its host instant.
        let later = anchor.host_instant(now, second + 2_000_000);
        assert_eq!(later - inner, Duration::from_nanos(2_000_000 - 1_000));
    }
}
