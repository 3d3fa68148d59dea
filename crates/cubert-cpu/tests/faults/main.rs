//! Fault injection on the CPU backend. After each fault the runtime must return an error
//! (never panic or abort), keep serving the same client, its other streams and other
//! clients, and keep every byte it already held.
//!
//! - Storage allocation failures at every allocation site of the memory manager, through a
//!   `cubert_cpu::fault::FaultPlan`: the first segment of the small pool, a new segment of the small pool, a
//!   shared mid-size segment and a dedicated segment of the large pool, a persistent block,
//!   the retry after giving back cached memory, and the exact-size retry. Each site is
//!   failed at least once; the sites hit are counted and checked from the storage's log.
//! - Random storage failures (one attempt in four) under a random workload, while a clean
//!   client on another device works in parallel.
//! - Kernels that panic, return an error, or can't be built; a task that panics on the
//!   runner thread.
//! - Reads and launches with handles whose memory is gone (never allocated, or owned by a
//!   server that was dropped).
//!
//! The tests are in `storage` and `kernels`; `support` has their helpers. Each test prints
//! its figures (faults injected, recovered) to standard error; run with `--nocapture` to see
//! them. docs/reliability.md records them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod kernels;
mod storage;
mod support;
