//! Matching the collective calls that the devices of one process make.
//!
//! Every device of a set makes the same collective call, each on its own server: from its
//! runner thread (threaded device handles) or, with inline handles, possibly one after the
//! other on a single thread. A collective can only run once every participant has called,
//! and no call may block waiting for the others (one thread may be making them all). So
//! the calls meet here: [`LocalGroup::arrive`] queues a device's call and returns at once;
//! the call that completes an instance (the last device to arrive) runs it for every
//! participant through the backend's [`Launcher`], with the group locked, so instances run
//! in one order on every device.
//!
//! Matching follows call order per device. The head calls of the queues form an instance:
//! a group-wide call (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`) when every
//! device's head is one (of the same kind and size, or the instance fails on every device),
//! a `send` with the peer's head `recv` from it (or alone when the peer is another process).
//! Calls that can never match (other kinds, sizes, types, operations or roots; a call whose
//! server was replaced by another server of the same device) are abandoned with an error
//! instead of run.
//!
//! What happens to an early device's call until the last one arrives is the backend's
//! business. On a runner thread both backends wait for the peers' calls
//! ([`LocalGroup::wait`], with a timeout). With an inline handle the CPU backend picks the
//! result up later ([`LocalGroup::take_rank`]); the CUDA backend holds the call and settles
//! it before the device's next operation ([`LocalGroup::take`], [`LocalGroup::wait_taking`]).
//!
//! [`local_group`] is the process-wide registry: one group per backend payload type and
//! communicator id.

use super::communication::{CommunicationId, ReduceOperation};
use crate::elem::ElemType;
use crate::error::ServerError;
use crate::spin::{SPIN, spinning_helps};
use std::any::{Any, TypeId};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// What one device asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// Its part of an all-reduce over every device of the group.
    AllReduce {
        /// Bytes reduced.
        bytes: u64,
        /// Element type.
        dtype: ElemType,
        /// Reduction.
        op: ReduceOperation,
    },
    /// Sends `bytes` to rank `peer`.
    Send {
        /// Receiving rank.
        peer: usize,
        /// Bytes sent.
        bytes: u64,
    },
    /// Receives `bytes` from rank `peer`.
    Recv {
        /// Sending rank.
        peer: usize,
        /// Bytes received.
        bytes: u64,
    },
    /// Its part of an all-gather: every rank contributes `bytes` and receives every rank's
    /// part, in rank order.
    AllGather {
        /// Bytes each rank contributes.
        bytes: u64,
        /// Element type.
        dtype: ElemType,
    },
    /// Its part of a reduce-scatter: every rank contributes `bytes` × ranks and receives the
    /// reduction of its own `bytes`-long part.
    ReduceScatter {
        /// Bytes each rank receives.
        bytes: u64,
        /// Element type.
        dtype: ElemType,
        /// Reduction.
        op: ReduceOperation,
    },
    /// Its part of a broadcast of `bytes` from rank `root` to every rank.
    Broadcast {
        /// Bytes broadcast.
        bytes: u64,
        /// Element type.
        dtype: ElemType,
        /// The rank whose data every rank receives.
        root: usize,
    },
}

impl CallKind {
    /// Whether every rank of the group takes part (all-reduce, all-gather, reduce-scatter,
    /// broadcast), as opposed to a pair (send and recv).
    pub fn is_group_wide(&self) -> bool {
        !matches!(self, Self::Send { .. } | Self::Recv { .. })
    }
}

/// Identifies a call within its group.
pub type Ticket = u64;

/// One device's queued call.
pub struct Call<P> {
    /// The device's rank.
    pub rank: usize,
    /// The call's ticket.
    pub ticket: Ticket,
    /// What it asks for.
    pub kind: CallKind,
    /// Which server made it (any value unique among live servers, such as an address).
    pub owner: usize,
    /// The backend's data.
    pub payload: P,
    collect: bool,
}

/// Runs matched calls; called with the group locked.
pub trait Launcher<P> {
    /// Runs one instance: the calls of every participant, in rank order. May change the
    /// payloads (to leave results for their ranks).
    ///
    /// # Errors
    /// The backend's error; it has released what the calls hold.
    fn launch(&mut self, calls: &mut [Call<P>]) -> Result<(), ServerError>;

    /// Gives up calls that will never run (they don't match, their server was replaced,
    /// they timed out): releases what they hold, reports `error` where the backend reports.
    fn abandon(&mut self, calls: &mut [Call<P>], error: &ServerError);
}

