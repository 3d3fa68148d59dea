//! Raw device memory: wgpu buffers.
//!
//! Each allocation of the memory manager is one buffer usable as a storage binding and as
//! the source and destination of copies. Creating a buffer can't return an error in wgpu's
//! API: it is created inside an out-of-memory and a validation error scope, popped at once,
//! so a full device or a refused size is an [`IoError`] for that allocation.

use cubert_runtime::IoError;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::storage::{ComputeStorage, StorageHandle, StorageId};
use std::collections::HashMap;

/// Alignment of allocations: WebGPU's largest storage-binding offset alignment, so every
/// allocation can be bound from its start.
pub const BUFFER_ALIGNMENT: u64 = 256;

/// A range of one buffer.
#[derive(Clone, Debug)]
pub struct WgpuResource {
    /// The buffer.
    pub buffer: wgpu::Buffer,
    /// Start of the range in the buffer, in bytes.
    pub offset: u64,
    /// Length of the range in bytes.
    pub size: u64,
}

/// The buffers of one device.
#[derive(Debug)]
pub struct WgpuStorage {
    device: wgpu::Device,
    buffers: HashMap<StorageId, wgpu::Buffer>,
    next_id: u64,
}

impl WgpuStorage {
    /// Storage on `device`.
    pub fn new(device: wgpu::Device) -> Self {
        Self {
            device,
            buffers: HashMap::new(),
            next_id: 0,
        }
    }
}

impl ComputeStorage for WgpuStorage {
    type Resource = WgpuResource;

    fn alignment(&self) -> u64 {
        BUFFER_ALIGNMENT
    }

    fn alloc(&mut self, size: u64) -> Result<StorageId, IoError> {
        // Copies and bindings move whole 4-byte words.
        let padded = size.max(4).next_multiple_of(4);
        let out_of_memory = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cubert"),
            size: padded,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let refused = cubert_runtime::future::block_on(validation.pop());
        let full = cubert_runtime::future::block_on(out_of_memory.pop());
        if let Some(error) = full {
            buffer.destroy();
            return Err(IoError::OutOfMemory {
                requested: size,
                reserved: self.buffers.values().map(wgpu::Buffer::size).sum(),
                free: 0,
                reason: format!("wgpu can't allocate {size} bytes: {error}"),
                backtrace: BackTrace::capture(),
            });
        }
        if let Some(error) = refused {
            buffer.destroy();
            return Err(IoError::invalid(format!(
                "wgpu refused a buffer of {size} bytes: {error}"
            )));
        }
        self.next_id += 1;
        let id = StorageId(self.next_id);
        self.buffers.insert(id, buffer);
        Ok(id)
    }

    fn dealloc(&mut self, id: StorageId) {
        // Dropped, not destroyed: commands recorded or submitted with the buffer keep it
        // alive until they are done, then wgpu frees it.
        self.buffers.remove(&id);
    }

    fn get(&mut self, handle: &StorageHandle) -> Option<WgpuResource> {
        let buffer = self.buffers.get(&handle.id)?;
        let end = handle.offset.checked_add(handle.size)?;
        (end <= buffer.size()).then(|| WgpuResource {
            buffer: buffer.clone(),
            offset: handle.offset,
            size: handle.size,
        })
    }
}
