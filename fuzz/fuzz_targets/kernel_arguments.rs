//! Kernel-argument validation through a CPU client: arbitrary standard kernels, element
//! types, buffers (whole handles and views), info words and cube counts (static or read
//! from a buffer) go through `ComputeClient::launch`, then `sync`.
//!
//! Properties: nothing panics or aborts; a refused launch is an error at once, a failing one
//! an error at the next sync; a buffer not bound to the launch is never changed; and the
//! client keeps working (a sentinel round trip after every input).

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
    dynamic_count: Option<[u32; 3]>,
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
    let count = match input.dynamic_count {
        Some(words) => {
            let bytes: Vec<u8> = words.iter().flat_map(|w| (w % 64).to_le_bytes()).collect();
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
    if let Ok(kernel) = CpuRuntime::standard_kernel(kernel) {
        let arguments = KernelArguments::new()
            .with_buffers(handles.iter().map(Handle::to_binding).collect())
            .with_info(MetadataBindingInfo::custom(info));
        let _ = client.launch(kernel, count, arguments);
    }
    let _ = client.sync();
    client.sync().expect("errors are returned once");
    let read = client.read_one(untouched).expect("the sentinel reads back");
    assert_eq!(
        read.to_vec(),
        sentinel,
        "a buffer outside the launch changed"
    );
});
