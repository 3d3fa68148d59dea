//! Several GPUs: NCCL all-reduce, all-gather, reduce-scatter and broadcast (every
//! collective type, 1 element to 1 GiB, sum and mean), send/recv, both `to_client` paths
//! (peer copy and pinned host round trip; peer copies of page-mapped memory), ordering without `sync_collective`, inline device
//! handles, and process groups of 2 and of every GPU (every collective), started by `cubert
//! launch` and by re-running this test binary as the ranks.
//!
//! Every test is `#[ignore = "needs 2 or more CUDA devices"]` and, when it runs on a machine
//! with fewer than 2 GPUs, prints a note and passes. On the GPU machine (see
//! `scripts/gpu-test`, `bash .gpu-bundle/run.sh --multi-gpu`), with NCCL reachable as
//! `libnccl.so` and `NCCL_NVLS_ENABLE=0`:
//!
//! ```text
//! cargo test --release -p cubert-cuda --test multi_gpu -- --include-ignored --test-threads=1
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cuda::interop::with_device_buffers;
use cubert_cuda::{CudaDevice, CudaRuntime, CudaServer, device_count};
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::distributed::{ProcessGroup, free_local_port};
use cubert_runtime::server::{COLLECTIVE_TYPES, ReduceOperation};
use cubert_runtime::{Bytes, ComputeClient, DeviceId, ElemType, Handle, ops};
use cubert_test_suite::collectives::collective_lock;
use cubert_test_suite::support::bytes_of;
use cudarc::driver::sys;
use half::{bf16, f16};
use std::path::PathBuf;
use std::process::Command;

type Client = ComputeClient<CudaRuntime>;

