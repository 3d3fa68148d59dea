//! Reading device memory back: a copy into a `MAP_READ` buffer, recorded with the rest of
//! the queued work, and mapped when the caller waits for it.
//!
//! [`Readback::wait`] runs on the thread that awaits the read (the caller's), never on the
//! device's runner: it maps the buffer, polls the device until the copy (and everything
//! submitted before it) is done, and copies the bytes out.

use cubert_runtime::ServerError;
use std::sync::mpsc;

/// A buffer that a submitted copy fills.
#[derive(Debug)]
pub struct Readback {
    device: wgpu::Device,
    buffer: wgpu::Buffer,
}

impl Readback {
    /// A `MAP_READ` buffer of `size` bytes (a multiple of 4) on `device`, and the copy of
    /// `size` bytes from `source` at `offset` into it, recorded in `encoder`.
    pub fn record(
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        source: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Self {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cubert readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(source, offset, &buffer, 0, size);
        Self {
            device: device.clone(),
            buffer,
        }
    }

    /// The bytes, once the copy is done (the submission holding it must have been
    /// submitted).
    ///
    /// # Errors
    /// [`ServerError::Generic`] when the device is lost or the buffer can't be mapped.
    pub fn wait(self) -> Result<Vec<u8>, ServerError> {
        let (sender, receiver) = mpsc::channel();
        self.buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |result| {
                let _ = sender.send(result);
            });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|error| ServerError::generic(format!("wgpu: waiting for a read: {error}")))?;
        receiver
            .recv()
            .map_err(|_| ServerError::generic("wgpu dropped a read's mapping"))?
            .map_err(|error| ServerError::generic(format!("wgpu can't map a read: {error}")))?;
        let bytes = {
            let view = self.buffer.slice(..).get_mapped_range().map_err(|error| {
                ServerError::generic(format!("wgpu can't read a mapped range: {error}"))
            })?;
            view.to_vec()
        };
        self.buffer.unmap();
        Ok(bytes)
    }
}
