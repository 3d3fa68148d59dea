//! Launching kernels: the argument block, the cube count, tensor maps, `cuLaunchKernel`.
//!
//! The argument block ([`KernelArgs`], sized by the kernel's capacity) is filled on the
//! runner thread's stack from the bindings (device address and length of each buffer), the
//! info words and, for checked launches, a status slot; the driver copies it at launch.
//! Nothing is allocated on the way unless the kernel takes tensor maps.
//! A dynamic cube count is read back from its buffer (this waits for the stream).
//!
//! Unlike transfers, profiles, graphs and collectives, a launch is not a part of its own: it
//! works on the server's core throughout (memory resolution and cross-stream ordering of
//! every buffer, the compiler, the status blocks, the streams), so it is an `impl
//! CudaServer` in a child module of `server`. Of the parts it only tells the graph capture
//! in progress ([`crate::graph::Graphs`]) which memory and how many launches it captured.

use super::CudaServer;
use crate::driver;
use crate::kernel::{CudaKernel, KernelArgs};
use crate::tma::encode_tensor_map;
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::{
    CubeCount, ExecutionMode, KernelArguments, KernelMetadata, LaunchError, ResourceLimitError,
    ServerError, StreamId,
};
use cudarc::driver::sys::CUtensorMap;
use std::ffi::c_void;

impl CudaServer {
    fn dynamic_count(
        &mut self,
        binding: &cubert_runtime::Binding,
        stream: StreamId,
    ) -> Result<(u32, u32, u32), ServerError> {
        let resource = self.resolve(binding)?;
        if resource.size < 12 {
            return Err(LaunchError::unknown(format!(
                "a dynamic cube count needs 12 bytes (three u32), the buffer has {}",
                resource.size
            ))
            .into());
        }
        self.use_on(binding.id(), stream)?;
        self.streams.synchronize(stream)?;
        let mut words = [0u32; 3];
        // SAFETY: the resource holds at least 12 bytes; the stream is idle, so the copy
        // reads the final values.
        unsafe { driver::copy::dtoh(words.as_mut_ptr().cast(), resource.ptr, 12) }?;
        let max = self.utilities.properties.hardware.max_cube_count;
        let (x, y, z) = (words[0], words[1], words[2]);
        if x > max.0 || y > max.1 || z > max.2 {
            return Err(LaunchError::from(ResourceLimitError::CubeCount {
                requested: (x, y, z),
                max,
                backtrace: BackTrace::capture(),
            })
            .into());
        }
        Ok((x, y, z))
    }

    /// Launches `kernel` on `stream`.
    pub(super) fn launch_kernel(
        &mut self,
        kernel: &CudaKernel,
        count: &CubeCount,
        arguments: &KernelArguments,
        mode: ExecutionMode,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        self.drain_releases();
        let capacity = kernel.args_capacity();
        if arguments.buffers.len() > capacity.buffers()
            || arguments.info.data.len() > capacity.info()
        {
            return Err(LaunchError::unknown(format!(
                "kernel `{}` passes {} buffers and {} info words; its argument block has room \
                 for {} and {}",
                kernel.name(),
                arguments.buffers.len(),
                arguments.info.data.len(),
                capacity.buffers(),
                capacity.info()
            ))
            .into());
        }
        let function = self.compiler.function(kernel, mode)?;
        let grid = match count {
            CubeCount::Static(x, y, z) => (*x, *y, *z),
            CubeCount::Dynamic(binding) => self.dynamic_count(binding, stream)?,
        };
        if grid.0 == 0 || grid.1 == 0 || grid.2 == 0 {
            return Ok(());
        }
        let mut args = KernelArgs::new(capacity);
        for (index, binding) in arguments.buffers.iter().enumerate() {
            let resource = self.resolve(binding).map_err(LaunchError::IoError)?;
            self.use_on(binding.id(), stream)?;
            args.set_buffer(index, resource.ptr, resource.size);
            self.graphs.record_binding(binding);
        }
        args.set_counts_and_info(arguments.buffers.len(), &arguments.info.data);
        let raw = self.streams.raw(stream)?;
        if mode != ExecutionMode::Unchecked {
            let status_stream = self.graphs.status_stream(stream);
            if !self.graphs.capture_in_progress() && self.status.is_full(status_stream) {
                self.submit_job(stream, crate::completion::Reply::Status)?;
            }
            args.set_status(self.status.slot(status_stream, kernel.shared_name())?);
        }
        let mut maps: Vec<CUtensorMap> = Vec::with_capacity(arguments.tensor_maps.len());
        for tensor_map in &arguments.tensor_maps {
            let resource = self
                .resolve(&tensor_map.binding)
                .map_err(LaunchError::IoError)?;
            self.use_on(tensor_map.binding.id(), stream)?;
            maps.push(encode_tensor_map(resource.ptr, &tensor_map.map)?);
            self.graphs.record_binding(&tensor_map.binding);
        }
        let mut first = [args.as_param()];
        let mut with_maps: Vec<*mut c_void>;
        let params: &mut [*mut c_void] = if maps.is_empty() {
            &mut first
        } else {
            with_maps = Vec::with_capacity(1 + maps.len());
            with_maps.push(args.as_param());
            for map in &mut maps {
                with_maps.push((map as *mut CUtensorMap).cast());
            }
            &mut with_maps
        };
        let dim = kernel.cube_dim();
        // SAFETY: `function` is loaded in this context; `params` points at one argument
        // block (and the tensor maps) matching the kernel ABI, alive for the call (the
        // driver copies them); every buffer address was resolved from a live binding.
        unsafe {
            driver::module::launch(
                function,
                grid,
                (dim.x, dim.y, dim.z),
                kernel.shared_memory_bytes() as u32,
                raw,
                params,
            )
        }
        .map_err(|failure| {
            if failure.is_sticky() {
                failure.into_server_error()
            } else {
                LaunchError::unknown(format!(
                    "launching `{}` failed: {}",
                    kernel.name(),
                    driver::describe(failure.error)
                ))
                .into()
            }
        })?;
        self.streams.bump(stream);
        self.graphs.count_launch();
        Ok(())
    }
}