const MIB: usize = 1 << 20;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`, as `cuMemGetAccess` reports it.
const READ_WRITE: u64 = 3;
/// Marks a child run as a rank. Not `CUBERT_`-prefixed: `cubert launch` reads those as
/// configuration keys and would warn about an unknown section.
const WORKER: &str = "TEST_CUBERT_MULTI_GPU_WORKER";

/// The GPUs, or `None` (with a note) when there are fewer than 2 or NCCL's multicast is
/// not switched off.
fn gpus() -> Option<u32> {
    let count = device_count();
    if count < 2 {
        eprintln!("skipped: needs 2 or more CUDA devices, found {count}");
        return None;
    }
    assert_eq!(
        std::env::var("NCCL_NVLS_ENABLE").as_deref(),
        Ok("0"),
        "run the multi-GPU tests with NCCL_NVLS_ENABLE=0 (never NVLink multicast)"
    );
    Some(count)
}

fn client(index: u32, config: &CubertConfig, mode: DeviceHandleMode) -> Client {
    let server = CudaServer::new(CudaDevice::new(index), config).unwrap();
    ComputeClient::from_server(server, mode).unwrap()
}

fn clients(count: u32, mode: DeviceHandleMode) -> Vec<Client> {
    (0..count)
        .map(|index| client(index, &CubertConfig::default(), mode))
        .collect()
}

fn ids(clients: &[Client]) -> Vec<DeviceId> {
    clients.iter().map(Client::device_id).collect()
}

/// The inputs repeat every `PERIOD` elements (a prime: a result shifted by any power of two
/// doesn't match), so 1 GiB of them is one period tiled.
const PERIOD: usize = 65_521;

/// Element `index` of `rank`'s input: small integers, so sums over 8 ranks are exact in
/// every collective type.
fn value(rank: usize, index: usize, dtype: ElemType) -> i64 {
    let i = index % PERIOD;
    let raw = ((i * 7 + i / 31 + rank * 13) % 31) as i64 - 15;
    match dtype {
        ElemType::U8 | ElemType::U32 | ElemType::U64 => raw + 15,
        ElemType::I8 => raw / 2,
        _ => raw,
    }
}

fn encode(values: impl Iterator<Item = f64>, dtype: ElemType) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        match dtype {
            ElemType::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
            ElemType::BF16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
            ElemType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            ElemType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            ElemType::I8 => out.push(v as i8 as u8),
            ElemType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            ElemType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            ElemType::U8 => out.push(v as u8),
            ElemType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
            ElemType::U64 => out.extend_from_slice(&(v as u64).to_le_bytes()),
            other => panic!("{other} is not a collective type"),
        }
    }
    out
}

/// `len` elements of `dtype` whose element `i` is `element(i)`, built from one period.
fn tiled(len: usize, dtype: ElemType, element: impl Fn(usize) -> f64) -> Vec<u8> {
    let period = encode((0..PERIOD.min(len)).map(element), dtype);
    let total = len * dtype.size();
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let take = period.len().min(total - out.len());
        out.extend_from_slice(&period[..take]);
    }
    out
}

fn input(rank: usize, len: usize, dtype: ElemType) -> Vec<u8> {
    tiled(len, dtype, |i| value(rank, i, dtype) as f64)
}

/// Integer means round toward zero (NCCL's ncclAvg); float means of 2, 4 or 8 ranks are
/// exact for these inputs.
fn expected(ranks: usize, len: usize, dtype: ElemType, op: ReduceOperation) -> Vec<u8> {
    tiled(len, dtype, |i| {
        let sum: i64 = (0..ranks).map(|rank| value(rank, i, dtype)).sum();
        match (op, dtype.is_float()) {
            (ReduceOperation::Sum, _) => sum as f64,
            (ReduceOperation::Mean, true) => sum as f64 / ranks as f64,
            (ReduceOperation::Mean, false) => (sum / ranks as i64) as f64,
        }
    })
}

/// Every device reduces `len` elements of `dtype`; each result is checked.
fn reduce_and_check(clients: &[Client], len: usize, dtype: ElemType, op: ReduceOperation) {
    let devices = ids(clients);
    let handles: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            let src = client
                .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
                .unwrap();
            let dst = client.empty(src.size() as usize).unwrap();
            (src, dst)
        })
        .collect();
    for (client, (src, dst)) in clients.iter().zip(&handles) {
        client
            .all_reduce(src.clone(), dst.clone(), dtype, devices.clone(), op)
            .unwrap();
    }
    let want = expected(clients.len(), len, dtype, op);
    for (client, (_, dst)) in clients.iter().zip(&handles) {
        client.sync_collective().unwrap();
        let got = client.read_one(dst.clone()).unwrap();
        if got[..] != want[..] {
            let first = got.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "{op:?} of {len} {dtype} over {} GPUs is wrong on {:?} (first differing byte \
                 {first:?})",
                clients.len(),
                client.device_id()
            );
        }
    }
}

/// Sums and means are exact for every collective type, over every GPU, from 1 element to
/// 1 GiB (f32 at more sizes in between).
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn all_reduce_is_exact_for_every_type_and_size() {
    let Some(count) = gpus() else {
        return;
    };
    let _lock = collective_lock();
    let clients = clients(count, DeviceHandleMode::Threaded);
    for dtype in COLLECTIVE_TYPES {
        let gib = 1024 * MIB / dtype.size();
        for len in [1usize, 3, 4097, 1_000_003, gib] {
            for op in [ReduceOperation::Sum, ReduceOperation::Mean] {
                reduce_and_check(&clients, len, dtype, op);
            }
        }
    }
    for bytes in [64 * MIB, 256 * MIB] {
        for op in [ReduceOperation::Sum, ReduceOperation::Mean] {
            reduce_and_check(&clients, bytes / 4, ElemType::F32, op);
        }
    }
    // Two GPUs of a larger machine form their own communicator.
    if count > 2 {
        reduce_and_check(
            &clients[..2],
            1_000_003,
            ElemType::F32,
            ReduceOperation::Sum,
        );
    }
}

/// Compares `got` with `want` and names the first differing byte.
fn check_bytes(got: &[u8], want: &[u8], what: impl Fn() -> String) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{} is wrong (lengths {} and {}, first differing byte {first:?})",
            what(),
            got.len(),
            want.len()
        );
    }
}

/// Every GPU gathers `len` elements of `dtype`; each output is every input in rank order.
fn gather_and_check(clients: &[Client], len: usize, dtype: ElemType) {
    let devices = ids(clients);
    let ranks = clients.len();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            let src = client
                .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
                .unwrap();
            let dst = client.empty(src.size() as usize * ranks).unwrap();
            (src, dst)
        })
        .collect();
    for (client, (src, dst)) in clients.iter().zip(&buffers) {
        client
            .all_gather(src.clone(), dst.clone(), dtype, devices.clone())
            .unwrap();
    }
    let want: Vec<u8> = (0..ranks)
        .flat_map(|rank| input(rank, len, dtype))
        .collect();
    for (client, (_, dst)) in clients.iter().zip(&buffers) {
        client.sync_collective().unwrap();
        let got = client.read_one(dst.clone()).unwrap();
        check_bytes(&got, &want, || {
            format!(
                "all_gather of {len} {dtype} per GPU over {ranks} GPUs on {:?}",
                client.device_id()
            )
        });
    }
}

/// Every GPU reduce-scatters `len` × ranks elements of `dtype`; each keeps its part.
fn scatter_and_check(clients: &[Client], len: usize, dtype: ElemType, op: ReduceOperation) {
    let devices = ids(clients);
    let ranks = clients.len();
    let part = len * dtype.size();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            let src = client
                .create(Bytes::from_bytes_vec(input(rank, len * ranks, dtype)))
                .unwrap();
            (src, client.empty(part).unwrap())
        })
        .collect();
    for (client, (src, dst)) in clients.iter().zip(&buffers) {
        client
            .reduce_scatter(src.clone(), dst.clone(), dtype, devices.clone(), op)
            .unwrap();
    }
    let whole = expected(ranks, len * ranks, dtype, op);
    for (rank, (client, (_, dst))) in clients.iter().zip(&buffers).enumerate() {
        client.sync_collective().unwrap();
        let got = client.read_one(dst.clone()).unwrap();
        check_bytes(&got, &whole[rank * part..(rank + 1) * part], || {
            format!(
                "{op:?} reduce_scatter of {len} {dtype} per GPU over {ranks} GPUs on {:?}",
                client.device_id()
            )
        });
    }
}

/// Every GPU takes part in a broadcast of `len` elements of `dtype` from rank `root`.
fn broadcast_and_check(clients: &[Client], len: usize, dtype: ElemType, root: usize) {
    let devices = ids(clients);
    let buffers: Vec<Handle> = clients
        .iter()
        .enumerate()
        .map(|(rank, client)| {
            client
                .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
                .unwrap()
        })
        .collect();
    for (client, buffer) in clients.iter().zip(&buffers) {
        client
            .broadcast(buffer.clone(), dtype, devices[root], devices.clone())
            .unwrap();
    }
    let want = input(root, len, dtype);
    for (client, buffer) in clients.iter().zip(&buffers) {
        client.sync_collective().unwrap();
        let got = client.read_one(buffer.clone()).unwrap();
        check_bytes(&got, &want, || {
            format!(
                "broadcast of {len} {dtype} from rank {root} on {:?}",
                client.device_id()
            )
        });
    }
}

/// `all_gather`, `reduce_scatter` (sum and mean) and `broadcast` (from the first and the
/// last GPU) are exact for every collective type over every GPU, from one element per GPU
/// to 4 MB, and to 1 GiB buffers (the gathered output, the scattered input, the broadcast
/// buffer) for one type of each element size; and over 2 GPUs of a larger machine.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn gather_scatter_and_broadcast_are_exact_for_every_type_and_size() {
    let Some(count) = gpus() else {
        return;
    };
    let _lock = collective_lock();
    let clients = clients(count, DeviceHandleMode::Threaded);
    let ranks = count as usize;
    for dtype in COLLECTIVE_TYPES {
        // 1 GiB buffers for one type of each element size (the others stop at 4 MB).
        let gib = match dtype {
            ElemType::U8 | ElemType::BF16 | ElemType::F32 | ElemType::I64 => {
                Some(1024 * MIB / dtype.size())
            }
            _ => None,
        };
        let lengths = [1usize, 3, 4097, 1_000_003];
        for len in lengths.into_iter().chain(gib.map(|gib| gib / ranks)) {
            gather_and_check(&clients, len, dtype);
            for op in [ReduceOperation::Sum, ReduceOperation::Mean] {
                scatter_and_check(&clients, len, dtype, op);
            }
        }
        for len in lengths.into_iter().chain(gib) {
            for root in [0, ranks - 1] {
                broadcast_and_check(&clients, len, dtype, root);
            }
        }
    }
    if count > 2 {
        gather_and_check(&clients[..2], 1_000_003, ElemType::F32);
        scatter_and_check(
            &clients[..2],
            1_000_003,
            ElemType::F32,
            ReduceOperation::Sum,
        );
        broadcast_and_check(&clients[1..3], 1_000_003, ElemType::F32, 1);
    }
}

/// One thread makes every GPU's call in turn, with inline and with threaded handles: nothing
/// deadlocks, and work queued after the all-reduce on each stream (a kernel, no
/// `sync_collective`) sees the result. With threaded handles that work may be queued before
/// the next GPU's call (the runner waits for the peers' calls, not for the device); with
/// inline handles every GPU's call comes first.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn one_thread_all_reduces_without_deadlock_and_orders_later_work() {
    let Some(count) = gpus() else {
        return;
    };
    let _lock = collective_lock();
    for mode in [DeviceHandleMode::Inline, DeviceHandleMode::Threaded] {
        let clients = clients(count, mode);
        let devices = ids(&clients);
        let len = 32 * MIB;
        let buffers: Vec<Handle> = clients
            .iter()
            .enumerate()
            .map(|(rank, client)| {
                let handle = client.empty(len * 4).unwrap();
                ops::fill(client, &handle, len, rank as f32 + 1.0).unwrap();
                handle
            })
            .collect();
        let all_reduce = |client: &Client, buffer: &Handle| {
            client
                .all_reduce(
                    buffer.clone(),
                    buffer.clone(),
                    ElemType::F32,
                    devices.clone(),
                    ReduceOperation::Sum,
                )
                .unwrap();
        };
        let double = |client: &Client, buffer: &Handle| {
            let out = client.empty(len * 4).unwrap();
            ops::add(client, buffer, buffer, &out, len, ElemType::F32).unwrap();
            out
        };
        let doubled: Vec<Handle> = match mode {
            DeviceHandleMode::Threaded => clients
                .iter()
                .zip(&buffers)
                .map(|(client, buffer)| {
                    all_reduce(client, buffer);
                    double(client, buffer)
                })
                .collect(),
            DeviceHandleMode::Inline => {
                for (client, buffer) in clients.iter().zip(&buffers) {
                    all_reduce(client, buffer);
                }
                clients
                    .iter()
                    .zip(&buffers)
                    .map(|(client, buffer)| double(client, buffer))
                    .collect()
            }
        };
        let sum: f32 = (1..=count).map(|r| r as f32).sum();
        for (client, out) in clients.iter().zip(doubled) {
            let got = client.read_one(out).unwrap().to_elems::<f32>();
            assert!(
                got.iter().all(|v| *v == 2.0 * sum),
                "{mode:?}: expected {}, got {:?}",
                2.0 * sum,
                &got[..4]
            );
        }
    }
}

/// With inline handles, work on a GPU whose all-reduce still waits for its peers' calls is
/// refused with an error naming the rule (it can't run before the collective, and waiting
/// would deadlock the one thread); once the peers have called, the GPU works on and the
/// result is right.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn inline_work_before_the_peers_call_is_refused_not_deadlocked() {
    let Some(count) = gpus() else {
        return;
    };
    let _lock = collective_lock();
    let clients = clients(count, DeviceHandleMode::Inline);
    let devices = ids(&clients);
    let buffers: Vec<Handle> = clients
        .iter()
        .map(|client| client.create_from_slice(&bytes_of(&[2i32; 1000])).unwrap())
        .collect();
    clients[0]
        .all_reduce(
            buffers[0].clone(),
            buffers[0].clone(),
            ElemType::I32,
            devices.clone(),
            ReduceOperation::Sum,
        )
        .unwrap();
    // A queued launch's refusal comes back from the next flush.
    let error = match ops::fill(&clients[0], &buffers[0], 1000, 0.0f32) {
        Err(error) => error.to_string(),
        Ok(()) => clients[0].flush().unwrap_err().to_string(),
    };
    assert!(
        error.contains("still waiting for the other devices"),
        "{error}"
    );
    for (client, buffer) in clients.iter().zip(&buffers).skip(1) {
        client
            .all_reduce(
                buffer.clone(),
                buffer.clone(),
                ElemType::I32,
                devices.clone(),
                ReduceOperation::Sum,
            )
            .unwrap();
    }
    let want = 2 * count as i32;
    for (client, buffer) in clients.iter().zip(&buffers) {
        client.sync_collective().unwrap();
        let got = client.read_one(buffer.clone()).unwrap().to_elems::<i32>();
        assert!(got.iter().all(|v| *v == want), "{:?}", &got[..4]);
    }
}

/// Every GPU sends to the next one round the ring and receives from the previous one.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn send_and_recv_round_the_ring() {
    let Some(count) = gpus() else {
        return;
    };
    let _lock = collective_lock();
    for mode in [DeviceHandleMode::Threaded, DeviceHandleMode::Inline] {
        let clients = clients(count, mode);
        let devices = ids(&clients);
        let n = clients.len();
        let len = 8 * MIB + 5;
        let outgoing: Vec<Handle> = clients
            .iter()
            .enumerate()
            .map(|(rank, client)| {
                client
                    .create(Bytes::from_bytes_vec(input(rank, len, ElemType::I32)))
                    .unwrap()
            })
            .collect();
        let incoming: Vec<Handle> = clients
            .iter()
            .map(|client| client.empty(len * 4).unwrap())
            .collect();
        // Even ranks send first, odd ranks receive first: the order a ring needs.
        for (rank, client) in clients.iter().enumerate() {
            let next = devices[(rank + 1) % n];
            let previous = devices[(rank + n - 1) % n];
            let send = || {
                client
                    .send(outgoing[rank].clone(), ElemType::I32, next, devices.clone())
                    .unwrap()
            };
            let recv = || {
                client
                    .recv(
                        incoming[rank].clone(),
                        ElemType::I32,
                        previous,
                        devices.clone(),
                    )
                    .unwrap()
            };
            if rank.is_multiple_of(2) {
                send();
                recv();
            } else {
                recv();
                send();
            }
        }
        for (rank, client) in clients.iter().enumerate() {
            client.sync_collective().unwrap();
            let got = client.read_one(incoming[rank].clone()).unwrap();
            let want = input((rank + n - 1) % n, len, ElemType::I32);
            assert!(
                got[..] == want[..],
                "{mode:?}: rank {rank} received wrong bytes"
            );
        }
    }
}

/// `to_client` between two GPUs: the peer copy (where the GPUs reach each other) and the
/// pinned host round trip (`[cuda] peer_copy = false`) give the same bytes, dense and
/// pitched, both ways.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn to_client_peer_and_host_paths_agree() {
    if gpus().is_none() {
        return;
    }
    let mut host_only = CubertConfig::default();
    host_only.cuda.peer_copy = false;
    host_only.cuda.pitch_alignment = 512;
    let mut peer = CubertConfig::default();
    peer.cuda.pitch_alignment = 512;
    let data: Vec<u32> = (0..(64 * MIB) as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    for (config, direct) in [(&peer, true), (&host_only, false)] {
        let a = client(0, config, DeviceHandleMode::Threaded);
        let b = client(1, config, DeviceHandleMode::Threaded);
        if direct && !a.peer_copy_supported(&b) {
            eprintln!("note: GPUs 0 and 1 can't access each other: the peer path is not tested");
        }
        assert!(direct || !a.peer_copy_supported(&b));
        let source = a.create_from_slice(bytemuck::cast_slice(&data)).unwrap();
        let there = a.to_client(source, &b, ElemType::U32).unwrap();
        let back = b.to_client(there.clone(), &a, ElemType::U32).unwrap();
        assert!(b.read_one(there).unwrap().to_elems::<u32>() == data);
        assert!(a.read_one(back).unwrap().to_elems::<u32>() == data);
        // A pitched tensor arrives dense (cuMemcpy3DPeerAsync on the peer path).
        let (rows, cols) = (1000usize, 777usize);
        let layout = a
            .create_tensor(Bytes::from_slice(&data[..rows * cols]), [rows, cols], 4)
            .unwrap();
        assert!(layout.strides[0] > cols, "{:?}", layout.strides);
        let descriptor =
            layout
                .memory
                .clone()
                .copy_descriptor([rows, cols], layout.strides.clone(), 4);
        let copy = a.to_client_tensor(descriptor, &b, ElemType::U32).unwrap();
        assert!(b.read_one(copy).unwrap().to_elems::<u32>()[..] == data[..rows * cols]);
    }
}

/// The access GPU `reader` has to `handle`'s first byte (`cuMemGetAccess`): 0 for none,
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE` (3) for read-write.
fn access_of(client: &Client, handle: &Handle, reader: u32) -> u64 {
    with_device_buffers(client, &[handle], move |buffers, _| {
        // SAFETY: CUmemLocation is a plain C struct; all-zero is valid before the fields
        // below are set.
        let mut location: sys::CUmemLocation = unsafe { std::mem::zeroed() };
        location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        location.id = reader as i32;
        let mut flags = 0u64;
        // SAFETY: `buffers[0].ptr` is a live, page-mapped address lent for this closure;
        // `flags` and `location` outlive the call.
        let result = unsafe { sys::cuMemGetAccess(&mut flags, &location, buffers[0].ptr) };
        assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "cuMemGetAccess");
        flags
    })
    .unwrap()
}

