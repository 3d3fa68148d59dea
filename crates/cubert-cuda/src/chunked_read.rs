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
//! The pinned buffer goes to the completion thread with the last chunk's event as an
//! ordinary read would: that job reports the stream's status counters, takes its errors,
//! and keeps the buffer alive until the device is done. The future copies the chunks out
//! of the buffer before that job's reply arrives; this is sound because the buffer is
//! dropped only after the reply, which the future holds until it resolves.
//!
//! Like the default `read_into`, the future copies while it is polled: a caller that polls
//! it (`client.read_into`, through `block_on`) does the host copy on its own call.

use crate::completion::wait_for;
use crate::direct_wait::DirectWaitParts;
use crate::transfer::parallel_copy;
use cubert_runtime::future::OneshotReceiver;
use cubert_runtime::host_slice::HostSlice;
use cubert_runtime::{Bytes, ServerError};
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

/// A read into `destination` whose chunks land in a pinned buffer at `pinned` (see the
/// module docs).
pub(crate) struct ChunkedRead {
    /// The context, errors and event pool of the server (its completion queue is unused:
    /// the read's job was queued by the server).
    parts: DirectWaitParts,
    copy_pool: Arc<rayon::ThreadPool>,
    /// Address of the pinned buffer, alive while `reply` is unresolved.
    pinned: *const u8,
    chunks: VecDeque<Chunk>,
    destination: HostSlice,
    /// The completion thread's answer for the whole read: the buffer, or the error.
    reply: OneshotReceiver<Result<Vec<Bytes>, ServerError>>,
}

// SAFETY: `pinned` points into a buffer owned by the completion thread's job (then by the
// reply), only read here; CUevent handles may be used from any thread of the context.
unsafe impl Send for ChunkedRead {}

impl ChunkedRead {
    /// The read of `chunks` (queued, in order) into `destination`, through the pinned
    /// buffer at `pinned`, whose job answers `reply`.
    ///
    /// # Safety
    /// `pinned` is the address of the buffer the job behind `reply` holds, which covers
    /// every chunk's range; `destination` stays lent until the future resolves or drops,
    /// and is as long as the buffer.
    pub(crate) unsafe fn new(
        parts: DirectWaitParts,
        copy_pool: Arc<rayon::ThreadPool>,
        pinned: *const u8,
        chunks: VecDeque<Chunk>,
        destination: HostSlice,
        reply: OneshotReceiver<Result<Vec<Bytes>, ServerError>>,
    ) -> Self {
        Self {
            parts,
            copy_pool,
            pinned,
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
        // SAFETY: the chunk's DMA is complete and the buffer is alive (the reply, which owns
        // it after the job, is still held here); the range lies inside it.
        let source = unsafe {
            std::slice::from_raw_parts(self.pinned.add(chunk.range.start), chunk.range.len())
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

    /// Gives the events of chunks not waited for back to the pool (a later record
    /// supersedes their pending one).
    fn release_events(&mut self) {
        for chunk in self.chunks.drain(..) {
            self.parts.events.give_back(chunk.event);
        }
    }
}

impl Future for ChunkedRead {
    type Output = Result<(), ServerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        while let Some(chunk) = this.chunks.pop_front() {
            if let Err(error) = this.copy_next(chunk) {
                this.release_events();
                return Poll::Ready(Err(error));
            }
        }
        match Pin::new(&mut this.reply).poll(cx) {
            Poll::Ready(Some(Ok(_buffer))) => Poll::Ready(Ok(())),
            Poll::Ready(Some(Err(error))) => Poll::Ready(Err(error)),
            Poll::Ready(None) => Poll::Ready(Err(ServerError::generic(
                "the CUDA completion thread stopped",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for ChunkedRead {
    fn drop(&mut self) {
        self.release_events();
    }
}
