//! Creating device memory: uploads (`create*`), empty allocations (`empty*`) and pinned
//! staging.
//!
//! Handles are minted on the caller's thread by the layout policy; the allocation (and the
//! upload) is queued through `DeviceHandle::allocate`/`allocate_then`/`allocate_then_write`,
//! the one way every allocation reaches `ComputeServer::allocate`, and the call returns at
//! once (where the backend runs small uploads on an idle device's caller, the CPU, once the
//! data is written: [`CALLER_WRITTEN_BELOW`]). Problems the
//! caller can fix (a zero-size or impossible allocation, data that doesn't match its shape)
//! are returned right away; a device that runs out of memory reports it at the next
//! `flush`/`sync`/`read`.

use super::ComputeClient;
use crate::bytes::{AllocationProperty, Bytes};
use crate::copy::CopyDescriptor;
use crate::error::IoError;
use crate::handle::Handle;
use crate::layout::{MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutPolicy};
use crate::runtime::Runtime;
use crate::server::{CallerWork, ComputeServer};
use crate::shape::Shape;

/// Host data smaller than this is copied into pinned staging on the caller's thread before
/// its upload is queued (where the backend has pinned memory): the call can then return, or
/// give a borrowed slice back, at once. Larger data is read by the backend's own upload, whose
/// host copies run on several threads and overlap the DMA: one thread copies a gigabyte at a
/// quarter of that speed.
pub const STAGED_BELOW: usize = 64 << 20;

/// On a backend without pinned memory (the CPU, wgpu), a slice smaller than this whose
/// upload would wait in the device's queue (and any slice under a kilobyte) is copied to
/// the heap on the caller's thread, so that `create_from_slice` returns at once instead of
/// waiting for the queue to read the caller's memory. The wait is a thread
/// hand-off each way; on this repository's 2-core VM an upload and drop took 19.7 µs at
/// 16 bytes and 14.2 / 15.5 µs at 128 / 256 KiB read in place, 1.4 µs and 8.2 / 10.0 µs
/// copied; at 1 MiB the two were even (`cargo bench -p cubert-cpu --bench alloc_pair`).
pub const HEAP_COPIED_BELOW: usize = 256 << 10;

/// Where the backend runs uploads on its callers (`CallerWork::Upload`: the CPU) and its
/// runner is idle, `create*` of owned data smaller than this writes it into the new memory
/// on the caller's thread: the allocation and a `memcpy` cost less than the hand-offs of
/// queuing them. Larger owned data is queued, so that the call returns without waiting for
/// its copy. Slices (`create_from_slice`, `create_tensor_from_slice`) are written on the
/// caller at any size, since their caller waits for the copy in any case (or has just made
/// one; from a kilobyte up the write reads the caller's slice itself). On this repository's
/// 2-core VM an upload and drop of a slice of 16 B / 128 KiB / 256 KiB / 1 MiB took 1.02 /
/// 48-66 / 23 / 115 µs queued and 0.34 / 3.6-3.7 / 6.8 / 38-41 µs written on the caller
/// (`cargo bench -p cubert-cpu --bench alloc_pair`, `docs/benchmarks.md`).
pub const CALLER_WRITTEN_BELOW: usize = 64 << 10;

impl<R: Runtime> ComputeClient<R> {
    /// Mints the layouts of `descriptors` and queues their allocation and the writes of
    /// `data`; where the backend runs uploads on its callers (`CallerWork::Upload`) and the
    /// runner is idle, data of fewer than `written_on_caller_below` bytes in all is written
    /// on this thread instead.
    fn do_create(
        &self,
        descriptors: Vec<MemoryLayoutDescriptor>,
        mut data: Vec<Bytes>,
        file_only_staging: bool,
        written_on_caller_below: usize,
    ) -> Result<Vec<MemoryLayout>, IoError> {
        if descriptors.len() != data.len() {
            return Err(IoError::invalid(format!(
                "{} descriptors but {} buffers of data",
                descriptors.len(),
                data.len()
            )));
        }
        for (descriptor, bytes) in descriptors.iter().zip(&data) {
            let expected = descriptor
                .shape
                .num_elements()
                .and_then(|n| n.checked_mul(descriptor.elem_size));
            if expected != Some(bytes.len()) {
                return Err(IoError::invalid(format!(
                    "the data has {} bytes but shape {:?} of {}-byte elements needs {}",
                    bytes.len(),
                    descriptor.shape.as_slice(),
                    descriptor.elem_size,
                    expected
                        .map_or_else(|| "more than fits in memory".to_string(), |n| n.to_string())
                )));
            }
        }
        let _span = crate::tracing_gate::listened(log::Level::Debug).then(|| {
            tracing::debug_span!(
                target: "cubert::transfer",
                "upload",
                bytes = data.iter().map(Bytes::len).sum::<usize>()
            )
            .entered()
        });
        let stream = self.stream_id();
        let (base, layouts) = self.utilities.layout_policy.apply(stream, &descriptors)?;
        self.staging(data.iter_mut(), file_only_staging);
        let writes: Vec<(CopyDescriptor, Bytes)> = descriptors
            .into_iter()
            .zip(&layouts)
            .zip(data)
            .map(|((descriptor, layout), bytes)| {
                (
                    CopyDescriptor::new(
                        layout.memory.to_binding(),
                        descriptor.shape,
                        layout.strides.clone(),
                        descriptor.elem_size,
                    ),
                    bytes,
                )
            })
            .collect();
        let total: usize = writes.iter().map(|(_, bytes)| bytes.len()).sum();
        // The writes hold bindings of the memory, so it can't be released before they ran.
        let write = move |server: &mut R::Server| server.write(writes, stream);
        if total < written_on_caller_below {
            self.device
                .allocate_then_write(base.id(), base.size(), stream, write);
        } else {
            self.device
                .allocate_then(base.id(), base.size(), stream, write);
        }
        Ok(layouts)
    }