/// Page-mapped memory (the growable pool, the default, and the paged pool) is granted to a
/// peer GPU by the first peer copy to it (memory mapped before) and as it is mapped (memory
/// mapped after), so the copy runs GPU to GPU: without the grant `cuMemcpyPeerAsync` still
/// copies the right bytes, but through the driver's staging (38.5 GB/s against 397 GB/s at
/// 1 GiB on two H200s), so the bytes alone can't tell. Copies to every GPU and back.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn page_mapped_memory_is_granted_to_a_peer_by_its_first_copy_and_copied_there_directly() {
    let Some(count) = gpus() else {
        return;
    };
    let mut paged = CubertConfig::default();
    paged.memory.paged = true;
    for (config, pool) in [(CubertConfig::default(), "growable"), (paged, "paged")] {
        let gpus: Vec<Client> = (0..count)
            .map(|index| client(index, &config, DeviceHandleMode::Threaded))
            .collect();
        let source = &gpus[0];
        let pattern = |seed: u32, len: usize| -> Vec<u32> {
            (0..len as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) ^ seed)
                .collect()
        };
        let early_data = pattern(1, 16 * MIB);
        let early = source
            .create_from_slice(bytemuck::cast_slice(&early_data))
            .unwrap();
        let mapped = |client: &Client| {
            client
                .memory_report()
                .unwrap()
                .pools
                .into_iter()
                .find(|report| report.name == pool)
                .map_or(0, |report| report.bytes_in_use)
        };
        assert!(
            mapped(source) >= (64 * MIB) as u64,
            "the {pool} pool holds the source"
        );
        for (index, gpu) in gpus.iter().enumerate().skip(1) {
            if !source.peer_copy_supported(gpu) {
                eprintln!("note: GPUs 0 and {index} can't access each other: not tested");
                continue;
            }
            let reader = index as u32;
            assert_eq!(
                access_of(source, &early, reader),
                0,
                "{pool}: granted lazily"
            );
            let there = source.to_client(early.clone(), gpu, ElemType::U32).unwrap();
            assert_eq!(
                access_of(source, &early, reader),
                READ_WRITE,
                "{pool}: the first copy to GPU {index} grants it what was mapped"
            );
            assert!(
                gpu.read_one(there.clone()).unwrap().to_elems::<u32>() == early_data,
                "{pool}: mapped before the first copy, to GPU {index}"
            );
            // Mapped after this GPU was granted access: granted as it is mapped.
            let late_data = pattern(index as u32 + 2, 24 * MIB);
            let late = source
                .create_from_slice(bytemuck::cast_slice(&late_data))
                .unwrap();
            assert_eq!(
                access_of(source, &late, reader),
                READ_WRITE,
                "{pool}: mapped after the first copy to GPU {index}, granted to it"
            );
            let there_late = source.to_client(late, gpu, ElemType::U32).unwrap();
            assert!(
                gpu.read_one(there_late).unwrap().to_elems::<u32>() == late_data,
                "{pool}: mapped after the first copy, to GPU {index}"
            );
            // And back: GPU `index`'s own mapped memory, read by GPU 0.
            assert!(mapped(gpu) >= (64 * MIB) as u64, "{pool} on GPU {index}");
            let back = gpu.to_client(there, source, ElemType::U32).unwrap();
            assert!(
                source.read_one(back).unwrap().to_elems::<u32>() == early_data,
                "{pool}: back from GPU {index}"
            );
        }
    }
}