/// A call that ran (or was abandoned), kept for the rank that made it.
pub struct Finished<P> {
    /// What it asked for.
    pub kind: CallKind,
    /// Its payload after the launch.
    pub payload: P,
    /// Whether it ran.
    pub result: Result<(), ServerError>,
}

struct Kept<P> {
    rank: usize,
    owner: usize,
    finished: Finished<P>,
}

struct State<P> {
    queues: Vec<VecDeque<Call<P>>>,
    next_ticket: Ticket,
    finished: HashMap<Ticket, Kept<P>>,
}

/// The meeting point of the devices of one communicator. See the module docs.
pub struct LocalGroup<P> {
    local: Vec<bool>,
    state: Mutex<State<P>>,
    changed: Condvar,
    /// Bumped on every change [`Self::changed`] announces, for waiters that poll first.
    generation: AtomicU64,
}

impl<P> LocalGroup<P> {
    /// A group of `local.len()` ranks; `local[r]` says whether rank `r` is a device of this
    /// process (the others are other processes: their calls never arrive here).
    pub fn new(local: Vec<bool>) -> Self {
        let ranks = local.len();
        Self {
            local,
            state: Mutex::new(State {
                queues: (0..ranks).map(|_| VecDeque::new()).collect(),
                next_ticket: 1,
                finished: HashMap::new(),
            }),
            changed: Condvar::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.local.len()
    }

    /// Which ranks are devices of this process.
    pub fn local(&self) -> &[bool] {
        &self.local
    }

    fn lock(&self) -> MutexGuard<'_, State<P>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the waiters after a change (made with the state unlocked again).
    fn announce(&self) {
        self.generation.fetch_add(1, Ordering::Release);
        self.changed.notify_all();
    }

    /// Releases the state and polls for a change for at most `until`, then locks again: a
    /// peer's call usually arrives within microseconds, sooner than a sleeping thread wakes.
    fn poll_for_change<'a>(
        &'a self,
        state: MutexGuard<'a, State<P>>,
        until: Instant,
    ) -> MutexGuard<'a, State<P>> {
        let seen = self.generation.load(Ordering::Acquire);
        drop(state);
        while self.generation.load(Ordering::Acquire) == seen && Instant::now() < until {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
        self.lock()
    }

