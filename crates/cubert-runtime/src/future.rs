//! Futures usable without an async runtime.
//!
//! Reads, syncs and profiles return futures so that async callers can await them; everyone
//! else calls [`block_on`], which parks the calling thread until the future is ready. A
//! [`oneshot`] pair lets a backend resolve a future from another thread (for example when a
//! device event completes).

use crate::spin::{SPIN, spinning_helps};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// A boxed, sendable future.
pub type DynFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A future that is already resolved.
pub fn ready<T: Send + 'static>(value: T) -> DynFut<T> {
    Box::pin(std::future::ready(value))
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on the calling thread: polls it for [`SPIN`] (where
/// [`spinning_helps`]), then parks the thread until the future's waker is called (waking a
/// parked thread can cost ~100 µs on virtual machines).
///
/// Hand-written rather than `pollster::block_on` for that spin: pollster parks at once, and
/// a read or sync that completes within microseconds would pay the wake-up every time.
// The `launch + sync` latency figures of docs/benchmarks.md are measured through this.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let start = std::time::Instant::now();
    let spin = spinning_helps();
    let _blocking = BlockingPoll::enter();
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(value) => return value,
            Poll::Pending if spin && start.elapsed() < SPIN => std::hint::spin_loop(),
            Poll::Pending => std::thread::park(),
        }
    }
}

thread_local! {
    static IN_BLOCK_ON: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the thread as polling inside [`block_on`] until dropped (restoring the mark it
/// found, so nested calls nest).
struct BlockingPoll(bool);

impl BlockingPoll {
    fn enter() -> Self {
        Self(IN_BLOCK_ON.with(|flag| flag.replace(true)))
    }
}

impl Drop for BlockingPoll {
    fn drop(&mut self) {
        IN_BLOCK_ON.with(|flag| flag.set(self.0));
    }
}

/// Whether the calling thread is polling a future inside [`block_on`]: its caller is
/// blocked anyway, so a future may ask to be polled again at once (spin on a device event)
/// instead of handing the wait to another thread. An async executor's poll answers false.
pub fn polled_by_block_on() -> bool {
    IN_BLOCK_ON.with(std::cell::Cell::get)
}

struct OneshotState<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
}

/// The sending half of a [`oneshot`] pair.
pub struct OneshotSender<T> {
    state: Arc<Mutex<OneshotState<T>>>,
}

/// The receiving half of a [`oneshot`] pair: a future of the sent value, or `None` if the
/// sender was dropped without sending.
pub struct OneshotReceiver<T> {
    state: Arc<Mutex<OneshotState<T>>>,
}

/// A single-value channel whose receiver is a future.
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let state = Arc::new(Mutex::new(OneshotState {
        value: None,
        waker: None,
        sender_gone: false,
    }));
    (
        OneshotSender {
            state: state.clone(),
        },
        OneshotReceiver { state },
    )
}

impl<T> OneshotSender<T> {
    /// Sends the value and wakes the receiver.
    pub fn send(self, value: T) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.value = Some(value);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for OneshotReceiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = state.value.take() {
            return Poll::Ready(Some(value));
        }
        if state.sender_gone {
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_waits_for_a_value_sent_from_another_thread() {
        let (sender, receiver) = oneshot();
        let worker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            sender.send(42);
        });
        assert_eq!(block_on(receiver), Some(42));
        worker.join().unwrap();
    }

    #[test]
    fn only_block_on_marks_its_polls() {
        assert!(!polled_by_block_on());
        let inside = block_on(async { polled_by_block_on() });
        assert!(inside);
        assert!(!polled_by_block_on(), "the mark ends with the call");
    }

    #[test]
    fn dropped_sender_resolves_to_none() {
        let (sender, receiver) = oneshot::<u32>();
        drop(sender);
        assert_eq!(block_on(receiver), None);
    }
}