/// Both `to_client` paths on a single GPU: two servers on GPU 0 act as two devices; the
/// direct copy (same GPU) and the host round trip (`peer_copy = false`) agree.
#[test]
#[ignore = "needs a CUDA device"]
fn to_client_paths_agree_between_two_servers_of_one_gpu() {
    if device_count() == 0 {
        eprintln!("skipped: needs a CUDA device");
        return;
    }
    let data: Vec<u32> = (0..(16 * MIB) as u32).map(|i| i ^ 0x5a5a_5a5a).collect();
    for peer_copy in [true, false] {
        let mut config = CubertConfig::default();
        config.cuda.peer_copy = peer_copy;
        let server = |index| {
            let server = CudaServer::with_ordinal(CudaDevice::new(index), 0, &config).unwrap();
            ComputeClient::<CudaRuntime>::from_server(server, DeviceHandleMode::Threaded).unwrap()
        };
        let (a, b) = (server(0), server(1));
        assert_eq!(a.peer_copy_supported(&b), peer_copy);
        let source = a.create_from_slice(bytemuck::cast_slice(&data)).unwrap();
        let copy = a.to_client(source, &b, ElemType::U32).unwrap();
        assert!(
            b.read_one(copy).unwrap().to_elems::<u32>() == data,
            "peer_copy {peer_copy}"
        );
    }
}

