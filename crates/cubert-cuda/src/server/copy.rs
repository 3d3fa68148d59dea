//! Device-to-device copies within one GPU (`ComputeServer::copy`): one `cuMemcpyDtoDAsync`
//! on the stream, ordered after the last use of both bindings on other streams as a launch
//! is, and kept alive by a graph being captured as a launch's bindings are.

use super::CudaServer;
use crate::driver;
use cubert_runtime::{Binding, IoError, ServerError, StreamId};

impl CudaServer {
    pub(super) fn copy_between(
        &mut self,
        source: &Binding,
        destination: &Binding,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        self.enter()?;
        self.drain_releases();
        let from = self.resolve(source)?;
        let to = self.resolve(destination)?;
        if from.size != to.size {
            return Err(IoError::invalid(format!(
                "copying {} bytes into {} bytes",
                from.size, to.size
            ))
            .into());
        }
        if from.size == 0 || from.ptr == to.ptr {
            return Ok(());
        }
        if from.ptr < to.ptr + to.size && to.ptr < from.ptr + from.size {
            return Err(
                IoError::invalid("the source and the destination of a copy overlap").into(),
            );
        }
        let bytes = usize::try_from(from.size)
            .map_err(|_| IoError::invalid("a copy larger than the address space"))?;
        self.use_on(source.id(), stream)?;
        self.use_on(destination.id(), stream)?;
        self.graphs.record_binding(source);
        self.graphs.record_binding(destination);
        let raw = self.streams.raw(stream)?;
        // SAFETY: both resources are live device memory of this context covering their
        // bindings (the task holds the bindings, and a graph being captured keeps them), of
        // `bytes` bytes each, not overlapping (checked above); `raw` is this server's stream.
        unsafe { driver::copy::dtod_async(to.ptr, from.ptr, bytes, raw) }?;
        self.streams.bump(stream);
        Ok(())
    }
}
