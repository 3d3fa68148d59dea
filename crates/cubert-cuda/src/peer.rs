//! Peer copies: `to_client` from one GPU to another without a host round trip.
//!
//! The runtime's three-step handshake (see `cubert_runtime::server` communication docs),
//! on CUDA:
//!
//! 1. **source** ([`source_layout`], then [`DevicePeerSource::record`] once the server has
//!    ordered the source memory on its stream): records an event there ("the bytes are
//!    written");
//! 2. **destination** ([`pull`]): enables peer access from its context
//!    to the source's (once per pair: `cuCtxEnablePeerAccess`), makes its stream wait for
//!    that event, queues `cuMemcpyPeerAsync` (or `cuMemcpy3DPeerAsync` for a pitched source)
//!    into the new allocation on its own stream, and records an event ("the bytes are
//!    read");
//! 3. **source** ([`release`]): its stream waits for that event, so neither a later write
//!    nor the reuse of freed source memory overtakes the copy.
//!
//! The host never waits for the device. Devices reach each other when
//! `cuDeviceCanAccessPeer` says so (or when both are the same GPU); otherwise, or with
//! `[cuda] peer_copy = false` (`CUBERT_CUDA_PEER_COPY=false`, to test the other path),
//! `to_client` goes through pinned host memory. Page-mapped memory (the growable and paged
//! pools) is granted to its own device when mapped; step 1 grants the destination GPU
//! access to it (`CudaStorage::grant_reader`, once per pair of GPUs), without which the
//! driver would stage the copy at a tenth of the speed.
//!
//! The server (its `ServerCommunication`, in `server/communication.rs`) checks its health,
//! binds its context, and resolves the memory and orders it on its stream; the steps here
//! take the resolved memory and the server's context and streams as arguments.

use crate::context::CudaContext;
use crate::device::CudaInfo;
use crate::driver;
use crate::storage::CudaResource;
use crate::streams::{EventPool, Streams};
use crate::transfer::{CopyShape, classify};
use cubert_runtime::copy::CopyDescriptor;
use cubert_runtime::{Binding, ServerError, StreamId};
use cudarc::driver::sys::{CUDA_MEMCPY3D_PEER, CUdeviceptr, CUevent, CUmemorytype};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// How the source bytes lie.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    Contiguous {
        bytes: usize,
    },
    Pitched {
        width: usize,
        height: usize,
        pitch: usize,
    },
}

/// What the source hands the destination (step 1).
pub struct DevicePeerSource {
    context: Arc<CudaContext>,
    ptr: CUdeviceptr,
    layout: Layout,
    ready: Option<CUevent>,
    events: Arc<EventPool>,
    _binding: Binding,
}

// SAFETY: the handles belong to the source context, which the destination binds or names
// explicitly (`cuMemcpyPeerAsync` takes both contexts); the binding keeps the source memory
// allocated and the caller keeps the source server alive for the whole `to_client`.
unsafe impl Send for DevicePeerSource {}

impl Drop for DevicePeerSource {
    fn drop(&mut self) {
        if let Some(event) = self.ready.take() {
            self.events.give_back(event);
        }
    }
}

/// What the destination hands back (step 2): an event after the copy.
pub struct DevicePeerReceipt {
    done: Option<CUevent>,
    events: Arc<EventPool>,
}

// SAFETY: an event may be waited on from any context; its pool is thread-safe.
unsafe impl Send for DevicePeerReceipt {}

impl Drop for DevicePeerReceipt {
    fn drop(&mut self) {
        if let Some(event) = self.done.take() {
            self.events.give_back(event);
        }
    }
}

/// Whether GPUs `from` and `to` can copy directly (asked once per pair).
fn can_access_peer(from: u32, to: u32) -> bool {
    if from == to {
        return true;
    }
    static ANSWERS: OnceLock<Mutex<HashMap<(u32, u32), bool>>> = OnceLock::new();
    let answers = ANSWERS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut answers = answers.lock().unwrap_or_else(PoisonError::into_inner);
    *answers.entry((from, to)).or_insert_with(|| {
        let device = |ordinal: u32| driver::device::get(ordinal).ok();
        let (Some(a), Some(b)) = (device(to), device(from)) else {
            return false;
        };
        driver::device::can_access_peer(a, b).unwrap_or(false)
    })
}

/// Whether `to_client` from `src`'s GPU to `dst`'s copies directly.
pub fn peer_copy_supported(src: &CudaInfo, dst: &CudaInfo) -> bool {
    src.peer_copy && dst.peer_copy && can_access_peer(src.ordinal, dst.ordinal)
}

/// Lets `accessing` (current on this thread) read `peer`'s memory, once per pair of
/// contexts.
fn enable_peer_access(accessing: &CudaContext, peer: &CudaContext) -> Result<(), ServerError> {
    if accessing.ordinal() == peer.ordinal() {
        return Ok(());
    }
    static ENABLED: OnceLock<Mutex<HashSet<(usize, usize)>>> = OnceLock::new();
    let enabled = ENABLED.get_or_init(|| Mutex::new(HashSet::new()));
    let mut enabled = enabled.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (accessing.raw() as usize, peer.raw() as usize);
    if enabled.contains(&key) {
        return Ok(());
    }
    // SAFETY: `accessing` is current (the caller bound it); `peer` is a live context.
    // Access already enabled (by NCCL, say) counts as success.
    unsafe { driver::context::enable_peer_access(peer.raw()) }?;
    enabled.insert(key);
    Ok(())
}

