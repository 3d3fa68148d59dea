//! Moving bytes between host and device.
//!
//! Uploads:
//! - from pinned `Bytes`: one DMA straight from the caller's buffer, which is kept alive
//!   (by the completion thread) until the copy is done;
//! - from pageable or file-backed `Bytes`: through a ring of pinned chunks, so the host copy
//!   of one chunk (spread over several threads) overlaps the DMA of the previous one.
//!
//! Downloads go into pinned buffers from the pool, handed to the caller as `Bytes` once the
//! copy completed (no extra host copy).
//!
//! Each side of a copy may be strided: dense rows with a row pitch use `cuMemcpy2DAsync`;
//! other layouts copy each contiguous run separately.
//!
//! [`Transfers`] is the server's part that owns what copies need (the pinned pool, the
//! staging ring, the copy threads). The server resolves the device memory (and orders it on
//! the stream) first and passes the device address, its streams and the stream id in; what
//! must outlive a queued copy is handed back to the server, which retires it through the
//! completion thread.

use crate::driver;
use crate::staging::PinnedPool;
use crate::streams::Streams;
use cubert_runtime::copy::{CopyDescriptor, for_each_run};
use cubert_runtime::{AllocationProperty, Bytes, IoError, ServerError, StreamId};
use cudarc::driver::sys::{CUDA_MEMCPY2D, CUdeviceptr, CUevent, CUmemorytype, CUstream};
use rayon::prelude::*;
use std::sync::Arc;

/// Bytes per staging chunk.
pub const CHUNK: usize = 32 << 20;
/// Chunks in the staging ring.
pub const RING_SLOTS: usize = 3;
/// Pageable upload sources of at least this many bytes are dropped on a copy thread.
const RELEASE_ELSEWHERE_FROM: usize = 64 << 20;
/// Host copies are split into pieces of this size across the copy threads.
const PIECE: usize = 4 << 20;

/// The ring of pinned chunks used for pageable uploads.
#[derive(Default)]
struct StagingRing {
    slots: Vec<(Bytes, Option<CUevent>)>,
    next: usize,
}

// SAFETY: CUevent handles are used only by the server that owns the ring.
unsafe impl Send for StagingRing {}

/// How a strided descriptor maps onto copies.
pub(crate) enum CopyShape {
    Contiguous,
    Pitched {
        width: usize,
        height: usize,
        pitch: usize,
    },
    Runs,
}

pub(crate) fn classify(descriptor: &CopyDescriptor) -> CopyShape {
    if descriptor.is_contiguous() {
        return CopyShape::Contiguous;
    }
    let (shape, strides, elem) = (&descriptor.shape, &descriptor.strides, descriptor.elem_size);
    let rank = shape.len();
    if rank >= 2 && strides[rank - 1] == 1 {
        let outer_dense = (0..rank - 2).all(|i| strides[i] == strides[i + 1] * shape[i + 1]);
        if outer_dense {
            return CopyShape::Pitched {
                width: shape[rank - 1] * elem,
                height: shape[..rank - 1].iter().product(),
                pitch: strides[rank - 2] * elem,
            };
        }
    }
    CopyShape::Runs
}

