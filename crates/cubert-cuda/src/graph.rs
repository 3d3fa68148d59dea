//! CUDA graphs: capture the launches of a stream once, replay them with one call.
//!
//! `start_capture` finishes all queued work (so nothing captured depends on work outside the
//! graph) and starts stream capture in relaxed mode. Only launches may be captured; reads,
//! writes and syncs on a capturing stream are refused. Checked launches in the graph count
//! out-of-bounds accesses in the graph's own status slots, checked after every replay.
//!
//! [`write_graph_dot`] writes a captured graph as Graphviz DOT, every node with its
//! parameters, to compare what a capture produced with a graph built another way.
//!
//! [`Graphs`] is the server's part that owns the capture in progress and the instantiated
//! graphs. The server binds its context (and settles what must come first) before calling
//! it, and passes its streams, status blocks or completion thread in where a step needs
//! them.

use crate::completion::{Check, Completion, Job, Reply};
use crate::context::CudaContext;
use crate::driver;
use crate::runtime::CudaRuntime;
use crate::server::CudaServer;
use crate::status::{StatusBlock, StatusBlocks};
use crate::streams::Streams;
use cubert_runtime::client::Graph;
use cubert_runtime::memory::FastMap;
use cubert_runtime::server::CapturedGraph;
use cubert_runtime::{Binding, ComputeClient, ServerError, StreamId};
use cudarc::driver::sys::{CUgraph, CUgraphExec};
use std::sync::{Arc, Mutex};

/// Writes `graph` as a Graphviz DOT file at `path`: every node with its parameters (kernel
/// name, grid, block, shared memory, arguments), as the driver sees it
/// (`cuGraphDebugDotPrint`, verbose). For looking at what a capture produced, next to a
/// graph built another way.
///
/// # Errors
/// A graph of another device or one that is gone; a path with a NUL byte; the driver's
/// error (an unwritable path).
pub fn write_graph_dot(
    client: &ComputeClient<CudaRuntime>,
    graph: &Graph<CudaRuntime>,
    path: &std::path::Path,
) -> Result<(), ServerError> {
    if graph.device_id() != client.device_id() {
        return Err(ServerError::generic(
            "the graph was captured on another device",
        ));
    }
    let (id, path) = (graph.id(), path.to_path_buf());
    client.with_server(move |server: &mut CudaServer| server.write_graph_dot(id, &path))?
}

/// A capture in progress.
struct Capture {
    /// The captured stream.
    stream: StreamId,
    /// The status slots of the graph's checked launches.
    status_stream: StreamId,
    /// Memory the captured launches use.
    bindings: Vec<Binding>,
    /// Launches captured.
    launches: usize,
}

/// An instantiated graph.
struct GraphExec {
    graph: CUgraph,
    exec: CUgraphExec,
    status: Option<Arc<Mutex<StatusBlock>>>,
}

// SAFETY: graph handles are used only by the server that owns them.
unsafe impl Send for GraphExec {}

/// The server's part that captures and replays graphs. See the module docs.
#[derive(Default)]
pub(crate) struct Graphs {
    capture: Option<Capture>,
    graphs: FastMap<u64, GraphExec>,
    next_graph: u64,
}

impl Graphs {
    /// Where checked launches on `stream` count their out-of-bounds accesses.
    pub(crate) fn status_stream(&self, stream: StreamId) -> StreamId {
        match &self.capture {
            Some(capture) if capture.stream == stream => capture.status_stream,
            _ => stream,
        }
    }

    /// Whether a capture is in progress (on any stream).
    pub(crate) fn capture_in_progress(&self) -> bool {
        self.capture.is_some()
    }

    /// Keeps `binding`, used by a launch, with the capture in progress (if any).
    pub(crate) fn record_binding(&mut self, binding: &Binding) {
        if let Some(capture) = &mut self.capture {
            capture.bindings.push(binding.clone());
        }
    }

    /// Counts a launch queued while a capture is in progress (if any).
    pub(crate) fn count_launch(&mut self) {
        if let Some(capture) = &mut self.capture {
            capture.launches += 1;
        }
    }