/// Step 1 on the source, before anything is resolved: how the bytes `descriptor` describes
/// lie, `None` for layouts other than dense or row-pitched.
///
/// # Errors
/// An invalid descriptor.
pub(crate) fn source_layout(descriptor: &CopyDescriptor) -> Result<Option<Layout>, ServerError> {
    descriptor.validate()?;
    let layout = match classify(descriptor) {
        CopyShape::Contiguous => Layout::Contiguous {
            bytes: descriptor.validate()?,
        },
        CopyShape::Pitched {
            width,
            height,
            pitch,
        } => Layout::Pitched {
            width,
            height,
            pitch,
        },
        CopyShape::Runs => return Ok(None),
    };
    Ok(Some(layout))
}

impl DevicePeerSource {
    /// Step 1 on the source, once the server has ordered the memory of `binding` (at `ptr`,
    /// lying as `layout`) on `stream`: records there the event the destination waits for.
    ///
    /// # Errors
    /// The driver's error.
    pub(crate) fn record(
        context: &Arc<CudaContext>,
        streams: &mut Streams,
        stream: StreamId,
        ptr: CUdeviceptr,
        layout: Layout,
        binding: Binding,
    ) -> Result<Self, ServerError> {
        let ready = streams.record(stream)?;
        Ok(Self {
            context: context.clone(),
            ptr,
            layout,
            ready: Some(ready),
            events: streams.events().clone(),
            _binding: binding,
        })
    }
}

/// Step 2 on the destination: the copy of `source` into `dst` (resolved and ordered on
/// `stream` by the server, whose context `context` is bound).
///
/// # Errors
/// A target smaller than the source, or the driver's error.
pub(crate) fn pull(
    mut source: DevicePeerSource,
    dst: &CudaResource,
    context: &CudaContext,
    streams: &mut Streams,
    stream: StreamId,
) -> Result<DevicePeerReceipt, ServerError> {
    enable_peer_access(context, &source.context)?;
    let raw = streams.raw(stream)?;
    if let Some(ready) = source.ready.take() {
        // SAFETY: live stream of this context and live event of the source context
        // (a stream may wait on another context's event); the wait is captured now.
        let waited = unsafe { driver::stream::wait_event(raw, ready) };
        source.events.give_back(ready);
        waited?;
    }
    match source.layout {
        Layout::Contiguous { bytes } => {
            if bytes as u64 > dst.size {
                return Err(ServerError::generic(format!(
                    "peer copy of {bytes} bytes into {} bytes",
                    dst.size
                )));
            }
            // SAFETY: both ranges hold `bytes` bytes of live device memory of their
            // contexts (validated descriptor, resolved target); the source stays
            // allocated until step 3 orders its stream after this copy.
            unsafe {
                driver::copy::peer_async(
                    dst.ptr,
                    context.raw(),
                    source.ptr,
                    source.context.raw(),
                    bytes,
                    raw,
                )
            }?;
        }
        Layout::Pitched {
            width,
            height,
            pitch,
        } => {
            if (width * height) as u64 > dst.size {
                return Err(ServerError::generic("peer copy larger than its target"));
            }
            // Every field spelled out: `CUmemorytype` has no zero value, so an all-zero
            // struct would be invalid.
            let copy = CUDA_MEMCPY3D_PEER {
                srcXInBytes: 0,
                srcY: 0,
                srcZ: 0,
                srcLOD: 0,
                srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: source.ptr,
                srcArray: std::ptr::null_mut(),
                srcContext: source.context.raw(),
                srcPitch: pitch,
                srcHeight: height,
                dstXInBytes: 0,
                dstY: 0,
                dstZ: 0,
                dstLOD: 0,
                dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: dst.ptr,
                dstArray: std::ptr::null_mut(),
                dstContext: context.raw(),
                dstPitch: width,
                dstHeight: height,
                WidthInBytes: width,
                Height: height,
                Depth: 1,
            };
            // SAFETY: the descriptor was validated against the source binding (rows of
            // `width` bytes `pitch` apart); the target holds width * height bytes.
            unsafe { driver::copy::copy_3d_peer_async(&copy, raw) }?;
        }
    }
    streams.bump(stream);
    let done = streams.record(stream)?;
    Ok(DevicePeerReceipt {
        done: Some(done),
        events: streams.events().clone(),
    })
}

/// Step 3 on the source (its context bound): `stream` waits until the copy has read the
/// source.
///
/// # Errors
/// The driver's error.
pub(crate) fn release(
    mut receipt: DevicePeerReceipt,
    streams: &mut Streams,
    stream: StreamId,
) -> Result<(), ServerError> {
    let raw = streams.raw(stream)?;
    let Some(done) = receipt.done.take() else {
        return Ok(());
    };
    // SAFETY: live stream of this context and live event of the destination's
    // (cross-context waits are allowed); captured now, so the event can go back.
    let waited = unsafe { driver::stream::wait_event(raw, done) };
    receipt.events.give_back(done);
    streams.bump(stream);
    waited.map_err(Into::into)
}