/// Where `cubert` is: `TEST_CUBERT_BIN`, else next to this test binary's directory.
fn cubert_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TEST_CUBERT_BIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.parent()?.join("cubert");
    candidate.is_file().then_some(candidate)
}

/// The rank half of the multi-process tests: run as a child with the launcher's variables.
#[test]
#[ignore = "run as a rank by the multi-process tests"]
fn rank_worker() {
    if std::env::var(WORKER).is_err() {
        return;
    }
    let group = ProcessGroup::from_env()
        .unwrap()
        .expect("launcher variables");
    let device = CudaDevice::new(group.local_rank());
    let client = ComputeClient::<CudaRuntime>::load(&device).unwrap();
    let members = client.init_process_group(&group).unwrap();
    let rank = group.rank() as usize;
    let world = group.world_size() as usize;
    for (len, dtype, op) in [
        (1usize, ElemType::F32, ReduceOperation::Sum),
        (MIB / 4, ElemType::F32, ReduceOperation::Sum),
        (64 * MIB, ElemType::F32, ReduceOperation::Mean),
        (1_000_003, ElemType::I32, ReduceOperation::Mean),
        (4097, ElemType::BF16, ReduceOperation::Sum),
    ] {
        let src = client
            .create(Bytes::from_bytes_vec(input(rank, len, dtype)))
            .unwrap();
        let dst = client.empty(src.size() as usize).unwrap();
        client
            .all_reduce(src, dst.clone(), dtype, members.clone(), op)
            .unwrap();
        client.sync_collective().unwrap();
        let got = client.read_one(dst).unwrap();
        assert!(
            got[..] == expected(world, len, dtype, op)[..],
            "rank {rank}: {op:?} of {len} {dtype} is wrong"
        );
    }
    // All-gather, reduce-scatter and broadcast across the processes.
    let len = 1_000_003;
    let part = client
        .create(Bytes::from_bytes_vec(input(rank, len, ElemType::F32)))
        .unwrap();
    let gathered = client.empty(len * 4 * world).unwrap();
    client
        .all_gather(part, gathered.clone(), ElemType::F32, members.clone())
        .unwrap();
    let whole = client
        .create(Bytes::from_bytes_vec(input(
            rank,
            len * world,
            ElemType::I32,
        )))
        .unwrap();
    let scattered = client.empty(len * 4).unwrap();
    client
        .reduce_scatter(
            whole,
            scattered.clone(),
            ElemType::I32,
            members.clone(),
            ReduceOperation::Sum,
        )
        .unwrap();
    let root = world - 1;
    let broadcast = client
        .create(Bytes::from_bytes_vec(input(rank, len, ElemType::BF16)))
        .unwrap();
    client
        .broadcast(
            broadcast.clone(),
            ElemType::BF16,
            members[root],
            members.clone(),
        )
        .unwrap();
    client.sync_collective().unwrap();
    let want: Vec<u8> = (0..world)
        .flat_map(|r| input(r, len, ElemType::F32))
        .collect();
    assert!(
        client.read_one(gathered).unwrap()[..] == want[..],
        "rank {rank}: all_gather is wrong"
    );
    let sums = expected(world, len * world, ElemType::I32, ReduceOperation::Sum);
    assert!(
        client.read_one(scattered).unwrap()[..] == sums[rank * len * 4..(rank + 1) * len * 4],
        "rank {rank}: reduce_scatter is wrong"
    );
    assert!(
        client.read_one(broadcast).unwrap()[..] == input(root, len, ElemType::BF16)[..],
        "rank {rank}: broadcast is wrong"
    );
    // Round the ring, even ranks sending first.
    let len = 3 * MIB;
    let outgoing = client
        .create(Bytes::from_bytes_vec(input(rank, len, ElemType::U8)))
        .unwrap();
    let incoming = client.empty(len).unwrap();
    let next = members[(rank + 1) % world];
    let previous = members[(rank + world - 1) % world];
    if rank.is_multiple_of(2) {
        client
            .send(outgoing, ElemType::U8, next, members.clone())
            .unwrap();
        client
            .recv(incoming.clone(), ElemType::U8, previous, members.clone())
            .unwrap();
    } else {
        client
            .recv(incoming.clone(), ElemType::U8, previous, members.clone())
            .unwrap();
        client
            .send(outgoing, ElemType::U8, next, members.clone())
            .unwrap();
    }
    client.sync_collective().unwrap();
    let got = client.read_one(incoming).unwrap();
    assert!(got[..] == input((rank + world - 1) % world, len, ElemType::U8)[..]);
    eprintln!("rank {rank} of {world}: every check passed");
}