    /// Starts capturing `stream` (the server has entered: context bound, device healthy).
    pub(crate) fn begin(
        &mut self,
        streams: &mut Streams,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        if self.capture.is_some() {
            return Err(ServerError::generic(
                "a capture is already in progress; end it first",
            ));
        }
        // This server's work only: the device's context is shared with its other servers.
        streams.synchronize_all()?;
        let raw = streams.raw(stream)?;
        self.next_graph += 1;
        let status_stream = StreamId::new(u64::MAX - self.next_graph);
        // SAFETY: a live stream of this context, not capturing.
        unsafe { driver::graph::begin_capture(raw) }?;
        streams.set_capturing(stream, true);
        self.capture = Some(Capture {
            stream,
            status_stream,
            bindings: Vec::new(),
            launches: 0,
        });
        Ok(())
    }

    /// Ends the capture of `stream` and instantiates its graph (the context is bound);
    /// the status slots of its checked launches go with it.
    pub(crate) fn finish(
        &mut self,
        streams: &mut Streams,
        status: &mut StatusBlocks,
        stream: StreamId,
    ) -> Result<CapturedGraph, ServerError> {
        let capture = match self.capture.take() {
            Some(capture) if capture.stream == stream => capture,
            other => {
                self.capture = other;
                return Err(ServerError::generic(
                    "this stream is not capturing; call start_capture first",
                ));
            }
        };
        let raw = streams.raw(stream)?;
        // SAFETY: ends the capture begun on this stream, a live stream of this context.
        let ended = unsafe { driver::graph::end_capture(raw) };
        streams.set_capturing(stream, false);
        let graph: CUgraph = ended?;
        // SAFETY: `graph` was just produced by the capture.
        let exec = unsafe { driver::graph::instantiate(graph) };
        let exec = match exec {
            Ok(exec) => exec,
            Err(failure) => {
                // SAFETY: destroys the graph created above, once.
                let _ = unsafe { driver::graph::destroy(graph) };
                return Err(failure.into());
            }
        };
        let status = status
            .detach_for_graph(capture.status_stream)
            .filter(|block| !block.is_empty())
            .map(|block| Arc::new(Mutex::new(block)));
        let id = self.next_graph;
        self.graphs.insert(
            id,
            GraphExec {
                graph,
                exec,
                status,
            },
        );
        Ok(CapturedGraph {
            id,
            launches: capture.launches,
            bindings: capture.bindings,
        })
    }

    /// Replays graph `id` on `stream` (the server has entered); its status slots are checked
    /// by `completion` once the replay is done.
    pub(crate) fn replay(
        &self,
        id: u64,
        streams: &mut Streams,
        completion: &Completion,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        let raw = streams.raw(stream)?;
        let (exec, status) = match self.graphs.get(&id) {
            Some(graph) => (graph.exec, graph.status.clone()),
            None => return Err(ServerError::generic(format!("there is no graph {id}"))),
        };
        // SAFETY: a live executable graph of this context and a live stream.
        unsafe { driver::graph::launch(exec, raw) }?;
        streams.bump(stream);
        if let Some(status) = status {
            let event = streams.record(stream)?;
            completion.submit(Job {
                event,
                timing_event: false,
                stream,
                checks: vec![Check::Graph(status, stream)],
                reply: Reply::Status,
            })?;
        }
        Ok(())
    }

    /// Writes graph `id` as a Graphviz DOT file at `path` (the context is bound).
    pub(crate) fn write_dot(&self, id: u64, path: &std::path::Path) -> Result<(), ServerError> {
        let Some(graph) = self.graphs.get(&id) else {
            return Err(ServerError::generic(format!("there is no graph {id}")));
        };
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            ServerError::generic(format!("the path {} holds a NUL byte", path.display()))
        })?;
        // SAFETY: a live graph of this server; `path` is NUL-terminated.
        unsafe { driver::graph::write_dot(graph.graph, &path) }?;
        Ok(())
    }

    /// Destroys graph `id` once the server's streams are done with it.
    pub(crate) fn destroy(&mut self, id: u64, context: &CudaContext, streams: &mut Streams) {
        let Some(graph) = self.graphs.remove(&id) else {
            return;
        };
        if context.bind().is_err() {
            return;
        }
        // Replays run on this server's streams (the context is shared with other servers).
        let _ = streams.synchronize_all();
        // SAFETY: the graph and its executable were created by `finish` and are destroyed
        // once; the stream-ordered work using them is finished by the sync above.
        unsafe {
            let _ = driver::graph::destroy_exec(graph.exec);
            let _ = driver::graph::destroy(graph.graph);
        }
        // The graph's status block is complete (synchronized above): it may go back to its
        // pool once its last pending check is done with it.
        if let Some(status) = graph.status
            && let Ok(mut block) = status.lock()
        {
            block.take_errors();
        }
    }
}
