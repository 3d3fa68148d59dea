//! CUDA graphs: capture the launches of a stream once, replay them with one call.
//!
//! `start_capture` finishes all queued work (so nothing captured depends on work outside the
//! graph) and starts stream capture in relaxed mode. Only launches may be captured; reads,
//! writes and syncs on a capturing stream are refused. Checked launches in the graph count
//! out-of-bounds accesses in the graph's own status slots, checked after every replay.

use crate::completion::{Check, Job, Reply};
use crate::driver;
use crate::server::CudaServer;
use crate::status::StatusBlock;
use cubert_runtime::server::CapturedGraph;
use cubert_runtime::{Binding, ServerError, StreamId};
use cudarc::driver::sys::{CUgraph, CUgraphExec};
use std::sync::{Arc, Mutex};

/// A capture in progress.
pub struct Capture {
    /// The captured stream.
    pub stream: StreamId,
    /// The status slots of the graph's checked launches.
    pub status_stream: StreamId,
    /// Memory the captured launches use.
    pub bindings: Vec<Binding>,
    /// Launches captured.
    pub launches: usize,
}

/// An instantiated graph.
pub struct GraphExec {
    graph: CUgraph,
    exec: CUgraphExec,
    status: Option<Arc<Mutex<StatusBlock>>>,
}

// SAFETY: graph handles are used only by the server that owns them.
unsafe impl Send for GraphExec {}

impl CudaServer {
    /// Where checked launches on `stream` count their out-of-bounds accesses.
    pub(crate) fn status_stream(&self, stream: StreamId) -> StreamId {
        match &self.capture {
            Some(capture) if capture.stream == stream => capture.status_stream,
            _ => stream,
        }
    }

    pub(crate) fn begin_capture(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        if self.capture.is_some() {
            return Err(ServerError::generic(
                "a capture is already in progress; end it first",
            ));
        }
        // This server's work only: the device's context is shared with its other servers.
        self.streams.synchronize_all()?;
        let raw = self.streams.raw(stream)?;
        self.next_graph += 1;
        let status_stream = StreamId::new(u64::MAX - self.next_graph);
        // SAFETY: a live stream of this context, not capturing.
        unsafe { driver::graph::begin_capture(raw) }?;
        self.streams.set_capturing(stream, true);
        self.capture = Some(Capture {
            stream,
            status_stream,
            bindings: Vec::new(),
            launches: 0,
        });
        Ok(())
    }

    pub(crate) fn finish_capture(
        &mut self,
        stream: StreamId,
    ) -> Result<CapturedGraph, ServerError> {
        self.context.bind()?;
        let capture = match self.capture.take() {
            Some(capture) if capture.stream == stream => capture,
            other => {
                self.capture = other;
                return Err(ServerError::generic(
                    "this stream is not capturing; call start_capture first",
                ));
            }
        };
        let raw = self.streams.raw(stream)?;
        // SAFETY: ends the capture begun on this stream, a live stream of this context.
        let ended = unsafe { driver::graph::end_capture(raw) };
        self.streams.set_capturing(stream, false);
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
        let status = self
            .status
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

    pub(crate) fn replay_graph(&mut self, id: u64, stream: StreamId) -> Result<(), ServerError> {
        self.enter()?;
        let raw = self.streams.raw(stream)?;
        let (exec, status) = match self.graphs.get(&id) {
            Some(graph) => (graph.exec, graph.status.clone()),
            None => return Err(ServerError::generic(format!("there is no graph {id}"))),
        };
        // SAFETY: a live executable graph of this context and a live stream.
        unsafe { driver::graph::launch(exec, raw) }?;
        self.streams.bump(stream);
        if let Some(status) = status {
            let event = self.streams.record(stream)?;
            self.completion.submit(Job {
                event,
                timing_event: false,
                stream,
                checks: vec![Check::Graph(status, stream)],
                reply: Reply::Status,
            })?;
        }
        Ok(())
    }

    pub(crate) fn destroy_graph(&mut self, id: u64) {
        let Some(graph) = self.graphs.remove(&id) else {
            return;
        };
        if self.context.bind().is_err() {
            return;
        }
        // Replays run on this server's streams (the context is shared with other servers).
        let _ = self.streams.synchronize_all();
        // SAFETY: the graph and its executable were created by `finish_capture` and are
        // destroyed once; the stream-ordered work using them is finished by the sync above.
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
