//! cubert's work shows up in a user's `tracing` subscriber: launches, kernel builds,
//! transfers and allocations each open a span (on the caller's thread, and on the device's
//! runner for what runs there), so tracing-chrome or Perfetto show them next to the
//! program's own spans.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::config::CubertConfig;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, ComputeClient, CubeCount, CubeDim};
use std::sync::{Arc, Mutex};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Records `target/name` of every span opened.
#[derive(Clone, Default)]
struct SpanNames(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for SpanNames {
    fn on_new_span(&self, attributes: &Attributes<'_>, _id: &Id, _context: Context<'_, S>) {
        let metadata = attributes.metadata();
        self.0
            .lock()
            .unwrap()
            .push(format!("{}/{}", metadata.target(), metadata.name()));
    }
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn add_one(values: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    if i < values.len() {
        values[i] = values[i] + 1;
    }
}

#[test]
fn launches_builds_transfers_and_allocations_open_spans() {
    let names = SpanNames::default();
    // Global, so the runner thread's spans are seen too (this file is its own process).
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(names.clone()))
        .unwrap();

    let config = CubertConfig::default();
    let server = CpuServer::new(CpuDevice::new(0), &config).unwrap();
    let client: ComputeClient<CpuRuntime> =
        ComputeClient::from_server(server, config.runtime.device_handle).unwrap();
    let values = client.create(Bytes::from_elems(vec![1u32; 64])).unwrap();
    client
        .write(&values, Bytes::from_elems(vec![2u32; 64]))
        .unwrap();
    add_one::launch::<CpuRuntime>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(64),
        &values,
    )
    .unwrap();
    assert_eq!(
        client.read_one(values).unwrap().to_elems::<u32>(),
        vec![3; 64]
    );
    let scratch = client.empty(1 << 20).unwrap();
    drop(scratch);
    client.sync().unwrap();

    let seen = names.0.lock().unwrap().clone();
    for expected in [
        "cubert::transfer/upload",
        "cubert::transfer/write",
        "cubert::compile/build",
        "cubert::launch/launch",
        "cubert::launch/execute",
        "cubert::transfer/read",
        "cubert::memory/allocate",
    ] {
        assert!(
            seen.iter().any(|name| name == expected),
            "no `{expected}` span among {seen:?}"
        );
    }
}
