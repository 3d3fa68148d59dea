//! Stream ordering for memory reuse.
//!
//! A freed block may still be read or written by work already queued on the streams that
//! used it. When it is released, the server records a [`StreamPoint`] for each of those
//! streams: "the work queued on this stream up to here". The block can be reused
//!
//! - at once by a stream that is itself one of the points (stream order protects it), once
//!   every other point is complete;
//! - by any stream once every point is complete;
//! - by any stream before that, if the server makes the new stream wait on the device for
//!   the pending points ([`StreamOrdering::wait_for`]).
//!
//! Backends whose work completes in submission order on the host (the CPU) release blocks
//! with no points at all, and every block is reusable at once.

use crate::stream::StreamId;
use smallvec::SmallVec;

/// The stream points a freed block waits for: at most one per stream (merging free
/// neighbours keeps each stream's later point), and nearly always one (the stream of its
/// last use) or none. Up to two are kept inline, so a free, the allocator's hottest path
/// after the reservation, allocates nothing.
pub type StreamPoints = SmallVec<[StreamPoint; 2]>;

/// "The work queued on `stream` up to submission number `seq`."
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamPoint {
    /// The stream.
    pub stream: StreamId,
    /// The server's submission counter on that stream when the point was taken.
    pub seq: u64,
}

/// What the memory manager asks the server about stream progress.
pub trait StreamOrdering {
    /// Whether all work up to `point` has completed on the device.
    fn is_complete(&mut self, point: StreamPoint) -> bool;

    /// Makes `waiter` wait, on the device, for the work up to `point`. Returns `false` if
    /// the backend can't, in which case the block is not reused.
    fn wait_for(&mut self, waiter: StreamId, point: StreamPoint) -> bool;
}

/// Ordering for backends where queued work is complete once submitted (every point is
/// complete).
pub struct HostOrdering;

impl StreamOrdering for HostOrdering {
    fn is_complete(&mut self, _point: StreamPoint) -> bool {
        true
    }

    fn wait_for(&mut self, _waiter: StreamId, _point: StreamPoint) -> bool {
        true
    }
}