    fn do_empty(
        &self,
        descriptors: &[MemoryLayoutDescriptor],
    ) -> Result<Vec<MemoryLayout>, IoError> {
        let stream = self.stream_id();
        let (base, layouts) = self.utilities.layout_policy.apply(stream, descriptors)?;
        // Only the id is queued, as by `empty`.
        self.device.allocate(base.id(), base.size(), stream);
        Ok(layouts)
    }

    fn single(mut layouts: Vec<MemoryLayout>) -> Result<MemoryLayout, IoError> {
        layouts
            .pop()
            .ok_or_else(|| IoError::invalid("the layout policy returned no layout"))
    }

    /// Uploads `data` into new device memory and returns its handle. Returns at once: the
    /// upload is queued on the client's stream, before the work queued after it.
    ///
    /// ```
    /// # use cubert_runtime::{Bytes, IoError};
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.create(Bytes::from_elems(vec![1u32, 2, 3]))?;
    /// assert_eq!(handle.size(), 12);
    /// assert_eq!(client.read_one(handle)?.to_elems::<u32>(), vec![1, 2, 3]);
    ///
    /// let nothing = Bytes::from_elems(Vec::<u32>::new());
    /// assert!(matches!(client.create(nothing), Err(IoError::InvalidArgument { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for empty data, [`IoError::BufferTooBig`] if it can never
    /// fit on the device.
    pub fn create(&self, data: Bytes) -> Result<Handle, IoError> {
        let shape = Shape::from([data.len()]);
        let layouts = self.do_create(
            vec![MemoryLayoutDescriptor::contiguous(shape, 1)],
            vec![data],
            true,
            CALLER_WRITTEN_BELOW,
        )?;
        Self::single(layouts).map(|layout| layout.memory)
    }

    /// Copies `slice` into new device memory. A small slice is copied on the caller's
    /// thread and this returns at once: into pinned staging below [`STAGED_BELOW`] bytes
    /// where the backend has pinned memory (CUDA), to the heap below [`HEAP_COPIED_BELOW`]
    /// where it has none (the CPU, wgpu). A larger one is read in place by the upload, so
    /// this returns once the device's queue has read it: unlike [`Self::create`], it waits
    /// for the work queued before it. On the CPU with nothing queued, the slice is written
    /// into its memory on this thread, at any size.
    ///
    /// # Errors
    /// As [`Self::create`].
    pub fn create_from_slice(&self, slice: &[u8]) -> Result<Handle, IoError> {
        let layouts = self.upload_slice(slice, |bytes| {
            self.do_create(
                vec![MemoryLayoutDescriptor::contiguous([slice.len()], 1)],
                vec![bytes],
                false,
                usize::MAX,
            )
        })?;
        Self::single(layouts).map(|layout| layout.memory)
    }