/// Copies `src` into `dst` on the copy threads.
pub(crate) fn parallel_copy(pool: &rayon::ThreadPool, dst: &mut [u8], src: &[u8]) {
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    pool.install(|| {
        dst.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
}

/// Queues the copies of `host` (dense bytes) to the place `descriptor` describes.
fn copy_to_device(
    descriptor: &CopyDescriptor,
    device: CUdeviceptr,
    host: &[u8],
    stream: CUstream,
) -> Result<(), ServerError> {
    match classify(descriptor) {
        CopyShape::Contiguous => {
            // SAFETY: `host` and the device range hold `host.len()` bytes (validated);
            // the caller keeps `host` alive until the copy completes.
            unsafe { driver::copy::htod_async(device, host.as_ptr().cast(), host.len(), stream) }?;
        }
        CopyShape::Pitched {
            width,
            height,
            pitch,
        } => {
            let copy = CUDA_MEMCPY2D {
                srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
                srcHost: host.as_ptr().cast(),
                srcPitch: width,
                dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstDevice: device,
                dstPitch: pitch,
                WidthInBytes: width,
                Height: height,
                ..zeroed_copy()
            };
            // SAFETY: the descriptor was validated against the device range; `host`
            // holds width * height bytes and outlives the copy.
            unsafe { driver::copy::copy_2d_async(&copy, stream) }?;
        }
        CopyShape::Runs => {
            let mut result = Ok(());
            for_each_run(
                &descriptor.shape,
                &descriptor.strides,
                descriptor.elem_size,
                |device_offset, host_offset, len| {
                    if result.is_ok() {
                        // SAFETY: each run lies inside the validated ranges.
                        result = unsafe {
                            driver::copy::htod_async(
                                device + device_offset as u64,
                                host[host_offset..].as_ptr().cast(),
                                len,
                                stream,
                            )
                        };
                    }
                },
            );
            result?;
        }
    }
    Ok(())
}

/// Queues the copies from the place `descriptor` describes into `host` (dense).
fn copy_to_host(
    descriptor: &CopyDescriptor,
    device: CUdeviceptr,
    host: &mut [u8],
    stream: CUstream,
) -> Result<(), ServerError> {
    match classify(descriptor) {
        CopyShape::Contiguous => {
            // SAFETY: as in `copy_to_device`, in the other direction.
            unsafe {
                driver::copy::dtoh_async(host.as_mut_ptr().cast(), device, host.len(), stream)
            }?;
        }
        CopyShape::Pitched {
            width,
            height,
            pitch,
        } => {
            let copy = CUDA_MEMCPY2D {
                srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcDevice: device,
                srcPitch: pitch,
                dstMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
                dstHost: host.as_mut_ptr().cast(),
                dstPitch: width,
                WidthInBytes: width,
                Height: height,
                ..zeroed_copy()
            };
            // SAFETY: as in `copy_to_device`, in the other direction.
            unsafe { driver::copy::copy_2d_async(&copy, stream) }?;
        }
        CopyShape::Runs => {
            let mut result = Ok(());
            let base = host.as_mut_ptr();
            for_each_run(
                &descriptor.shape,
                &descriptor.strides,
                descriptor.elem_size,
                |device_offset, host_offset, len| {
                    if result.is_ok() {
                        // SAFETY: each run lies inside the validated ranges.
                        result = unsafe {
                            driver::copy::dtoh_async(
                                base.add(host_offset).cast(),
                                device + device_offset as u64,
                                len,
                                stream,
                            )
                        };
                    }
                },
            );
            result?;
        }
    }
    Ok(())
}

/// Checks an upload of `data` to the place `descriptor` describes, before anything is
/// resolved, and returns its dense size.
///
/// # Errors
/// An invalid descriptor, or `data` of another size.
pub(crate) fn upload_size(descriptor: &CopyDescriptor, data: &Bytes) -> Result<usize, ServerError> {
    let dense = descriptor.validate()?;
    if dense != data.len() {
        return Err(IoError::invalid(format!(
            "writing {} bytes into a tensor of {dense} bytes",
            data.len()
        ))
        .into());
    }
    Ok(dense)
}

/// The server's part that moves bytes between host and device. See the module docs.
pub(crate) struct Transfers {
    pinned: Arc<PinnedPool>,
    ring: StagingRing,
    copy_pool: Arc<rayon::ThreadPool>,
}

impl Transfers {
    /// Transfers through `pinned`, with `copy_threads` host copy threads (0: one per core,
    /// at most 8) named after device `device_index`.
    ///
    /// # Errors
    /// The copy threads could not be started.
    pub(crate) fn new(
        pinned: Arc<PinnedPool>,
        copy_threads: u64,
        device_index: u32,
    ) -> Result<Self, ServerError> {
        let copy_threads = match copy_threads {
            0 => std::thread::available_parallelism()
                .map(|n| n.get().min(8))
                .unwrap_or(4),
            threads => threads as usize,
        };
        let copy_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(copy_threads)
            .thread_name(move |i| format!("cubert-cuda{device_index}-copy{i}"))
            .build()
            .map_err(|error| ServerError::generic(format!("can't start copy threads: {error}")))?;
        Ok(Self {
            pinned,
            ring: StagingRing::default(),
            copy_pool: Arc::new(copy_pool),
        })
    }

    /// The host copy threads.
    pub(crate) fn copy_pool(&self) -> Arc<rayon::ThreadPool> {
        self.copy_pool.clone()
    }

    /// A pinned buffer of `size` bytes from the pool.
    ///
    /// # Errors
    /// Pinned memory could not be allocated.
    pub(crate) fn staging(&self, size: usize) -> Result<Bytes, IoError> {
        self.pinned.take(size)
    }

    /// Frees the pinned memory cached for reuse.
    pub(crate) fn trim(&self) {
        self.pinned.trim();
    }

    /// Uploads `data` (dense, of the size [`upload_size`] checked) to the place `descriptor`
    /// describes at `device`, on `stream`. Returns the pinned source the queued DMA reads:
    /// it must live until `stream` has passed this point.
    pub(crate) fn upload(
        &mut self,
        descriptor: &CopyDescriptor,
        device: CUdeviceptr,
        data: Bytes,
        streams: &mut Streams,
        stream: StreamId,
    ) -> Result<Option<Bytes>, ServerError> {
        let raw = streams.raw(stream)?;
        let data = if data.property() == AllocationProperty::Pinned {
            data
        } else if descriptor.is_contiguous() {
            let result = self.upload_chunked(device, &data, streams, stream);
            streams.bump(stream);
            self.release_source(data);
            return result.map(|()| None);
        } else {
            let mut pinned = self.pinned.take(data.len())?;
            parallel_copy(&self.copy_pool, &mut pinned, &data);
            self.release_source(data);
            pinned
        };
        copy_to_device(descriptor, device, &data, raw)?;
        streams.bump(stream);
        Ok(Some(data))
    }

    /// Drops the pageable source of an upload once its bytes are staged. A large one is
    /// dropped on a copy thread: giving a gigabyte of heap pages back to the system takes
    /// tens of milliseconds (about as long as the copy itself), which would otherwise hold
    /// up the runner and everything queued behind the upload.
    fn release_source(&self, data: Bytes) {
        if data.len() >= RELEASE_ELSEWHERE_FROM {
            self.copy_pool.spawn(move || drop(data));
        }
    }

    /// Uploads pageable bytes through the ring of pinned chunks.
    fn upload_chunked(
        &mut self,
        device: CUdeviceptr,
        data: &[u8],
        streams: &mut Streams,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let raw = streams.raw(stream)?;
        if self.ring.slots.is_empty() {
            for _ in 0..RING_SLOTS {
                match self.pinned.take(CHUNK) {
                    Ok(chunk) => self.ring.slots.push((chunk, None)),
                    Err(error) => {
                        tracing::debug!(
                            "no pinned staging ({error}); uploading from pageable memory"
                        );
                        break;
                    }
                }
            }
        }
        if self.ring.slots.is_empty() {
            // No pinned memory at all: the driver stages pageable memory itself.
            // SAFETY: `data` holds the bytes; a pageable source is consumed before return.
            unsafe { driver::copy::htod_async(device, data.as_ptr().cast(), data.len(), raw) }?;
            return Ok(());
        }
        let slots = self.ring.slots.len();
        for (index, piece) in data.chunks(CHUNK).enumerate() {
            let slot = self.ring.next;
            self.ring.next = (slot + 1) % slots;
            if let Some(event) = self.ring.slots[slot].1.take() {
                // The DMA of this chunk's previous use must be done before overwriting it.
                // SAFETY: an event recorded on a stream of this context.
                let waited = unsafe { driver::event::synchronize(event) };
                streams.events().give_back(event);
                waited?;
            }
            let chunk = &mut self.ring.slots[slot].0;
            parallel_copy(&self.copy_pool, &mut chunk[..piece.len()], piece);
            let offset = (index * CHUNK) as u64;
            // SAFETY: the chunk is pinned and holds the piece; the device range was
            // validated; the chunk is not reused before the event below completes.
            unsafe {
                driver::copy::htod_async(device + offset, chunk.as_ptr().cast(), piece.len(), raw)
            }?;
            let event = streams.record(stream)?;
            self.ring.slots[slot].1 = Some(event);
        }
        Ok(())
    }

    /// Queues the download of the place `descriptor` describes at `device` (`dense` bytes,
    /// validated) on raw stream `raw`, into a pinned buffer (a zeroed one if no pinned
    /// memory is left). It holds the data once the stream has passed this point.
    pub(crate) fn download(
        &self,
        descriptor: &CopyDescriptor,
        dense: usize,
        device: CUdeviceptr,
        raw: CUstream,
    ) -> Result<Bytes, ServerError> {
        let mut host = match self.pinned.take(dense) {
            Ok(pinned) => pinned,
            Err(_) => Bytes::try_zeroed(dense)?,
        };
        if dense > 0 {
            copy_to_host(descriptor, device, &mut host, raw)?;
        }
        Ok(host)
    }
}

fn zeroed_copy() -> CUDA_MEMCPY2D {
    CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: 0,
        Height: 0,
    }
}
