//! A read queued now and collected later: [`LazyRead`], made by `ComputeClient::read_lazy`.
//!
//! The copies are queued on the client's stream when the read is made (after the work
//! queued before it, before the work queued after), and the calling thread goes on: nothing
//! blocks until the bytes are asked for. [`LazyRead::is_ready`] looks without waiting,
//! [`LazyRead::wait`] waits, and a `LazyRead` is also a future for async callers. Dropping
//! it drops the bytes; the copies themselves still run in stream order.

use crate::bytes::Bytes;
use crate::error::ServerError;
use crate::future::{DynFut, block_on};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A read whose copies are queued and whose bytes are collected later. See the module docs.
pub struct LazyRead {
    state: State,
}

enum State {
    Pending(DynFut<Result<Vec<Bytes>, ServerError>>),
    Done(Result<Vec<Bytes>, ServerError>),
    Taken,
}

impl LazyRead {
    pub(crate) fn new(future: DynFut<Result<Vec<Bytes>, ServerError>>) -> Self {
        Self {
            state: State::Pending(future),
        }
    }

    /// Whether the bytes are there (or the read failed), without waiting.
    pub fn is_ready(&mut self) -> bool {
        if let State::Pending(future) = &mut self.state {
            let mut context = Context::from_waker(Waker::noop());
            if let Poll::Ready(result) = future.as_mut().poll(&mut context) {
                self.state = State::Done(result);
            }
        }
        !matches!(self.state, State::Pending(_))
    }

    /// The bytes, one `Bytes` per handle read, waiting for them if they aren't there yet.
    ///
    /// # Errors
    /// As `ComputeClient::read`.
    pub fn wait(self) -> Result<Vec<Bytes>, ServerError> {
        block_on(self)
    }
}

impl Future for LazyRead {
    type Output = Result<Vec<Bytes>, ServerError>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Pending(mut future) => match future.as_mut().poll(context) {
                Poll::Ready(result) => Poll::Ready(result),
                Poll::Pending => {
                    self.state = State::Pending(future);
                    Poll::Pending
                }
            },
            State::Done(result) => Poll::Ready(result),
            State::Taken => Poll::Ready(Err(ServerError::generic(
                "this lazy read's bytes were already collected",
            ))),
        }
    }
}