fn worker_command(program: &std::path::Path) -> Command {
    let mut command = Command::new(program);
    command.env(WORKER, "1").env("NCCL_NVLS_ENABLE", "0");
    command
}

/// `cubert launch --nproc N` runs N ranks (2, and one per GPU) of this binary's
/// `rank_worker`, which all-reduce and exchange through a process group.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn process_groups_started_by_cubert_launch_reduce_exactly() {
    let Some(count) = gpus() else {
        return;
    };
    let Some(cubert) = cubert_binary() else {
        eprintln!("skipped: no cubert binary (set TEST_CUBERT_BIN)");
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let mut sizes = vec![2];
    if count > 2 {
        sizes.push(count);
    }
    for nproc in sizes {
        let status = worker_command(&cubert)
            .args(["launch", "--nproc", &nproc.to_string(), "--"])
            .arg(&exe)
            .args(["--ignored", "--exact", "rank_worker", "--nocapture"])
            .status()
            .unwrap();
        assert!(status.success(), "cubert launch --nproc {nproc}: {status}");
    }
}

/// The same ranks started directly (the environment a launcher on several hosts would
/// give): every rank reduces exactly.
#[test]
#[ignore = "needs 2 or more CUDA devices"]
fn process_group_of_every_gpu_reduces_exactly() {
    let Some(count) = gpus() else {
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let address = format!("127.0.0.1:{}", free_local_port().unwrap());
    let mut children: Vec<_> = (0..count)
        .map(|rank| {
            worker_command(&exe)
                .args(["--ignored", "--exact", "rank_worker", "--nocapture"])
                .env("CUBERT_RANK", rank.to_string())
                .env("CUBERT_WORLD_SIZE", count.to_string())
                .env("CUBERT_LOCAL_RANK", rank.to_string())
                .env("CUBERT_MASTER_ADDR", &address)
                .env("CUBERT_COLLECTIVE_TIMEOUT", "120")
                .spawn()
                .unwrap()
        })
        .collect();
    for (rank, child) in children.iter_mut().enumerate() {
        let status = child.wait().unwrap();
        assert!(status.success(), "rank {rank}: {status}");
    }
}