    /// Queues `rank`'s call and runs, through `launcher`, every instance that became
    /// complete. With `collect`, the outcome is kept for [`Self::wait`], [`Self::take`] or
    /// [`Self::take_rank`]. Calls of `rank` queued by another `owner` are abandoned first.
    ///
    /// # Errors
    /// [`ServerError::Generic`] for a rank outside the group or not of this process, or a
    /// peer outside the group or equal to `rank`.
    pub fn arrive(
        &self,
        rank: usize,
        owner: usize,
        kind: CallKind,
        payload: P,
        collect: bool,
        launcher: &mut dyn Launcher<P>,
    ) -> Result<Ticket, ServerError> {
        if rank >= self.ranks() || !self.local[rank] {
            return Err(ServerError::generic(format!(
                "rank {rank} is not a device of this process in a group of {}",
                self.ranks()
            )));
        }
        if let CallKind::Send { peer, .. } | CallKind::Recv { peer, .. } = kind
            && (peer >= self.ranks() || peer == rank)
        {
            return Err(ServerError::generic(format!(
                "rank {rank} can't exchange with rank {peer} in a group of {}",
                self.ranks()
            )));
        }
        let mut state = self.lock();
        let stale: Vec<Call<P>> = {
            let queue = &mut state.queues[rank];
            let (stale, kept): (Vec<_>, Vec<_>) =
                queue.drain(..).partition(|call| call.owner != owner);
            queue.extend(kept);
            stale
        };
        if !stale.is_empty() {
            let error = ServerError::generic(format!(
                "a collective call of rank {rank} was abandoned: another server of the same \
                 device joined the group before its peers made their calls"
            ));
            Self::give_up(&mut state, stale, &error, launcher);
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queues[rank].push_back(Call {
            rank,
            ticket,
            kind,
            owner,
            payload,
            collect,
        });
        self.run_ready(&mut state, launcher);
        drop(state);
        self.announce();
        Ok(ticket)
    }

    fn give_up(
        state: &mut State<P>,
        mut calls: Vec<Call<P>>,
        error: &ServerError,
        launcher: &mut dyn Launcher<P>,
    ) {
        launcher.abandon(&mut calls, error);
        Self::keep(state, calls, Err(error.clone()));
    }

    fn keep(state: &mut State<P>, calls: Vec<Call<P>>, result: Result<(), ServerError>) {
        for call in calls.into_iter().filter(|call| call.collect) {
            state.finished.insert(
                call.ticket,
                Kept {
                    rank: call.rank,
                    owner: call.owner,
                    finished: Finished {
                        kind: call.kind,
                        payload: call.payload,
                        result: result.clone(),
                    },
                },
            );
        }
    }

    /// The ranks of an instance that can run now, in rank order.
    fn find_ready(&self, state: &State<P>) -> Option<Vec<usize>> {
        let head = |rank: usize| state.queues[rank].front().map(|call| call.kind);
        for rank in (0..self.ranks()).filter(|r| self.local[*r]) {
            match head(rank) {
                None => {}
                Some(kind) if kind.is_group_wide() => {
                    let locals: Vec<usize> = (0..self.ranks()).filter(|r| self.local[*r]).collect();
                    if locals
                        .iter()
                        .all(|r| head(*r).is_some_and(|kind| kind.is_group_wide()))
                    {
                        return Some(locals);
                    }
                }
                Some(CallKind::Send { peer, .. }) => {
                    if !self.local[peer] {
                        return Some(vec![rank]);
                    }
                    if matches!(head(peer), Some(CallKind::Recv { peer: from, .. }) if from == rank)
                    {
                        return Some(vec![rank.min(peer), rank.max(peer)]);
                    }
                }
                Some(CallKind::Recv { peer, .. }) => {
                    if !self.local[peer] {
                        return Some(vec![rank]);
                    }
                    if matches!(head(peer), Some(CallKind::Send { peer: to, .. }) if to == rank) {
                        return Some(vec![rank.min(peer), rank.max(peer)]);
                    }
                }
                Some(_) => {}
            }
        }
        None
    }

    fn run_ready(&self, state: &mut State<P>, launcher: &mut dyn Launcher<P>) {
        while let Some(ranks) = self.find_ready(state) {
            let mut calls: Vec<Call<P>> = ranks
                .iter()
                .filter_map(|rank| state.queues[*rank].pop_front())
                .collect();
            match mismatch(&calls) {
                Some(error) => Self::give_up(state, calls, &error, launcher),
                None => {
                    let result = launcher.launch(&mut calls);
                    Self::keep(state, calls, result);
                }
            }
        }
    }

    /// Waits until call `ticket` (queued with `collect`) has run and returns its outcome.
    /// After `timeout` the call, if still queued, is abandoned and the error names the
    /// devices that never made theirs.
    ///
    /// # Errors
    /// The timeout error, or an error if `ticket` is unknown (not collected, or taken).
    pub fn wait(
        &self,
        ticket: Ticket,
        timeout: Duration,
        launcher: &mut dyn Launcher<P>,
    ) -> Result<Finished<P>, ServerError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let poll_until = if spinning_helps() {
            start + SPIN
        } else {
            start
        };
        let mut state = self.lock();
        loop {
            if let Some(kept) = state.finished.remove(&ticket) {
                return Ok(kept.finished);
            }
            let queued = state.queues.iter().enumerate().find_map(|(rank, queue)| {
                queue
                    .iter()
                    .position(|call| call.ticket == ticket)
                    .map(|index| (rank, index))
            });
            let Some((rank, index)) = queued else {
                return Err(ServerError::generic(format!(
                    "collective call {ticket} is unknown: it was not kept for waiting, or was \
                     already taken"
                )));
            };
            let now = Instant::now();
            if now >= deadline {
                let waiting: Vec<usize> = (0..self.ranks())
                    .filter(|r| *r != rank && self.local[*r])
                    .filter(|r| state.queues[*r].is_empty())
                    .collect();
                let error = ServerError::generic(format!(
                    "a collective call of rank {rank} timed out after {timeout:?}: ranks \
                     {waiting:?} never made the matching call (every device of the set makes \
                     the same collective calls in the same order; CUBERT_COLLECTIVE_TIMEOUT \
                     sets the wait)"
                ));
                if let Some(call) = state.queues[rank].remove(index) {
                    launcher.abandon(&mut [call], &error);
                }
                drop(state);
                self.announce();
                return Err(error);
            }
            if now < poll_until {
                state = self.poll_for_change(state, poll_until.min(deadline));
                continue;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Waits at most `timeout` for call `ticket` (queued with `collect`) to run and takes
    /// its outcome; `None` if it still waits for its peers then (it stays queued).
    pub fn wait_taking(&self, ticket: Ticket, timeout: Duration) -> Option<Finished<P>> {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if let Some(kept) = state.finished.remove(&ticket) {
                return Some(kept.finished);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The outcome of call `ticket` if it has run.
    pub fn take(&self, ticket: Ticket) -> Option<Finished<P>> {
        self.lock()
            .finished
            .remove(&ticket)
            .map(|kept| kept.finished)
    }

    /// Every kept outcome of the calls `owner` made as `rank`, in call order (outcomes kept
    /// for another owner of that rank, a server since replaced, are dropped).
    pub fn take_rank(&self, rank: usize, owner: usize) -> Vec<(Ticket, Finished<P>)> {
        let mut state = self.lock();
        state
            .finished
            .retain(|_, kept| kept.rank != rank || kept.owner == owner);
        let tickets: Vec<Ticket> = state
            .finished
            .iter()
            .filter(|(_, kept)| kept.rank == rank)
            .map(|(ticket, _)| *ticket)
            .collect();
        let mut taken: Vec<(Ticket, Finished<P>)> = tickets
            .into_iter()
            .filter_map(|ticket| {
                state
                    .finished
                    .remove(&ticket)
                    .map(|kept| (ticket, kept.finished))
            })
            .collect();
        taken.sort_by_key(|(ticket, _)| *ticket);
        taken
    }

    /// Number of `rank`'s calls still waiting for their peers.
    pub fn pending(&self, rank: usize) -> usize {
        self.lock().queues.get(rank).map_or(0, VecDeque::len)
    }

    /// Abandons every call `owner` queued (its server is going away) and forgets its kept
    /// outcomes.
    pub fn abandon_owner(&self, owner: usize, launcher: &mut dyn Launcher<P>) {
        let mut state = self.lock();
        let mut gone = Vec::new();
        for queue in &mut state.queues {
            let (mine, kept): (Vec<_>, Vec<_>) =
                queue.drain(..).partition(|call| call.owner == owner);
            queue.extend(kept);
            gone.extend(mine);
        }
        state.finished.retain(|_, kept| kept.owner != owner);
        if !gone.is_empty() {
            let error = ServerError::generic(
                "a collective call was abandoned: its server was dropped before its peers \
                 made their calls",
            );
            launcher.abandon(&mut gone, &error);
        }
        drop(state);
        self.announce();
    }
}

/// Why the calls of one instance can't run together, if they can't.
fn mismatch<P>(calls: &[Call<P>]) -> Option<ServerError> {
    let first = calls.first()?;
    match first.kind {
        kind if kind.is_group_wide() => calls.iter().find(|c| c.kind != first.kind).map(|other| {
            ServerError::generic(format!(
                "collective calls don't match: rank {} asked for {:?}, rank {} for {:?} \
                     (every device makes the same collective calls in the same order)",
                first.rank, first.kind, other.rank, other.kind
            ))
        }),
        CallKind::Send { bytes: sent, .. } | CallKind::Recv { bytes: sent, .. } => {
            calls.iter().find_map(|other| match other.kind {
                CallKind::Send { bytes, .. } | CallKind::Recv { bytes, .. } if bytes != sent => {
                    Some(ServerError::generic(format!(
                        "send and recv don't match: rank {} has {sent} bytes, rank {} has \
                         {bytes}",
                        first.rank, other.rank
                    )))
                }
                _ => None,
            })
        }
        _ => None,
    }
}

type Registry = Mutex<HashMap<(TypeId, u64), Arc<dyn Any + Send + Sync>>>;

/// The process-wide group of communicator `id` for backend payload `P`, created with
/// `local` (which ranks are devices of this process) on first use.
///
/// # Errors
/// [`ServerError::Generic`] if the group exists with another number of ranks.
pub fn local_group<P: Send + 'static>(
    id: CommunicationId,
    local: Vec<bool>,
) -> Result<Arc<LocalGroup<P>>, ServerError> {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    let registry = REGISTRY.get_or_init(|| Mutex::new(HashMap::new()));
    let mut groups = registry.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (TypeId::of::<P>(), id.id);
    let entry = groups
        .entry(key)
        .or_insert_with(|| Arc::new(LocalGroup::<P>::new(local.clone())));
    let group = entry
        .clone()
        .downcast::<LocalGroup<P>>()
        .map_err(|_| ServerError::generic("a collective group has another payload type"))?;
    if group.local() != local.as_slice() {
        return Err(ServerError::generic(format!(
            "communicator {id:?} exists with {} ranks, asked for {}",
            group.ranks(),
            local.len()
        )));
    }
    Ok(group)
}

#[cfg(test)]
#[path = "local_group_tests.rs"]
mod tests;
