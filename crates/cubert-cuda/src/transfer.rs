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

use crate::completion::Reply;
use crate::driver;
use crate::server::CudaServer;
use cubert_runtime::copy::{CopyDescriptor, for_each_run};
use cubert_runtime::{AllocationProperty, Bytes, IoError, ServerError, StreamId};
use cudarc::driver::sys::{CUDA_MEMCPY2D, CUdeviceptr, CUevent, CUmemorytype, CUstream};
use rayon::prelude::*;

/// Bytes per staging chunk.
pub const CHUNK: usize = 32 << 20;
/// Chunks in the staging ring.
pub const RING_SLOTS: usize = 3;
/// Host copies are split into pieces of this size across the copy threads.
const PIECE: usize = 4 << 20;

/// The ring of pinned chunks used for pageable uploads.
#[derive(Default)]
pub struct StagingRing {
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
fn parallel_copy(pool: &rayon::ThreadPool, dst: &mut [u8], src: &[u8]) {
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

impl CudaServer {
    /// Queues the copies of `host` (dense bytes) to the place `descriptor` describes.
    fn copy_to_device(
        &self,
        descriptor: &CopyDescriptor,
        device: CUdeviceptr,
        host: &[u8],
        stream: CUstream,
    ) -> Result<(), ServerError> {
        match classify(descriptor) {
            CopyShape::Contiguous => {
                // SAFETY: `host` and the device range hold `host.len()` bytes (validated);
                // the caller keeps `host` alive until the copy completes.
                unsafe {
                    driver::copy::htod_async(device, host.as_ptr().cast(), host.len(), stream)
                }?;
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
        &self,
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

    /// Uploads `data` (dense) to the place `descriptor` describes, on `stream`.
    pub(crate) fn upload(
        &mut self,
        descriptor: &CopyDescriptor,
        data: Bytes,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let dense = descriptor.validate()?;
        if dense != data.len() {
            return Err(IoError::invalid(format!(
                "writing {} bytes into a tensor of {dense} bytes",
                data.len()
            ))
            .into());
        }
        if dense == 0 {
            return Ok(());
        }
        self.refuse_if_capturing(stream)?;
        let resource = self.resolve(&descriptor.handle)?;
        self.use_on(descriptor.handle.id(), stream)?;
        let raw = self.streams.raw(stream)?;
        let data = if data.property() == AllocationProperty::Pinned {
            data
        } else if descriptor.is_contiguous() {
            let result = self.upload_chunked(resource.ptr, &data, stream);
            self.streams.bump(stream);
            return result;
        } else {
            let mut pinned = self.pinned.take(dense)?;
            parallel_copy(&self.copy_pool, &mut pinned, &data);
            pinned
        };
        self.copy_to_device(descriptor, resource.ptr, &data, raw)?;
        self.streams.bump(stream);
        // The pinned source must live until the DMA has read it.
        self.submit_job(stream, Reply::Retire(Box::new(data)))
    }

    /// Uploads pageable bytes through the ring of pinned chunks.
    fn upload_chunked(
        &mut self,
        device: CUdeviceptr,
        data: &[u8],
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let raw = self.streams.raw(stream)?;
        if self.ring.slots.is_empty() {
            for _ in 0..RING_SLOTS {
                match self.pinned.take(CHUNK) {
                    Ok(chunk) => self.ring.slots.push((chunk, None)),
                    Err(error) => {
                        log::debug!("no pinned staging ({error}); uploading from pageable memory");
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
                self.streams.events().give_back(event);
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
            let event = self.streams.record(stream)?;
            self.ring.slots[slot].1 = Some(event);
        }
        Ok(())
    }

    /// Queues the downloads of `descriptors` into pinned buffers, returned in order. They
    /// hold the data once `stream` has passed this point.
    pub(crate) fn download(
        &mut self,
        descriptors: &[CopyDescriptor],
        stream: StreamId,
    ) -> Result<Vec<Bytes>, ServerError> {
        self.refuse_if_capturing(stream)?;
        let raw = self.streams.raw(stream)?;
        let mut buffers = Vec::with_capacity(descriptors.len());
        for descriptor in descriptors {
            let dense = descriptor.validate()?;
            let resource = self.resolve(&descriptor.handle)?;
            self.use_on(descriptor.handle.id(), stream)?;
            let mut host = match self.pinned.take(dense) {
                Ok(pinned) => pinned,
                Err(_) => Bytes::try_zeroed(dense)?,
            };
            if dense > 0 {
                self.copy_to_host(descriptor, resource.ptr, &mut host, raw)?;
            }
            buffers.push(host);
        }
        self.streams.bump(stream);
        Ok(buffers)
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
