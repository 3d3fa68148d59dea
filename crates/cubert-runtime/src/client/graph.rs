//! Graphs: capture a sequence of launches once, replay it many times.
//!
//! Between [`ComputeClient::start_capture`] and [`ComputeClient::end_capture`] the launches
//! on the client's stream are recorded instead of run. [`ComputeClient::replay`] then runs
//! the whole sequence with one submission, which removes most per-launch overhead. A
//! [`Graph`] keeps the memory it uses alive, so its handles may be dropped meanwhile.
//! Backends without graphs answer `ServerError::Unsupported`.

use super::ComputeClient;
use crate::device_handle::DeviceHandle;
use crate::error::ServerError;
use crate::handle::Binding;
use crate::runtime::Runtime;
use crate::server::ComputeServer;

/// A captured graph of launches.
pub struct Graph<R: Runtime> {
    id: u64,
    launches: usize,
    device: DeviceHandle<R::Server>,
    _bindings: Vec<Binding>,
}

impl<R: Runtime> Graph<R> {
    /// Number of launches in the graph.
    pub fn launches(&self) -> usize {
        self.launches
    }

    /// The graph's id on its device's server (what a backend's own graph tools take, such
    /// as `cubert_cuda::write_graph_dot`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The device the graph was captured on.
    pub fn device_id(&self) -> crate::DeviceId {
        self.device.device_id()
    }
}

impl<R: Runtime> std::fmt::Debug for Graph<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("id", &self.id)
            .field("launches", &self.launches)
            .finish()
    }
}

impl<R: Runtime> Drop for Graph<R> {
    fn drop(&mut self) {
        let id = self.id;
        self.device.submit(move |server| server.drop_graph(id));
    }
}

impl<R: Runtime> ComputeClient<R> {
    /// Starts capturing this client's launches into a graph. Work queued before is
    /// completed first.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] on backends without graphs.
    pub fn start_capture(&self) -> Result<(), ServerError> {
        let stream = self.stream_id();
        self.call(move |server| server.start_capture(stream))?
    }

    /// Ends the capture and returns the graph.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] on backends without graphs, or the backend's error.
    pub fn end_capture(&self) -> Result<Graph<R>, ServerError> {
        let stream = self.stream_id();
        let captured = self.call(move |server| server.end_capture(stream))??;
        Ok(Graph {
            id: captured.id,
            launches: captured.launches,
            device: self.device.clone(),
            _bindings: captured.bindings,
        })
    }

    /// Runs `graph` on this client's stream. Returns once it is queued; errors come back
    /// from the next `flush`/`sync`/`read`.
    ///
    /// # Errors
    /// [`ServerError::Generic`] if the graph belongs to another device.
    pub fn replay(&self, graph: &Graph<R>) -> Result<(), ServerError> {
        if !graph.device.same_device(&self.device) {
            return Err(ServerError::generic(
                "the graph was captured on another device",
            ));
        }
        let (id, stream) = (graph.id, self.stream_id());
        self.device
            .submit_fallible(move |server| server.replay(id, stream));
        Ok(())
    }
}