    /// Uploads a tensor of `shape` with `elem_size`-byte elements. The device chooses the
    /// layout (rows may be pitched): index it with the returned strides, and read it back
    /// with [`Self::read_tensor`].
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] if `data` doesn't hold exactly the shape's bytes or the
    /// shape is empty; [`IoError::BufferTooBig`] if it can never fit.
    pub fn create_tensor(
        &self,
        data: Bytes,
        shape: impl Into<Shape>,
        elem_size: usize,
    ) -> Result<MemoryLayout, IoError> {
        let layouts = self.do_create(
            vec![MemoryLayoutDescriptor::optimized(shape, elem_size)],
            vec![data],
            true,
            CALLER_WRITTEN_BELOW,
        )?;
        Self::single(layouts)
    }

    /// Like [`Self::create_tensor`], reading `slice` as [`Self::create_from_slice`] does (a
    /// large one in place, so the call waits for the queue to read it).
    ///
    /// # Errors
    /// As [`Self::create_tensor`].
    pub fn create_tensor_from_slice(
        &self,
        slice: &[u8],
        shape: impl Into<Shape>,
        elem_size: usize,
    ) -> Result<MemoryLayout, IoError> {
        let descriptor = MemoryLayoutDescriptor::optimized(shape, elem_size);
        let layouts = self.upload_slice(slice, |bytes| {
            self.do_create(vec![descriptor], vec![bytes], false, usize::MAX)
        })?;
        Self::single(layouts)
    }

    /// Uploads several tensors into one allocation; returns one layout per tensor.
    ///
    /// # Errors
    /// As [`Self::create_tensor`], for any of the tensors (nothing is created then).
    pub fn create_tensors(
        &self,
        descriptors: Vec<(MemoryLayoutDescriptor, Bytes)>,
    ) -> Result<Vec<MemoryLayout>, IoError> {
        let (descriptors, data) = descriptors.into_iter().unzip();
        self.do_create(descriptors, data, true, CALLER_WRITTEN_BELOW)
    }

    /// Like [`Self::create_tensors`], copying from slices.
    ///
    /// # Errors
    /// As [`Self::create_tensors`].
    pub fn create_tensors_from_slices(
        &self,
        descriptors: Vec<(MemoryLayoutDescriptor, &[u8])>,
    ) -> Result<Vec<MemoryLayout>, IoError> {
        let (descriptors, data) = descriptors
            .into_iter()
            .map(|(descriptor, slice)| (descriptor, Bytes::from_bytes_vec(slice.to_vec())))
            .unzip();
        self.do_create(descriptors, data, false, CALLER_WRITTEN_BELOW)
    }

    /// Host buffers of the given sizes to fill and pass to `create*`: pinned (page-locked)
    /// where the backend has pinned memory, so the upload is a direct DMA; plain heap memory
    /// otherwise (or when pinned memory is exhausted). Doesn't wait for queued work.
    ///
    /// # Errors
    /// [`IoError::OutOfMemory`] if neither pinned nor heap memory of these sizes can be had
    /// (a size beyond the host's physical memory is refused up front, never attempted).
    pub fn reserve_staging(&self, sizes: &[usize]) -> Result<Vec<Bytes>, IoError> {
        if sizes.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(staging) = &self.utilities.staging {
            match staging.reserve(sizes) {
                Ok(buffers) if buffers.len() == sizes.len() => return Ok(buffers),
                Ok(_) => {
                    tracing::warn!("the staging provider returned the wrong number of buffers")
                }
                Err(error) => {
                    tracing::debug!("pinned staging unavailable, using heap memory: {error}")
                }
            }
        }
        sizes.iter().map(|&size| Bytes::try_zeroed(size)).collect()
    }

    /// Like [`Self::create_from_slice`], copying straight into pinned staging memory (one
    /// host copy instead of two on backends with pinned memory).
    ///
    /// # Errors
    /// As [`Self::create`].
    pub fn create_from_slice_pinned(&self, slice: &[u8]) -> Result<Handle, IoError> {
        let mut staging = self.reserve_staging(&[slice.len()])?;
        let mut bytes = staging
            .pop()
            .ok_or_else(|| IoError::invalid("no staging buffer"))?;
        bytes.copy_from_slice(slice);
        self.create(bytes)
    }

    /// Like [`Self::create_tensors_from_slices`], copying straight into pinned staging.
    ///
    /// # Errors
    /// As [`Self::create_tensors`].
    pub fn create_tensors_from_slices_pinned(
        &self,
        descriptors: Vec<(MemoryLayoutDescriptor, &[u8])>,
    ) -> Result<Vec<MemoryLayout>, IoError> {
        let sizes: Vec<usize> = descriptors.iter().map(|(_, slice)| slice.len()).collect();
        let stagings = self.reserve_staging(&sizes)?;
        let mut layout_descriptors = Vec::with_capacity(descriptors.len());
        let mut data = Vec::with_capacity(descriptors.len());
        for ((descriptor, slice), mut staging) in descriptors.into_iter().zip(stagings) {
            staging.copy_from_slice(slice);
            layout_descriptors.push(descriptor);
            data.push(staging);
        }
        self.do_create(layout_descriptors, data, true, CALLER_WRITTEN_BELOW)
    }

    /// Reserves `size` bytes of uninitialized device memory.
    ///
    /// ```
    /// # use cubert_runtime::{IoError, ops};
    /// # let client = cubert_cpu::default_client()?;
    /// let handle = client.empty(256 * 4)?; // room for 256 u32
    /// assert_eq!(handle.size(), 1024);
    /// ops::fill(&client, &handle, 256, 7u32)?;
    /// assert_eq!(client.read_one(handle)?.to_elems::<u32>(), vec![7; 256]);
    ///
    /// assert!(matches!(client.empty(0), Err(IoError::InvalidArgument { .. })));
    /// assert!(matches!(client.empty(usize::MAX), Err(IoError::BufferTooBig { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::InvalidArgument`] for 0 bytes, [`IoError::BufferTooBig`] if it can never
    /// fit.
    pub fn empty(&self, size: usize) -> Result<Handle, IoError> {
        // The layout of one contiguous buffer is trivial: mint the handle directly (this is
        // the allocation hot path of tensor libraries).
        if size == 0 {
            return Err(IoError::invalid(
                "shape [0] has no elements; every allocation needs at least one byte",
            ));
        }
        let max = self.utilities.properties.memory.max_allocation_size;
        if size as u64 > max {
            return Err(IoError::BufferTooBig {
                size: size as u64,
                max,
                backtrace: crate::backtrace::BackTrace::capture(),
            });
        }
        let stream = self.stream_id();
        let handle = self
            .utilities
            .layout_policy
            .handles()
            .mint(stream, size as u64);
        // Only the id is queued: the handle may be dropped before the allocation runs (the
        // server then allocates nothing, see `ComputeServer::allocate`).
        self.device.allocate(handle.id(), size as u64, stream);
        Ok(handle)
    }

    /// Reserves an uninitialized tensor; see [`Self::create_tensor`] for the layout.
    ///
    /// # Errors
    /// As [`Self::empty`].
    pub fn empty_tensor(
        &self,
        shape: impl Into<Shape>,
        elem_size: usize,
    ) -> Result<MemoryLayout, IoError> {
        let layouts = self.do_empty(&[MemoryLayoutDescriptor::optimized(shape, elem_size)])?;
        Self::single(layouts)
    }

    /// Reserves several uninitialized tensors in one allocation.
    ///
    /// # Errors
    /// As [`Self::empty`], for any of the tensors.
    pub fn empty_tensors(
        &self,
        descriptors: Vec<MemoryLayoutDescriptor>,
    ) -> Result<Vec<MemoryLayout>, IoError> {
        self.do_empty(&descriptors)
    }

    /// Moves the given buffers into pinned staging memory where the backend has it, so their
    /// upload is a direct DMA. With `file_only`, only memory-mapped buffers move (heap
    /// buffers stay). Buffers of [`STAGED_BELOW`] bytes or more never move: the backend's
    /// pipelined upload reads them faster. Works on the caller's thread: it never waits for
    /// queued kernels.
    pub fn staging<'a>(&self, bytes: impl Iterator<Item = &'a mut Bytes>, file_only: bool) {
        let Some(staging) = &self.utilities.staging else {
            return;
        };
        let mut targets: Vec<&'a mut Bytes> = bytes
            .filter(|b| match b.property() {
                AllocationProperty::Pinned => false,
                _ if b.len() >= STAGED_BELOW => false,
                AllocationProperty::File => true,
                AllocationProperty::Native | AllocationProperty::Other => !file_only,
            })
            .collect();
        if targets.is_empty() {
            return;
        }
        let sizes: Vec<usize> = targets.iter().map(|b| b.len()).collect();
        let Ok(buffers) = staging.reserve(&sizes) else {
            return;
        };
        for (target, mut pinned) in targets.iter_mut().zip(buffers) {
            if target.copy_into(&mut pinned).is_ok() {
                std::mem::swap(*target, &mut pinned);
            }
        }
    }

    /// Runs `upload` on `slice` as bytes: a heap copy where the backend has no pinned
    /// staging, the slice is under [`HEAP_COPIED_BELOW`] and the upload would wait in the
    /// runner's queue (or the slice is under a kilobyte), so this returns at once; else a view of the caller's memory, written
    /// from on this thread (an idle device that runs uploads on its callers, the CPU), read
    /// in place by the queue or copied into pinned staging by `do_create`, and this returns
    /// once nothing reads the view any more.
    fn upload_slice<T>(&self, slice: &[u8], upload: impl FnOnce(Bytes) -> T) -> T {
        // Under a kilobyte the copy costs less than lending the view (two allocations): at
        // 16 bytes 0.35 µs copied against 0.39-0.42 µs viewed, upload and drop on the 2-core
        // VM; at 128 KiB the view wins, 3.7-3.8 µs against 6.8-7.1.
        let tiny = slice.len() < 1 << 10;
        if self.utilities.staging.is_none()
            && slice.len() < HEAP_COPIED_BELOW
            && (tiny || !self.device.would_run_on_caller(CallerWork::Upload))
        {
            upload(Bytes::from_slice(slice))
        } else {
            Bytes::scoped(slice, upload)
        }
    }

    /// Whether `handle` belongs to this client's device.
    pub fn owns(&self, handle: &Handle) -> bool {
        handle.device() == self.device_id()
    }
}
