//! Reads into the caller's memory with the device's copy and the host's overlapped.
//!
//! A read into a buffer the caller owns (`read_into`) makes two copies: the DMA from device
//! memory into pinned memory, then the host copy from pinned memory into the caller's
//! pageable buffer. One after the other, a 1 GiB read costs both (on an H200 host about
//! 20 ms of DMA and 35 ms of host copy). Here the DMA is queued in chunks of
//! [`CHUNK`] bytes, each followed by an event; the future waits for chunk k's event and
//! copies that chunk on the copy threads while the device copies the next ones, so the read
//! costs about the slower of the two copies plus one chunk.
//!
//! The future owns the pinned buffer. A sync job after the last chunk reports the stream's
//! status counters and takes its errors, as a read's job would. The buffer is dropped only
//! once every chunk's event completed; a future dropped (or failed) before that hands the
//! buffer to the completion thread with the last chunk's event, so the device never writes
//! into memory the pool has handed out again.
//!
//! Like the default `read_into`, the future copies while it is polled: a caller that polls
//! it (`client.read_into`, through `block_on`) does the host copy on its own call.

use crate::completion::{Job, Reply, wait_for};
use crate::direct_wait::DirectWaitParts;
use crate::transfer::parallel_copy;
use cubert_runtime::future::OneshotReceiver;
use cubert_runtime::host_slice::HostSlice;
use cubert_runtime::{Bytes, ServerError, StreamId};
use cudarc::driver::sys::CUevent;
use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Bytes per chunk of a chunked read.
pub const CHUNK: usize = 32 << 20;

/// Reads of at least this many dense bytes are chunked; smaller ones gain too little.
pub const CHUNKED_FROM: usize = 4 * CHUNK;

/// One chunk of the read: its event (recorded after its DMA) and its range in the buffer.
pub(crate) struct Chunk {
    pub(crate) event: CUevent,
    pub(crate) range: Range<usize>,
}

/// A read into `destination` whose chunks land in the pinned buffer `pinned` (see the
/// module docs).
pub(crate) struct ChunkedRead {
    /// The context, errors, event pool and completion queue of the server.
    parts: DirectWaitParts,
    stream: StreamId,
    copy_pool: Arc<rayon::ThreadPool>,
    /// The buffer the chunks land in; `None` once handed to the completion thread.
    pinned: Option<Bytes>,
    /// Its address, taken before the DMAs were queued (chunks are read through it, never
    /// through a reference to the whole buffer the device is still writing).
    base: *const u8,
    /// The chunks not yet copied out, in order.
    chunks: VecDeque<Chunk>,
    destination: HostSlice,
    /// The sync job's answer: the stream's errors, once the device passed every chunk.
    reply: OneshotReceiver<Result<(), ServerError>>,
}

// SAFETY: `base` points into `pinned`, owned here and only read; CUevent handles may be used
// from any thread of the context.
unsafe impl Send for ChunkedRead {}

impl ChunkedRead {
    /// The read of `chunks` (queued on `stream`, in order) into `destination`, through the
    /// pinned buffer `pinned` at `base`; `reply` answers the sync job queued after them.
    ///
    /// # Safety
    /// `base` is the address of `pinned`, whose bytes cover every chunk's range;
    /// `destination` stays lent until the future resolves or drops, and is as long as the
    /// buffer.
    pub(crate) unsafe fn new(
        parts: DirectWaitParts,
        stream: StreamId,
        copy_pool: Arc<rayon::ThreadPool>,
        (pinned, base): (Bytes, *const u8),
        chunks: VecDeque<Chunk>,
        destination: HostSlice,
        reply: OneshotReceiver<Result<(), ServerError>>,
    ) -> Self {
        Self {
            parts,
            stream,
            copy_pool,
            pinned: Some(pinned),
            base,
            chunks,
            destination,
            reply,
        }
    }

    /// Waits for the next chunk's DMA and copies the chunk into the destination.
    fn copy_next(&mut self, chunk: Chunk) -> Result<(), ServerError> {
        let waited = self
            .parts
            .context
            .scoped()
            .and_then(|_scope| wait_for(chunk.event));
        self.parts.events.give_back(chunk.event);
        waited.map_err(|failure| self.parts.shared.observe(failure.into_server_error()))?;
        // SAFETY: the chunk's DMA is complete and the buffer is alive (owned here until every
        // chunk completed); the range lies inside it.
        let source = unsafe {
            std::slice::from_raw_parts(self.base.add(chunk.range.start), chunk.range.len())
        };
        // SAFETY: the destination stays lent while this future is polled (the caller's
        // contract); the range lies inside it (it is as long as the buffer).
        let out = unsafe { self.destination.as_mut_slice() };
        match out.get_mut(chunk.range.clone()) {
            Some(out) => {
                parallel_copy(&self.copy_pool, out, source);
                Ok(())
            }
            None => Err(ServerError::generic(format!(
                "a chunk of bytes {:?} past a destination of {}",
                chunk.range,
                out.len()
            ))),
        }
    }

    /// Releases what chunks not waited for hold: their events go back to the pool (a later
    /// record supersedes a pending one) and the buffer goes to the completion thread, which
    /// drops it once the last chunk's event completed.
    fn release_pending(&mut self) {
        let Some(last) = self.chunks.pop_back() else {
            return;
        };
        for chunk in self.chunks.drain(..) {
            self.parts.events.give_back(chunk.event);
        }
        let Some(pinned) = self.pinned.take() else {
            self.parts.events.give_back(last.event);
            return;
        };
        // If the thread has stopped, its server was dropped after synchronizing its
        // streams: the chunks have landed and the buffer may go with the job.
        let _ = self.parts.queue.submit(Job {
            event: last.event,
            timing_event: false,
            stream: self.stream,
            checks: Vec::new(),
            reply: Reply::Retire(Box::new(pinned)),
        });
    }
}

impl Future for ChunkedRead {
    type Output = Result<(), ServerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        while let Some(chunk) = this.chunks.pop_front() {
            if let Err(error) = this.copy_next(chunk) {
                this.release_pending();
                return Poll::Ready(Err(error));
            }
        }
        match Pin::new(&mut this.reply).poll(cx) {
            Poll::Ready(Some(result)) => Poll::Ready(result),
            Poll::Ready(None) => Poll::Ready(Err(ServerError::generic(
                "the CUDA completion thread stopped",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for ChunkedRead {
    fn drop(&mut self) {
        self.release_pending();
    }
}
