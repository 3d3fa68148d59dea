//! Out-of-bounds status words of checked launches.
//!
//! Every checked launch gets a 32-bit counter in device memory (a slot of its stream's
//! ring); the prelude's accessors add 1 to it for every out-of-bounds access. When a stream
//! is synced or read (or its ring fills), the used slots are copied to pinned host memory
//! and zeroed on the device, in stream order, and a [`StatusCheck`] goes to the completion
//! thread, which turns non-zero counters into `ServerError::OutOfBounds` for the kernels
//! that owned them, once the device got there.

use crate::context::CudaContext;
use crate::driver::{Context as _, DriverFailure};
use crate::staging::PinnedPool;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::{Bytes, ServerError, StreamId};
use cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use std::collections::HashMap;
use std::sync::Arc;

/// Slots per ring.
pub const SLOTS: usize = 1024;

struct Ring {
    device: CUdeviceptr,
    kernels: Vec<String>,
}

/// Counters copied back from the device, to be read once the copy completed.
pub struct StatusCheck {
    host: Bytes,
    kernels: Vec<String>,
    /// The stream whose launches these were.
    pub stream: StreamId,
}

impl StatusCheck {
    /// The out-of-bounds errors of the checked launches, in launch order.
    pub fn errors(&self) -> Vec<ServerError> {
        let counts = self.host.to_elems::<u32>();
        self.kernels
            .iter()
            .zip(counts)
            .filter(|(_, count)| *count > 0)
            .map(|(kernel, count)| ServerError::OutOfBounds {
                kernel: kernel.clone(),
                accesses: u64::from(count),
                first: "the device counts out-of-bounds accesses; launch in validate mode to \
                        print each one"
                    .to_string(),
                backtrace: BackTrace::capture(),
            })
            .collect()
    }
}

/// The status rings of a server's streams.
pub struct StatusRings {
    context: Arc<CudaContext>,
    rings: HashMap<StreamId, Ring>,
}

impl StatusRings {
    /// No rings yet; one is made per stream on its first checked launch.
    pub fn new(context: Arc<CudaContext>) -> Self {
        Self {
            context,
            rings: HashMap::new(),
        }
    }

    /// Whether `stream`'s ring has no free slot.
    pub fn is_full(&self, stream: StreamId) -> bool {
        self.rings
            .get(&stream)
            .is_some_and(|ring| ring.kernels.len() >= SLOTS)
    }

    /// A slot for a checked launch of `kernel` on `stream` (`cu_stream`): the device address
    /// of its counter. The ring must not be full (take a check first).
    ///
    /// # Errors
    /// The driver's error when the ring can't be allocated.
    pub fn slot(
        &mut self,
        stream: StreamId,
        cu_stream: CUstream,
        kernel: &str,
    ) -> Result<u64, DriverFailure> {
        if !self.rings.contains_key(&stream) {
            self.context.bind()?;
            let mut device: CUdeviceptr = 0;
            // SAFETY: valid out pointer; the context is current.
            unsafe { sys::cuMemAlloc_v2(&mut device, SLOTS * 4) }.during("cuMemAlloc")?;
            // SAFETY: `device` holds SLOTS * 4 bytes.
            unsafe { sys::cuMemsetD8Async(device, 0, SLOTS * 4, cu_stream) }
                .during("cuMemsetD8Async")?;
            self.rings.insert(
                stream,
                Ring {
                    device,
                    kernels: Vec::new(),
                },
            );
        }
        let ring = self.rings.get_mut(&stream).ok_or(DriverFailure {
            operation: "status ring",
            error: cudarc::driver::result::DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
        })?;
        let slot = ring.kernels.len().min(SLOTS - 1);
        if ring.kernels.len() < SLOTS {
            ring.kernels.push(kernel.to_string());
        }
        Ok(ring.device + (slot as u64) * 4)
    }

    /// Copies `stream`'s used counters to pinned memory and zeroes them, in stream order.
    /// `None` if no checked launch happened since the last check.
    ///
    /// # Errors
    /// The driver's error, or no pinned memory.
    pub fn take_check(
        &mut self,
        stream: StreamId,
        cu_stream: CUstream,
        pinned: &Arc<PinnedPool>,
    ) -> Result<Option<StatusCheck>, ServerError> {
        let Some(ring) = self.rings.get_mut(&stream) else {
            return Ok(None);
        };
        if ring.kernels.is_empty() {
            return Ok(None);
        }
        let used = ring.kernels.len();
        let mut host = pinned.take(used * 4)?;
        // SAFETY: `host` is pinned and holds `used * 4` bytes, kept alive by the check until
        // the completion thread has seen the copy finish; the device range is the ring's.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), ring.device, used * 4, cu_stream)
        }
        .during("cuMemcpyDtoHAsync")?;
        // SAFETY: zeroes the used part of the ring, after the copy in stream order.
        unsafe { sys::cuMemsetD8Async(ring.device, 0, used * 4, cu_stream) }
            .during("cuMemsetD8Async")?;
        Ok(Some(StatusCheck {
            host,
            kernels: std::mem::take(&mut ring.kernels),
            stream,
        }))
    }
}

impl StatusRings {
    /// The kernel names of `stream`'s used slots, leaving the slots allocated (a graph keeps
    /// them for every replay).
    pub fn take_names(&mut self, stream: StreamId) -> Vec<String> {
        self.rings
            .get_mut(&stream)
            .map(|ring| std::mem::take(&mut ring.kernels))
            .unwrap_or_default()
    }

    /// Like [`Self::take_check`] for slots whose names the caller keeps (a graph's): copies
    /// and zeroes `names.len()` slots of `ring_stream`, reporting on `report_stream`.
    ///
    /// # Errors
    /// The driver's error, or no pinned memory.
    pub fn check_names(
        &mut self,
        ring_stream: StreamId,
        report_stream: StreamId,
        cu_stream: CUstream,
        names: &[String],
        pinned: &Arc<PinnedPool>,
    ) -> Result<Option<StatusCheck>, ServerError> {
        let Some(ring) = self.rings.get(&ring_stream) else {
            return Ok(None);
        };
        let used = names.len().min(SLOTS);
        if used == 0 {
            return Ok(None);
        }
        let mut host = pinned.take(used * 4)?;
        // SAFETY: as in `take_check`.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), ring.device, used * 4, cu_stream)
        }
        .during("cuMemcpyDtoHAsync")?;
        // SAFETY: as in `take_check`.
        unsafe { sys::cuMemsetD8Async(ring.device, 0, used * 4, cu_stream) }
            .during("cuMemsetD8Async")?;
        Ok(Some(StatusCheck {
            host,
            kernels: names[..used].to_vec(),
            stream: report_stream,
        }))
    }

    /// Frees the ring of `stream`.
    pub fn remove(&mut self, stream: StreamId) {
        if let Some(ring) = self.rings.remove(&stream)
            && self.context.bind().is_ok()
        {
            // SAFETY: the ring was allocated once by `slot` and is freed once.
            unsafe { sys::cuMemFree_v2(ring.device) };
        }
    }
}

impl Drop for StatusRings {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            return;
        }
        for ring in self.rings.values() {
            // SAFETY: each ring was allocated once by `slot` and is freed once.
            unsafe { sys::cuMemFree_v2(ring.device) };
        }
    }
}
