//! Kernel-argument validation through a CPU client: arbitrary standard kernels, element
//! types, buffers (whole handles and views), info words and cube counts (static or read
//! from a buffer) go through `ComputeClient::launch`, then `sync`.
//!
//! Properties: nothing panics or aborts; a refused launch is an error at once, a failing one
//! an error at the next sync (a dynamic count past the device's limits is always one or the
//! other); a buffer not bound to the launch is never changed; and the client keeps working
//! (a sentinel round trip after every input).
//!
//! Speed: one client serves the whole process, and grids stay small (at most 279 cubes
//! static, 512 dynamic). What an input costs is almost all per-cube overhead of the CPU
//! executor (a grid of 64^3 dynamic cubes, as this target once allowed, took a large part
//! of a second in the instrumented build, for nothing more than the same code run more
//! often); the per-element work is bounded by the buffers. A dynamic count past the device
//! limits is still tried: it is refused before any cube runs.

#![no_main]

use arbitrary::Arbitrary;
use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::{
    ComputeClient, CubeCount, Handle, KernelArguments, MetadataBindingInfo, Runtime,
};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const ELEMS: [ElemType; 12] = [
    ElemType::F16,
    ElemType::BF16,
    ElemType::F32,
    ElemType::F64,
    ElemType::I8,
    ElemType::I16,
    ElemType::I32,
    ElemType::I64,
    ElemType::U8,
    ElemType::U32,
    ElemType::U64,
    ElemType::Bool,
];

#[derive(Arbitrary, Debug)]
struct Buffer {
    size: u16,
    view: Option<(u16, u16)>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    kernel: u8,
    elem: u8,
    to: u8,
    buffers: Vec<Buffer>,
    info: Vec<u64>,
    /// Info words are usually small (lengths that fit the buffers or just miss them).
    small_info: bool,
    count: (u8, u8, u8),
    /// Each word: small (`% DYNAMIC_DIM`), or past the device's limit when its top bit is set.
    dynamic_count: Option<[u32; 3]>,
}

/// Largest dynamic cube count per dimension, plus one.
const DYNAMIC_DIM: u32 = 8;

/// The dynamic count dimension a fuzzed word stands for, and whether it is past `max`.
fn dynamic_dim(word: u32, max: u32) -> (u32, bool) {
    if word & (1 << 31) != 0
        && let Some(over) = max.checked_add(1 + word % 4)
    {
        return (over, true);
    }
    (word % DYNAMIC_DIM, false)
}

fn client() -> &'static ComputeClient<CpuRuntime> {
    static CLIENT: OnceLock<ComputeClient<CpuRuntime>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut config = CubertConfig::default();
        config.cpu.threads = 2;
        let server = CpuServer::new(CpuDevice::new(0), &config).expect("a CPU server");
        ComputeClient::from_server(server, DeviceHandleMode::Inline).expect("a CPU client")
    })
}

fuzz_target!(|input: Input| {
    let client = client();
    let elem = ELEMS[usize::from(input.elem) % ELEMS.len()];
    let to = ELEMS[usize::from(input.to) % ELEMS.len()];
    let kernel = match input.kernel % 8 {
        0 => StandardKernel::Noop,
        1 => StandardKernel::Fill(elem),
        2 => StandardKernel::Copy(elem),
        3 => StandardKernel::Cast { from: elem, to },
        4 => StandardKernel::Add(elem),
        5 => StandardKernel::Mul(elem),
        6 => StandardKernel::ReduceSum(elem),
        _ => StandardKernel::Matmul(elem),
    };
    let sentinel: Vec<u8> = (0..64u8).collect();
    let untouched = client.create_from_slice(&sentinel).expect("sentinel");
    let mut handles: Vec<Handle> = Vec::new();
    for buffer in input.buffers.iter().take(5) {
        let Ok(handle) = client.empty(usize::from(buffer.size)) else {
            continue;
        };
        let handle = match buffer.view {
            Some((offset, size)) => match handle.view(u64::from(offset), u64::from(size)) {
                Ok(view) => view,
                Err(_) => handle,
            },
            None => handle,
        };
        handles.push(handle);
    }
    let info: Vec<u64> = input
        .info
        .iter()
        .take(6)
        .map(|word| if input.small_info { word % 4096 } else { *word })
        .collect();
    let mut over_limit = false;
    let count = match input.dynamic_count {
        Some(words) => {
            let max = client.properties().hardware.max_cube_count;
            let dims = [
                dynamic_dim(words[0], max.0),
                dynamic_dim(words[1], max.1),
                dynamic_dim(words[2], max.2),
            ];
            over_limit = dims.iter().any(|(_, over)| *over);
            let bytes: Vec<u8> = dims.iter().flat_map(|(d, _)| d.to_le_bytes()).collect();
            match client.create_from_slice(&bytes) {
                Ok(handle) => CubeCount::Dynamic(handle.binding()),
                Err(_) => return,
            }
        }
        None => {
            let (x, y, z) = input.count;
            CubeCount::Static(u32::from(x % 32), u32::from(y % 4), u32::from(z % 4))
        }
    };
    let mut launched = None;
    if let Ok(kernel) = CpuRuntime::standard_kernel(kernel) {
        let arguments = KernelArguments::new()
            .with_buffers(handles.iter().map(Handle::to_binding).collect())
            .with_info(MetadataBindingInfo::custom(info));
        launched = Some(client.launch(kernel, count, arguments));
    }
    // Freed before the syncs, so that their releases are done within this input.
    drop(handles);
    let synced = client.sync();
    if over_limit && let Some(launched) = launched {
        assert!(
            launched.is_err() || synced.is_err(),
            "a dynamic count past the limits ran"
        );
    }
    client.sync().expect("errors are returned once");
    let read = client.read_one(untouched).expect("the sentinel reads back");
    assert_eq!(
        read.to_vec(),
        sentinel,
        "a buffer outside the launch changed"
    );
});
