//! The work a threaded device handle may run on its caller's thread.
//!
//! A threaded device handle hands every task to the device's runner thread. Each hand-off
//! costs a wake-up and a cache line or two crossing cores: on the hosts measured, about as
//! much as a small CUDA driver call. When the runner is idle (every message sent to it has
//! been handled and the server is free), nothing submitted earlier can still be waiting, so
//! the caller may run the work itself under the server's lock and the order is the same.
//!
//! Whether that is worth it depends on the work and the backend, so the server says, per
//! [`CallerWork`]: `ComputeServer::CALLER_WORK` lists the kinds it may run on callers at all
//! (the others go to the runner without touching the server's lock), and
//! `ComputeServer::runs_on_caller` says whether it does now, on this thread:
//!
//! - an **allocation** is host bookkeeping on the CPU and wgpu, and mostly on CUDA too (the
//!   growable pool takes the block freed last back without a search; a growth makes its
//!   driver calls on the caller, as `cudaMalloc` does);
//! - an **upload** (an allocation and the write of the caller's data into it: `create*` of
//!   owned data under `client::CALLER_WRITTEN_BELOW`, of a slice at any size) is a `memcpy`
//!   on the CPU, cheaper than the two hand-offs of queuing it; wgpu keeps it queued (a write
//!   of partial words reads the buffer back, waiting for the GPU) and so does CUDA (pinned
//!   staging and a copy on its stream);
//! - a **launch** only queues the kernel on CUDA and records it on wgpu, but runs it on the
//!   CPU (there the caller would wait for the kernel, and lose the overlap the runner
//!   gives); CUDA and wgpu run only the first launch after a sync or a read on the caller, so
//!   back-to-back launches keep the overlap;
//! - a **sync** is a check of the stream's errors on the CPU and an event recorded on CUDA;
//!   the caller waits for it in any case;
//! - a **read** queues copies into host memory on CUDA (into pinned staging, an event
//!   after) and on wgpu (into a mappable buffer, submitted), which the caller then waits
//!   for; on the CPU it is the copy itself, which stays on the runner so that a lazy read
//!   (`ComputeClient::read_lazy`) still overlaps the caller's work.
//!
//! A backend that needs state of the thread (CUDA's current context) answers for the
//! calling thread: CUDA runs work on a thread whose current context is its own or none
//! (then its own becomes current, as the CUDA runtime does), never on a thread that uses
//! another context.

/// A kind of work a threaded device handle may run on the caller's thread while its runner
/// is idle (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallerWork {
    /// `ComputeServer::allocate` without a task that fills the memory.
    Allocation,
    /// `ComputeServer::allocate` followed by `ComputeServer::write` of host data into the
    /// new memory (`DeviceHandle::allocate_then_write`).
    Upload,
    /// `ComputeServer::launch`.
    Launch,
    /// `ComputeServer::sync`: the call that returns the future (the wait is the caller's
    /// in any case).
    Sync,
    /// `ComputeServer::read`: the call that queues the copies and returns the future (the
    /// wait is the caller's in any case).
    Read,
}

/// The rule by which a backend whose launches only queue work (CUDA, wgpu) runs them on
/// its callers: the first launch after the caller waited for the device (a sync or a read)
/// is the caller's, so a launch-then-wait loop never crosses threads; once a kernel was
/// launched, the launches after it go to the runner until the caller waits again, so that
/// back-to-back launches keep the overlap the runner gives.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FirstLaunchAfterWait {
    launched: bool,
}

impl FirstLaunchAfterWait {
    /// Records a launch.
    pub fn launched(&mut self) {
        self.launched = true;
    }

    /// Records that the caller waits for the device: a sync or a read.
    pub fn waited(&mut self) {
        self.launched = false;
    }

    /// Whether the rule lets `work` run on the caller: any work but a launch, and a launch
    /// when none was made since the last wait.
    pub fn allows(&self, work: CallerWork) -> bool {
        work != CallerWork::Launch || !self.launched
    }
}

#[cfg(test)]
mod tests {
    use super::{CallerWork, FirstLaunchAfterWait};

    #[test]
    fn only_the_first_launch_after_a_wait_is_allowed_on_the_caller() {
        let mut rule = FirstLaunchAfterWait::default();
        assert!(rule.allows(CallerWork::Launch));
        rule.launched();
        assert!(!rule.allows(CallerWork::Launch));
        assert!(rule.allows(CallerWork::Sync) && rule.allows(CallerWork::Read));
        rule.waited();
        assert!(rule.allows(CallerWork::Launch));
    }
}
