//! The launches' info words, written into one long-lived buffer once per submission.
//!
//! Every launch binds a few words (its arrays' offsets and lengths, its scalars and tensor
//! metadata: the ABI `lang` documents). Creating a buffer for them per launch cost about
//! 4 µs of a back-to-back launch on an H200 with NVIDIA's Vulkan driver (11-17 µs per
//! launch against 7.3-7.5 µs with this arena, wgpu alone: `examples/launch_overhead.rs`).
//!
//! Instead the server appends each launch's words to a host vector, at the next offset the
//! adapter allows a storage binding to start at, and binds that slice of the arena's
//! buffer. Right before it submits the encoder holding those launches, [`InfoArena::write`]
//! copies the whole vector into the buffer with one `Queue::write_buffer`, and the next
//! submission's words start at offset 0 again.
//!
//! Writing over words that a submission still running may read is safe: `write_buffer` is
//! on the queue's timeline, so wgpu runs the copy after every command submitted before it
//! (the buffer's change from storage to copy destination is a barrier behind them) and
//! before the commands submitted after it. Each launch reads the words it was recorded with.
//!
//! When one submission's words outgrow the buffer, the words so far are written into it
//! (they belong to launches already recorded against it) and a buffer twice as large (or
//! as large as needed) takes its place; the bind groups of those launches keep the old
//! buffer alive until wgpu is done with them.

/// Bytes of the first arena: 64 launches (a submission) of up to 1 KiB of words each.
const FIRST_CAPACITY: u64 = 64 << 10;

/// One buffer of launch info words and the words appended since the last write.
#[derive(Debug)]
pub struct InfoArena {
    buffer: wgpu::Buffer,
    capacity: u64,
    /// Storage-binding offset alignment of the device.
    alignment: u64,
    /// The words of the launches recorded since the last write, each at its offset.
    pending: Vec<u8>,
}

impl InfoArena {
    /// An arena on `device`, whose storage bindings start on multiples of `alignment`.
    pub fn new(device: &wgpu::Device, alignment: u64) -> Self {
        Self {
            buffer: buffer(device, FIRST_CAPACITY),
            capacity: FIRST_CAPACITY,
            alignment: alignment.max(4),
            pending: Vec::new(),
        }
    }

    /// Appends one launch's `words` (a whole number of 4-byte words, not empty) and returns
    /// the buffer and offset its binding starts at; its size is `words.len()`.
    pub fn push(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        words: &[u8],
    ) -> (wgpu::Buffer, u64) {
        let mut offset = (self.pending.len() as u64).next_multiple_of(self.alignment);
        let end = offset + words.len() as u64;
        if end > self.capacity {
            self.write(queue);
            self.capacity = (2 * self.capacity).max((words.len() as u64).next_power_of_two());
            self.buffer = buffer(device, self.capacity);
            offset = 0;
        }
        self.pending.resize(offset as usize, 0);
        self.pending.extend_from_slice(words);
        (self.buffer.clone(), offset)
    }

    /// Writes the words appended since the last call into the buffer: to be called right
    /// before the encoder holding their launches is submitted.
    pub fn write(&mut self, queue: &wgpu::Queue) {
        if !self.pending.is_empty() {
            queue.write_buffer(&self.buffer, 0, &self.pending);
            self.pending.clear();
        }
    }
}

fn buffer(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("cubert info"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}
