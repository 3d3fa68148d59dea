//! CUDA-specific behaviour on a real GPU: kernels from source and PTX, compile errors,
//! checked launches, device faults, transfers (pinned, pageable, file-backed, pitched),
//! stream ordering, device-timed profiling, graphs, TMA and the on-disk compile cache.
//!
//! Every test needs a CUDA device: `#[ignore = "needs a CUDA device"]`; scripts/gpu-test
//! runs them on the GPU machine with `--include-ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{SCALE, TMA_TILE_COPY};
use cubert_cuda::{ArgsCapacity, CudaDevice, CudaKernel, CudaRuntime, CudaServer};
use cubert_runtime::config::{CubertConfig, DeviceHandleMode};
use cubert_runtime::kernel::standard::{StandardKernel, encode_scalar};
use cubert_runtime::kernel::{TensorMapBinding, TensorMapFormat, TensorMapMeta};
use cubert_runtime::properties::TimingMethod;
use cubert_runtime::{
    Bytes, ComputeClient, CubeCount, CubeDim, ElemType, KernelArguments, LaunchError,
    MetadataBindingInfo, Runtime, ServerError, StreamId, ops,
};

fn client_with(config: &CubertConfig) -> ComputeClient<CudaRuntime> {
    let server = CudaServer::new(CudaDevice::new(0), config).expect("a CUDA device");
    ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap()
}

fn client() -> ComputeClient<CudaRuntime> {
    client_with(&CubertConfig::default())
}

fn args(handles: &[&cubert_runtime::Handle], info: Vec<u64>) -> KernelArguments {
    KernelArguments::new()
        .with_buffers(handles.iter().map(|h| h.to_binding()).collect())
        .with_info(MetadataBindingInfo::custom(info))
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 10_000) as f32 / 100.0 - 50.0
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA device"]
fn kernel_from_cuda_source_runs_with_scalars() {
    let client = client();
    let data = values(1000, 1);
    let handle = client.create(Bytes::from_slice(&data)).unwrap();
    let kernel = CudaKernel::from_cuda("scale", "scale", SCALE, CubeDim::new_1d(128));
    let factor = cubert_runtime::kernel::standard::encode_scalar(2.5f32);
    client
        .launch(
            kernel,
            CubeCount::new_1d(8),
            args(&[&handle], vec![1000, factor]),
        )
        .unwrap();
    let out = client.read_one(handle).unwrap().to_elems::<f32>();
    let expected: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
    assert_eq!(out, expected);
}

#[test]
#[ignore = "needs a CUDA device"]
fn kernel_with_a_small_argument_block_runs_and_refuses_more_arguments_than_it_holds() {
    let client = client();
    let data = values(1000, 3);
    let handle = client.create(Bytes::from_slice(&data)).unwrap();
    let kernel = CudaKernel::from_cuda("scale_small", "scale", SCALE, CubeDim::new_1d(128))
        .with_args_capacity(ArgsCapacity::new(1, 2));
    let factor = cubert_runtime::kernel::standard::encode_scalar(-1.5f32);
    client
        .launch(
            kernel.clone(),
            CubeCount::new_1d(8),
            args(&[&handle], vec![1000, factor]),
        )
        .unwrap();
    let out = client.read_one(handle.clone()).unwrap().to_elems::<f32>();
    let expected: Vec<f32> = data.iter().map(|v| v * -1.5).collect();
    assert_eq!(out, expected);
    // A second buffer doesn't fit the block: refused, and the data is untouched.
    let other = client.create(Bytes::from_slice(&[0.0f32; 4])).unwrap();
    let message = match client.launch(
        kernel,
        CubeCount::new_1d(8),
        args(&[&handle, &other], vec![1000, factor]),
    ) {
        Err(error) => format!("{error:?}"),
        Ok(()) => format!("{:?}", client.sync().unwrap_err()),
    };
    assert!(message.contains("room for 1 and 2"), "{message}");
    assert_eq!(client.read_one(handle).unwrap().to_elems::<f32>(), expected);
}

#[test]
#[ignore = "needs a CUDA device"]
fn compile_error_is_returned_with_the_nvrtc_log() {
    let client = client();
    let broken = CudaKernel::from_cuda(
        "broken",
        "broken",
        "extern \"C\" __global__ void broken(const __grid_constant__ cubert::Args a) { undeclared_name(); }",
        CubeDim::new_1d(1),
    );
    client
        .launch(broken, CubeCount::new_single(), KernelArguments::new())
        .unwrap();
    match client.sync().unwrap_err() {
        ServerError::Launch(LaunchError::CompilationError(error)) => {
            assert!(error.log.contains("undeclared_name"), "{}", error.log);
        }
        other => panic!("expected a compilation error, got {other}"),
    }
    // The client keeps working.
    let handle = client.create(Bytes::from_slice(&[1u8, 2, 3])).unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_vec(), vec![1, 2, 3]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn checked_out_of_bounds_write_is_reported_and_writes_nothing() {
    let client = client();
    let small = client.create(Bytes::from_slice(&[0.0f32; 10])).unwrap();
    let guard = client.create(Bytes::from_slice(&[7.0f32; 64])).unwrap();
    // `fill` of 100 elements into a 10-element buffer.
    let fill = CudaRuntime::standard_kernel(StandardKernel::Fill(ElemType::F32)).unwrap();
    let arguments = KernelArguments::new()
        .with_buffers(vec![small.to_binding()])
        .with_info(MetadataBindingInfo::custom(vec![
            100,
            encode_scalar(3.0f32),
        ]));
    client
        .launch(fill, CubeCount::new_1d(1), arguments)
        .unwrap();
    match client.sync().unwrap_err() {
        ServerError::OutOfBounds {
            kernel, accesses, ..
        } => {
            assert_eq!(kernel, "fill_f32");
            // The kernel's loop ends one past the longest buffer (an absurd length fails
            // fast): element 10 is the one out-of-bounds store it makes.
            assert_eq!(accesses, 1);
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
    assert_eq!(
        client.read_one(small).unwrap().to_elems::<f32>(),
        vec![3.0; 10]
    );
    assert_eq!(
        client.read_one(guard).unwrap().to_elems::<f32>(),
        vec![7.0; 64]
    );
}

/// Spins for `info[0]` clock cycles.
const SPIN: &str = "extern \"C\" __global__ void spin(const __grid_constant__ cubert::Args a) { long long start = clock64(); while (clock64() - start < (long long)a.info_words[0]) {} }";

/// Launches one thread that spins for 40 million clock cycles (about 20 ms on an H200).
fn spin_20_ms(client: &ComputeClient<CudaRuntime>) {
    let spin = CudaKernel::from_cuda("spin", "spin", SPIN, CubeDim::new_single());
    client
        .launch(spin, CubeCount::new_1d(1), args(&[], vec![40_000_000]))
        .unwrap();
}

/// Launches `fill` of 11 elements into the 10 of `small`: one out-of-bounds store.
fn fill_one_past(client: &ComputeClient<CudaRuntime>, small: &cubert_runtime::Handle) {
    let fill = CudaRuntime::standard_kernel(StandardKernel::Fill(ElemType::F32)).unwrap();
    client
        .launch(
            fill,
            CubeCount::new_1d(1),
            args(&[small], vec![11, encode_scalar(3.0f32)]),
        )
        .unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_sync_reports_the_streams_errors_whether_its_caller_or_the_completion_thread_waits() {
    let client = client();
    let small = client.create(Bytes::from_slice(&[0.0f32; 10])).unwrap();
    let is_out_of_bounds = |result: Result<(), ServerError>| {
        matches!(result, Err(ServerError::OutOfBounds { accesses: 1, .. }))
    };
    // Short work: the caller sees the event complete itself.
    fill_one_past(&client, &small);
    assert!(is_out_of_bounds(client.sync()));
    assert!(client.sync().is_ok(), "an error is reported once");
    // About 20 ms of work: past its first watch the blocked caller waits in the driver; a
    // sync dropped unpolled goes to the completion thread.
    for wait in [true, false] {
        spin_20_ms(&client);
        fill_one_past(&client, &small);
        if wait {
            assert!(is_out_of_bounds(client.sync()));
        } else {
            // A sync dropped before the device got there loses nothing: the next one
            // reports the launch's error.
            drop(client.sync_async());
            assert!(is_out_of_bounds(client.sync()));
        }
    }
    assert!(client.sync().is_ok());
    assert_eq!(
        client.read_one(small).unwrap().to_elems::<f32>(),
        vec![3.0; 10]
    );
}

/// Polls `future` with a waker that does nothing, as an async executor would (not
/// `block_on`), until it is ready.
fn poll_like_an_executor<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_read_lands_its_bytes_and_reports_queued_errors_whoever_waits_for_it() {
    let client = client();
    let data: Vec<u8> = (0..4 << 20).map(|i| (i % 253) as u8).collect();
    let handle = client.create_from_slice(&data).unwrap();
    let small = client.create(Bytes::from_slice(&[0.0f32; 10])).unwrap();
    let long_work = || spin_20_ms(&client);
    // Short work: the caller sees the copy complete itself.
    assert!(client.read_one(handle.clone()).unwrap()[..] == data[..]);
    // About 20 ms of work first: the blocked caller waits in the driver.
    long_work();
    assert!(client.read_one(handle.clone()).unwrap()[..] == data[..]);
    // An error queued behind long work comes back instead of the bytes, once.
    long_work();
    fill_one_past(&client, &small);
    assert!(matches!(
        client.read_one(handle.clone()),
        Err(ServerError::OutOfBounds { accesses: 1, .. })
    ));
    assert!(client.read_one(handle.clone()).unwrap()[..] == data[..]);
    // Polled by an executor, the read is handed to the completion thread, which answers.
    long_work();
    let read = poll_like_an_executor(client.read_async(vec![handle.clone()])).unwrap();
    assert!(read[0][..] == data[..]);
    // Dropped before the device got there: its pinned buffer is kept until the copy is
    // done. Reads on another stream, not behind the long work, take buffers from the pool
    // meanwhile and hold them past the dropped copy: none of them is written by it.
    let reader = client.with_stream(StreamId::new(1 << 40));
    let other: Vec<u8> = data.iter().map(|byte| byte ^ 0xff).collect();
    let other_handle = reader.create_from_slice(&other).unwrap();
    reader.sync().unwrap();
    long_work();
    drop(client.read_async(vec![handle.clone()]));
    let held: Vec<Bytes> = (0..3)
        .map(|_| reader.read_one(other_handle.clone()).unwrap())
        .collect();
    client.sync().unwrap();
    assert!(held.iter().all(|bytes| bytes[..] == other[..]));
    assert!(client.read_one(handle).unwrap()[..] == data[..]);
    assert_eq!(
        client.read_one(small).unwrap().to_elems::<f32>(),
        vec![3.0; 10]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_large_slice_uploads_in_place_and_a_large_read_into_lands_every_chunk_and_reports_queued_errors()
 {
    let client = client();
    // Past the chunked reads' threshold, with a ragged last chunk.
    let len = (200 << 20) + 3;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    // A slice this large is read in place by the pipelined upload.
    let handle = client.create_from_slice(&data).unwrap();
    let mut out = vec![0xa5u8; len];
    client.read_into(handle.clone(), &mut out).unwrap();
    assert!(out == data, "the bytes read differ");
    // An error queued on the stream comes back instead, as for every read.
    let small = client.create(Bytes::from_slice(&[0.0f32; 10])).unwrap();
    fill_one_past(&client, &small);
    assert!(matches!(
        client.read_into(handle.clone(), &mut out),
        Err(ServerError::OutOfBounds { .. })
    ));
    // The error is reported once; the next read lands every byte again.
    out.fill(0);
    client.read_into(handle, &mut out).unwrap();
    assert!(out == data);
}

const FAULT: &str = "extern \"C\" __global__ void fault(const __grid_constant__ cubert::Args a) { *(volatile int*)16 = 1; }";
const TRAP: &str =
    "extern \"C\" __global__ void fault(const __grid_constant__ cubert::Args a) { __trap(); }";

/// The child half of the device-fault tests: `kind` is `illegal-address` or `trap`.
/// Checks what survives a sticky device fault and prints `CHILD-CHECKS-PASSED`.
fn fault_child(kind: &str) {
    let source = if kind == "trap" { TRAP } else { FAULT };
    // A second client of the same device, opened before the fault, with data on it.
    let bystander = client();
    let kept = bystander.create(Bytes::from_slice(&[5u8; 64])).unwrap();
    bystander.sync().unwrap();
    let faulty = client();
    let kernel = CudaKernel::from_cuda("fault", "fault", source, CubeDim::new_1d(1));
    faulty
        .launch(kernel, CubeCount::new_single(), KernelArguments::new())
        .unwrap();
    let error = faulty.sync().unwrap_err();
    assert!(
        matches!(error, ServerError::ServerUnhealthy { .. }),
        "{kind}: {error}"
    );
    println!("{kind}: the faulting client's sync: {error}");
    // Every later call of the faulting client reports it instead of touching the context.
    let handle = faulty.empty(4).unwrap();
    let read = faulty.read_one(handle);
    assert!(
        matches!(read, Err(ServerError::ServerUnhealthy { .. })),
        "{kind}: {read:?}"
    );
    assert!(matches!(
        faulty.flush(),
        Err(ServerError::ServerUnhealthy { .. })
    ));
    // The other client shares the device's primary context: its next call fails with an
    // error (never wrong bytes, a hang or a panic).
    let other = bystander.read_one(kept.clone());
    match &other {
        Ok(bytes) => {
            assert_eq!(
                bytes.to_vec(),
                vec![5u8; 64],
                "{kind}: wrong bytes survived"
            );
            println!("{kind}: the second client of the device still reads its data");
        }
        Err(error) => println!("{kind}: the second client of the device fails: {error}"),
    }
    let more = bystander
        .create(Bytes::from_slice(&[1u8; 16]))
        .map_err(ServerError::from)
        .and_then(|handle| bystander.read_one(handle));
    match &more {
        Ok(bytes) => assert_eq!(bytes.to_vec(), vec![1u8; 16], "{kind}"),
        Err(error) => println!("{kind}: new work on the second client fails: {error}"),
    }
    // A new CUDA client is an error here, or works correctly: never a crash.
    match CudaServer::new(CudaDevice::new(0), &CubertConfig::default()) {
        Ok(_) => println!("{kind}: a new CUDA context works after the fault"),
        Err(error) => println!("{kind}: a new CUDA context fails after the fault: {error}"),
    }
    // The rest of the process keeps working.
    let cpu = cubert_cpu::default_client().unwrap();
    let data = cpu.create(Bytes::from_slice(&[1u8, 2, 3])).unwrap();
    assert_eq!(cpu.read_one(data).unwrap().to_vec(), vec![1, 2, 3]);
    println!("CHILD-CHECKS-PASSED");
}

/// Runs `fault_child(kind)` in a child process (a sticky fault poisons CUDA for the whole
/// process on current drivers), then checks that this process's GPU work is unaffected.
fn fault_in_a_child_process(test: &str, kind: &str) {
    if let Some(child_kind) = std::env::var_os("CUBERT_TEST_FAULT_CHILD") {
        if child_kind == kind {
            fault_child(kind);
        }
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--include-ignored", "--nocapture"])
        .env("CUBERT_TEST_FAULT_CHILD", kind)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout.lines().filter(|line| line.starts_with(kind)) {
        println!("child: {line}");
    }
    assert!(
        output.status.success() && stdout.contains("CHILD-CHECKS-PASSED"),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let fresh = client();
    let handle = fresh.create(Bytes::from_slice(&[9u8; 16])).unwrap();
    assert_eq!(fresh.read_one(handle).unwrap().to_vec(), vec![9; 16]);
}

/// A kernel writing to an invalid address: the faulting client reports `ServerUnhealthy`
/// on every later call, a second client of the device gets errors or its intact data
/// (never wrong bytes), a new client is an error or works, the CPU backend of the process
/// keeps working, and another process's GPU work is unaffected.
#[test]
#[ignore = "needs a CUDA device"]
fn device_fault_is_reported_as_unhealthy_and_never_aborts_the_process() {
    fault_in_a_child_process(
        "device_fault_is_reported_as_unhealthy_and_never_aborts_the_process",
        "illegal-address",
    );
}

/// As the illegal-address test, for a kernel that executes `__trap()`.
#[test]
#[ignore = "needs a CUDA device"]
fn device_trap_is_reported_as_unhealthy_and_never_aborts_the_process() {
    fault_in_a_child_process(
        "device_trap_is_reported_as_unhealthy_and_never_aborts_the_process",
        "trap",
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn ptx_kernel_runs() {
    let client = client();
    let handle = client.create(Bytes::from_slice(&[0u32; 4])).unwrap();
    // Stores 42 in the first word of buffer 0 (the Args block starts with the pointers).
    let ptx = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry write42(.param .align 8 .b8 args[1040])
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [args];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 42;
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;
    let kernel = CudaKernel::from_ptx("write42", "write42", ptx, CubeDim::new_1d(1));
    client
        .launch(kernel, CubeCount::new_single(), args(&[&handle], vec![]))
        .unwrap();
    assert_eq!(
        client.read_one(handle).unwrap().to_elems::<u32>(),
        vec![42, 0, 0, 0]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn pinned_pageable_and_file_backed_uploads_round_trip() {
    let client = client();
    // Pinned, from reserve_staging.
    let mut pinned = client.reserve_staging(&[4096]).unwrap().pop().unwrap();
    assert_eq!(
        pinned.property(),
        cubert_runtime::AllocationProperty::Pinned
    );
    for (i, byte) in pinned.iter_mut().enumerate() {
        *byte = (i % 251) as u8;
    }
    let expected = pinned.to_vec();
    let handle = client.create(pinned).unwrap();
    assert_eq!(client.read_one(handle).unwrap().to_vec(), expected);
    // Pageable, larger than several staging chunks.
    let big: Vec<u8> = (0..100 * 1024 * 1024 + 7)
        .map(|i| (i * 7 % 256) as u8)
        .collect();
    let handle = client.create(Bytes::from_bytes_vec(big.clone())).unwrap();
    let back = client.read_one(handle).unwrap();
    assert_eq!(back.property(), cubert_runtime::AllocationProperty::Pinned);
    assert!(back[..] == big[..], "pageable upload mismatch");
    // File-backed.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, &big[..40 * 1024 * 1024]).unwrap();
    let mapped = Bytes::from_file(file.path(), 0, 40 * 1024 * 1024).unwrap();
    let handle = client.create(mapped).unwrap();
    assert!(client.read_one(handle).unwrap()[..] == big[..40 * 1024 * 1024]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn pitched_tensor_reads_back_dense() {
    let client = client();
    let data = values(3 * 5, 2);
    let layout = client
        .create_tensor(Bytes::from_slice(&data), [3, 5], 4)
        .unwrap();
    assert!(
        layout.strides[0] > 5,
        "rows should be pitched: {:?}",
        layout.strides
    );
    let back = client
        .read_one_tensor(
            layout
                .memory
                .clone()
                .copy_descriptor([3, 5], layout.strides.clone(), 4),
        )
        .unwrap()
        .to_elems::<f32>();
    assert_eq!(back, data);
}

#[test]
#[ignore = "needs a CUDA device"]
fn memory_written_on_one_stream_is_read_correctly_on_another() {
    let base = client();
    let writer = base.with_stream(StreamId::new(1 << 40));
    let reader = base.with_stream(StreamId::new((1 << 40) + 1));
    let n = 8 << 20;
    let data = values(n, 3);
    let source = writer.create(Bytes::from_slice(&data)).unwrap();
    let target = writer.empty(n * 4).unwrap();
    // A long chain of work on the writer's stream...
    for _ in 0..20 {
        ops::copy(&writer, &source, &target, n, ElemType::F32).unwrap();
    }
    ops::add(&writer, &source, &source, &target, n, ElemType::F32).unwrap();
    // ...then a read on the other stream must see its end.
    let back = reader.read_one(target).unwrap().to_elems::<f32>();
    assert!(back.iter().zip(&data).all(|(b, d)| *b == d + d));
}

#[test]
#[ignore = "needs a CUDA device"]
fn profile_measures_device_time_with_events() {
    let client = client();
    let (m, k, n) = (512, 512, 512);
    let lhs = client.create(Bytes::from_slice(&values(m * k, 4))).unwrap();
    let rhs = client.create(Bytes::from_slice(&values(k * n, 5))).unwrap();
    let out = client.empty(m * n * 4).unwrap();
    let ((), duration) = client
        .profile(
            || ops::matmul(&client, &lhs, &rhs, &out, m, k, n, ElemType::F32).unwrap(),
            "matmul",
        )
        .unwrap();
    assert_eq!(duration.timing_method(), TimingMethod::Device);
    let ticks = duration.resolve_blocking().unwrap();
    assert!(ticks.duration().as_nanos() > 0);
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_thread_using_another_context_keeps_it_while_its_allocations_launches_and_syncs_run() {
    use cudarc::driver::sys::{self, CUresult};
    let client = client();
    let x = client.create(Bytes::from_elems(vec![1.0f32; 256])).unwrap();
    let one = client.create(Bytes::from_elems(vec![1.0f32; 256])).unwrap();
    client.sync().unwrap();
    let current = || {
        let mut current = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        let status = unsafe { sys::cuCtxGetCurrent(&mut current) };
        assert_eq!(status, CUresult::CUDA_SUCCESS);
        current
    };
    std::thread::scope(|scope| {
        // A thread of another library, with a context of its own current.
        scope.spawn(|| {
            let mut device = 0;
            let mut own = std::ptr::null_mut();
            // SAFETY: valid out pointers; the context is current on this thread only and
            // destroyed below, after its last use.
            unsafe {
                assert_eq!(sys::cuDeviceGet(&mut device, 0), CUresult::CUDA_SUCCESS);
                assert_eq!(
                    sys::cuCtxCreate_v4(&mut own, std::ptr::null_mut(), 0, device),
                    CUresult::CUDA_SUCCESS
                );
            }
            for _ in 0..3 {
                // On an idle runner: a small block and a large one (the growable pool's
                // driver calls), queued to the runner since another context is current.
                drop(client.empty(1024).unwrap());
                drop(client.empty(64 << 20).unwrap());
                ops::add(&client, &x, &one, &x, 256, ElemType::F32).unwrap();
                client.sync().unwrap();
            }
            assert_eq!(current(), own);
            // SAFETY: created above, no longer used.
            assert_eq!(unsafe { sys::cuCtxDestroy_v2(own) }, CUresult::CUDA_SUCCESS);
        });
        // A thread with no context current: its work runs, on this thread when the runner
        // is idle (the device's context then stays current here, as the CUDA runtime
        // leaves a thread it has used), else on the runner.
        scope.spawn(|| {
            assert!(current().is_null());
            ops::add(&client, &x, &one, &x, 256, ElemType::F32).unwrap();
            client.sync().unwrap();
            // Allocated here when the runner is idle, used, and read back.
            let sum = client.empty(256 * 4).unwrap();
            let large = client.empty(64 << 20).unwrap();
            ops::add(&client, &one, &one, &sum, 256, ElemType::F32).unwrap();
            ops::add(&client, &one, &one, &large, 256, ElemType::F32).unwrap();
            assert_eq!(
                client.read_one(sum).unwrap().to_elems::<f32>(),
                vec![2.0; 256]
            );
            let large = client.read_one(large.view(0, 256 * 4).unwrap()).unwrap();
            assert_eq!(large.to_elems::<f32>(), vec![2.0; 256]);
        });
    });
    assert_eq!(
        client.read_one(x).unwrap().to_elems::<f32>(),
        vec![5.0; 256]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_large_block_last_used_on_another_stream_is_reused_only_after_that_use() {
    let base = client();
    let owner = base.with_stream(StreamId::new((1 << 40) + 40));
    let other = base.with_stream(StreamId::new((1 << 40) + 41));
    // 64 MiB: the growable pool's blocks.
    let n = 16 << 20;
    let ones = owner.create(Bytes::from_elems(vec![1.0f32; n])).unwrap();
    let zeros = owner.create(Bytes::from_elems(vec![0.0f32; n])).unwrap();
    let source = owner.create(Bytes::from_elems(vec![3.0f32; n])).unwrap();
    let copy = other.empty(n * 4).unwrap();
    // Both kernels are compiled before the race, on the other stream's own memory (a
    // use of the owner's memory there would order the owner after it): compiling `add`
    // at its first launch below took longer than the spin, so the other stream's read
    // had run before the owner's write was queued and the test passed without the wait.
    spin_20_ms(&other);
    ops::add(&other, &copy, &copy, &copy, n, ElemType::F32).unwrap();
    owner.sync().unwrap();
    other.sync().unwrap();
    // The other stream reads the source 20 ms from now; the source is dropped at once.
    spin_20_ms(&other);
    ops::add(&other, &source, &zeros, &copy, n, ElemType::F32).unwrap();
    drop(source);
    let reserved = base.memory_usage().unwrap().bytes_reserved;
    // The owner's next block of that size is the source's memory: its write must wait for
    // the other stream's read.
    let reused = owner.empty(n * 4).unwrap();
    ops::add(&owner, &ones, &ones, &reused, n, ElemType::F32).unwrap();
    assert_eq!(
        base.memory_usage().unwrap().bytes_reserved,
        reserved,
        "the source's block was reused"
    );
    let copied = other.read_one(copy).unwrap().to_elems::<f32>();
    assert!(
        copied.iter().all(|&x| x == 3.0),
        "the read saw the later write"
    );
    let written = owner.read_one(reused).unwrap().to_elems::<f32>();
    assert!(written.iter().all(|&x| x == 2.0));
}

#[test]
#[ignore = "needs a CUDA device"]
fn replayed_graph_produces_the_same_bytes_as_the_eager_run() {
    let client = client();
    let n = 1 << 16;
    let a = values(n, 6);
    let b = values(n, 7);
    let run = |graph: bool| -> Vec<f32> {
        let x = client.create(Bytes::from_slice(&a)).unwrap();
        let y = client.create(Bytes::from_slice(&b)).unwrap();
        let t = client.empty(n * 4).unwrap();
        client.sync().unwrap();
        let work = || {
            for _ in 0..5 {
                ops::add(&client, &x, &y, &t, n, ElemType::F32).unwrap();
                ops::mul(&client, &t, &y, &x, n, ElemType::F32).unwrap();
            }
        };
        if graph {
            client.start_capture().unwrap();
            work();
            let graph = client.end_capture().unwrap();
            assert_eq!(graph.launches(), 10);
            client.replay(&graph).unwrap();
        } else {
            work();
        }
        client.read_one(x).unwrap().to_elems::<f32>()
    };
    let eager = run(false);
    let replayed = run(true);
    assert_eq!(eager, replayed);
}

#[test]
#[ignore = "needs a CUDA device"]
fn a_captured_graph_is_written_as_dot_with_one_kernel_node_per_launch() {
    let client = client();
    let one = client.create(Bytes::from_elems(vec![1.0f32])).unwrap();
    let counter = client.create(Bytes::from_elems(vec![0.0f32])).unwrap();
    client.sync().unwrap();
    client.start_capture().unwrap();
    for _ in 0..3 {
        ops::add(&client, &counter, &one, &counter, 1, ElemType::F32).unwrap();
    }
    let graph = client.end_capture().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.dot");
    cubert_cuda::write_graph_dot(&client, &graph, &path).unwrap();
    let dot = std::fs::read_to_string(&path).unwrap();
    println!("{dot}");
    assert!(dot.starts_with("digraph"), "{dot}");
    let kernel_nodes = dot.lines().filter(|line| line.contains("KERNEL")).count();
    assert_eq!(kernel_nodes, 3, "{dot}");
    // The graph still replays after being written.
    client.replay(&graph).unwrap();
    assert_eq!(client.read_one(counter).unwrap().to_elems::<f32>(), [3.0]);
    // An unwritable path is an error.
    let missing = dir.path().join("no-such-dir").join("graph.dot");
    assert!(cubert_cuda::write_graph_dot(&client, &graph, &missing).is_err());
}

#[test]
#[ignore = "needs a CUDA device"]
fn tma_copies_a_tile_into_shared_memory() {
    let client = client();
    if !client.features().tma {
        panic!("this test needs a GPU with TMA (Hopper or newer)");
    }
    let (rows, cols) = (64usize, 48usize);
    let source: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let src = client.create(Bytes::from_slice(&source)).unwrap();
    let out = client.empty(256 * 4).unwrap();
    let map = TensorMapMeta {
        format: TensorMapFormat::Tiled {
            tile_size: [16, 16].into(),
        },
        shape: [rows, cols].into(),
        strides: [cols, 1].into(),
        elem_stride: [1, 1].into(),
        interleave: Default::default(),
        swizzle: Default::default(),
        prefetch: Default::default(),
        oob_fill: Default::default(),
        elem: ElemType::F32,
    };
    let kernel = CudaKernel::from_cuda(
        "tma_tile_copy",
        "tma_tile_copy",
        TMA_TILE_COPY,
        CubeDim::new_1d(128),
    );
    let arguments = args(&[&out], vec![16, 32])
        .with_tensor_maps(vec![TensorMapBinding::new(src.to_binding(), map)]);
    client
        .launch(kernel, CubeCount::new_single(), arguments)
        .unwrap();
    let tile = client.read_one(out).unwrap().to_elems::<f32>();
    for r in 0..16 {
        for c in 0..16 {
            assert_eq!(
                tile[r * 16 + c],
                source[(32 + r) * cols + 16 + c],
                "at ({r}, {c})"
            );
        }
    }
}

/// A kernel source unique to this process run, so no earlier cache entry exists.
fn unique_source(tag: &str) -> String {
    format!("// {tag}\n{SCALE}")
}

#[test]
#[ignore = "needs a CUDA device"]
fn second_process_finds_compiled_kernels_on_disk() {
    if let Ok(dir) = std::env::var("CUBERT_TEST_CACHE_CHILD") {
        // The child: same cache directory, same kernel: nothing is compiled.
        let mut config = CubertConfig::default();
        config.compilation.cache_dir = Some(dir.clone().into());
        let client = client_with(&config);
        let tag = std::env::var("CUBERT_TEST_CACHE_TAG").unwrap();
        run_unique_kernel(&client, &tag);
        let stats = client
            .device_handle()
            .submit_blocking(|s| s.compile_stats())
            .unwrap();
        assert_eq!(stats.nvrtc_compiles, 0, "{stats:?}");
        assert_eq!(stats.disk_hits, 1, "{stats:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let mut config = CubertConfig::default();
    config.compilation.cache_dir = Some(dir.path().into());
    let client = client_with(&config);
    run_unique_kernel(&client, &tag);
    let stats = client
        .device_handle()
        .submit_blocking(|s| s.compile_stats())
        .unwrap();
    assert_eq!(stats.nvrtc_compiles, 1, "{stats:?}");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "second_process_finds_compiled_kernels_on_disk",
            "--include-ignored",
            "--nocapture",
        ])
        .env("CUBERT_TEST_CACHE_CHILD", dir.path())
        .env("CUBERT_TEST_CACHE_TAG", &tag)
        .status()
        .unwrap();
    assert!(status.success(), "the child process failed");
}

fn run_unique_kernel(client: &ComputeClient<CudaRuntime>, tag: &str) {
    let handle = client.create(Bytes::from_slice(&[1.0f32; 64])).unwrap();
    let kernel = CudaKernel::from_cuda("scale", "scale", unique_source(tag), CubeDim::new_1d(64));
    let factor = cubert_runtime::kernel::standard::encode_scalar(3.0f32);
    client
        .launch(
            kernel,
            CubeCount::new_single(),
            args(&[&handle], vec![64, factor]),
        )
        .unwrap();
    assert_eq!(
        client.read_one(handle).unwrap().to_elems::<f32>(),
        vec![3.0; 64]
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn allocation_larger_than_the_device_is_buffer_too_big_and_memory_limit_gives_out_of_memory() {
    let client = client();
    let total = client.properties().memory.total_memory as usize;
    assert!(matches!(
        client.empty(total + (1 << 30)),
        Err(cubert_runtime::IoError::BufferTooBig { .. })
    ));
    let mut config = CubertConfig::default();
    config.cuda.memory_limit = 256 << 20;
    let limited = client_with(&config);
    let first = limited.empty(200 << 20).unwrap();
    let second = limited.empty(200 << 20).unwrap();
    let error = limited.read_one(second).unwrap_err();
    assert!(
        matches!(
            error,
            ServerError::Io(cubert_runtime::IoError::OutOfMemory { .. })
        ),
        "{error}"
    );
    drop(first);
    let third = limited.create(Bytes::from_slice(&[5u8; 1 << 20])).unwrap();
    assert_eq!(limited.read_one(third).unwrap()[..4], [5, 5, 5, 5]);
}

#[test]
#[ignore = "needs a CUDA device"]
fn paged_memory_backs_large_buffers_and_recycles_pages() {
    let mut config = CubertConfig::default();
    config.memory.paged = true;
    let client = client_with(&config);
    let mib = 1usize << 20;
    let a_data = values(16 * mib, 11);
    let b_data = values(4 * mib, 12);
    let a = client.create(Bytes::from_slice(&a_data)).unwrap();
    let b = client.create(Bytes::from_slice(&b_data)).unwrap();
    let sum = client.empty(4 * mib * 4).unwrap();
    ops::add(&client, &b, &b, &sum, 4 * mib, ElemType::F32).unwrap();
    let doubled: Vec<f32> = b_data.iter().map(|v| v + v).collect();
    assert_eq!(
        client.read_one(sum.clone()).unwrap().to_elems::<f32>(),
        doubled
    );
    let report = client.memory_report().unwrap();
    let paged = report
        .pools
        .iter()
        .find(|p| p.name == "paged")
        .expect("a paged pool");
    assert_eq!(paged.allocations, 3);
    // 64 MiB + 16 MiB + 16 MiB, in 2 MiB pages.
    assert_eq!(paged.bytes_reserved, 96 << 20);
    drop(a);
    client.sync().unwrap();
    // A different size reuses the freed block's pages instead of creating new ones.
    let c_data = values(10 * mib, 13);
    let c = client.create(Bytes::from_slice(&c_data)).unwrap();
    assert_eq!(
        client.read_one(c.clone()).unwrap().to_elems::<f32>(),
        c_data
    );
    assert_eq!(
        client.read_one(b.clone()).unwrap().to_elems::<f32>(),
        b_data
    );
    let reserved = client
        .memory_report()
        .unwrap()
        .pools
        .iter()
        .find(|p| p.name == "paged")
        .unwrap()
        .bytes_reserved;
    assert!(
        reserved <= 96 << 20,
        "pages were created instead of reused: {reserved}"
    );
    drop((b, c, sum));
    client.memory_cleanup();
    let usage = client.memory_usage().unwrap();
    assert_eq!(usage.bytes_reserved, 0, "{usage:?}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn growable_memory_keeps_data_reuses_freed_pages_and_gives_them_back_on_cleanup() {
    let mut config = CubertConfig::default();
    config.memory.growable = true;
    let client = client_with(&config);
    let mib = 1usize << 20;
    let a_data = values(16 * mib, 21);
    let b_data = values(4 * mib, 22);
    let a = client.create(Bytes::from_slice(&a_data)).unwrap();
    let b = client.create(Bytes::from_slice(&b_data)).unwrap();
    let sum = client.empty(4 * mib * 4).unwrap();
    ops::add(&client, &b, &b, &sum, 4 * mib, ElemType::F32).unwrap();
    let doubled: Vec<f32> = b_data.iter().map(|v| v + v).collect();
    assert_eq!(
        client.read_one(sum.clone()).unwrap().to_elems::<f32>(),
        doubled
    );
    let growable = |client: &ComputeClient<CudaRuntime>| {
        client
            .memory_report()
            .unwrap()
            .pools
            .into_iter()
            .find(|p| p.name == "growable")
            .expect("a growable pool")
    };
    let pool = growable(&client);
    assert_eq!(pool.allocations, 3);
    // 64 MiB + 16 MiB + 16 MiB, one after the other in the stream's range: 48 pages.
    assert_eq!(pool.bytes_reserved, 96 << 20);
    drop(a);
    client.sync().unwrap();
    // A smaller block goes where `a` was, on its mapped pages: nothing new is created.
    let c_data = values(10 * mib, 23);
    let c = client.create(Bytes::from_slice(&c_data)).unwrap();
    assert_eq!(
        client.read_one(c.clone()).unwrap().to_elems::<f32>(),
        c_data
    );
    assert_eq!(
        client.read_one(b.clone()).unwrap().to_elems::<f32>(),
        b_data
    );
    assert_eq!(growable(&client).bytes_reserved, 96 << 20);
    drop((b, c, sum));
    client.memory_cleanup();
    let usage = client.memory_usage().unwrap();
    assert_eq!(usage.bytes_reserved, 0, "{usage:?}");
    // The range grows again after a cleanup.
    let d = client.create(Bytes::from_slice(&a_data)).unwrap();
    assert_eq!(client.read_one(d).unwrap().to_elems::<f32>(), a_data);
}

/// CPU device 0 and CUDA device 0, for the differential tests.
fn cpu_and_cuda() -> (
    ComputeClient<cubert_cpu::CpuRuntime>,
    ComputeClient<CudaRuntime>,
) {
    (
        cubert_cpu::CpuRuntime::client(&cubert_cpu::CpuDevice::new(0)).unwrap(),
        client(),
    )
}

/// The kernel language's differential tests (`cubert_test_suite::differential`): CPU and
/// CUDA agree on random inputs and launch shapes.
mod differential {
    use super::cpu_and_cuda;
    use cubert_test_suite::differential;

    #[test]
    #[ignore = "needs a CUDA device"]
    fn integer_kernels_agree_bit_for_bit() {
        let (cpu, cuda) = cpu_and_cuda();
        differential::integer_kernels_agree_bit_for_bit(&cpu, &cuda);
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn float_operations_agree_exactly_or_within_4_ulps() {
        let (cpu, cuda) = cpu_and_cuda();
        differential::float_operations_agree_exactly_or_within_4_ulps(&cpu, &cuda);
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn casts_agree_bit_for_bit() {
        let (cpu, cuda) = cpu_and_cuda();
        differential::casts_agree_bit_for_bit(&cpu, &cuda);
    }

    #[test]
    #[ignore = "needs a CUDA device"]
    fn plane_sums_agree_bit_for_bit() {
        let (cpu, cuda) = cpu_and_cuda();
        differential::plane_sums_agree_bit_for_bit(&cpu, &cuda);
    }
}

/// `[runtime] max_streams` bounds the `CUstream`s a server creates however many stream ids
/// it sees, and `stream_priority` sets their CUDA priority: the default priority (0) for
/// `normal`, the device's greatest for `high`.
#[test]
#[ignore = "needs a CUDA device"]
fn stream_settings_bound_the_cuda_streams_and_set_their_priority() {
    use cubert_runtime::StreamPriority;
    for (priority, max_streams) in [(StreamPriority::Normal, 3), (StreamPriority::High, 2)] {
        let mut config = CubertConfig::default();
        config.runtime.max_streams = max_streams;
        config.runtime.stream_priority = priority;
        let mut server = CudaServer::new(CudaDevice::new(0), &config).unwrap();
        let (least, greatest) = server.stream_priority_range().unwrap();
        assert!(
            greatest < least,
            "this device has no stream priorities: {least}..{greatest}"
        );
        let want = match priority {
            StreamPriority::Normal => 0,
            StreamPriority::High => greatest,
        };
        for k in 0..10 {
            let got = server.stream_priority(StreamId::new(k)).unwrap();
            assert_eq!(got, want, "{priority:?}, stream {k}");
        }
        assert_eq!(server.device_queues(), max_streams as usize, "{priority:?}");
    }
}

/// A handle's memory lent through `interop::with_device_buffers` gets the work queued on
/// the lent stream in order: a kernel before it, a `cuMemsetD8Async` of ours, a kernel
/// after it; a handle of another device is refused before anything runs.
#[test]
#[ignore = "needs a CUDA device"]
fn lent_device_memory_is_ordered_with_the_clients_work() {
    use cubert_cuda::interop::with_device_buffers;
    let client = client();
    let len = 1 << 20;
    let x = client.create(Bytes::from_elems(vec![1u8; len])).unwrap();
    let doubled = client.empty(len).unwrap();
    ops::add(&client, &x, &x, &doubled, len, ElemType::U8).unwrap();
    let size = with_device_buffers(&client, &[&doubled], move |buffers, stream| {
        // SAFETY: the lent buffer holds `len` bytes of this device; the stream is live.
        unsafe { cudarc::driver::result::memset_d8_async(buffers[0].ptr, 5, len / 2, stream) }
            .unwrap();
        buffers[0].size
    })
    .unwrap();
    assert_eq!(size, len as u64);
    let out = client.empty(len).unwrap();
    ops::add(&client, &doubled, &x, &out, len, ElemType::U8).unwrap();
    let got = client.read_one(out).unwrap().to_vec();
    assert!(got[..len / 2].iter().all(|v| *v == 6), "{:?}", &got[..4]);
    assert!(
        got[len / 2..].iter().all(|v| *v == 3),
        "{:?}",
        &got[len - 4..]
    );
    let cpu = cubert_cpu::default_client().unwrap();
    let foreign = cpu.create(Bytes::from_elems(vec![0u8; 4])).unwrap();
    let error = with_device_buffers(&client, &[&foreign], |_, _| ()).unwrap_err();
    assert!(error.to_string().contains("belongs to"), "{error}");
}

/// `import_memory` asks the driver about the range: host memory, and a range running past
/// the allocation it starts in, are refused with `InvalidArgument` (their callbacks run at
/// once); the same device memory imported at its true size works.
#[test]
#[ignore = "needs a CUDA device"]
fn imports_of_host_memory_or_past_the_allocation_are_refused() {
    use cubert_cuda::interop::with_device_buffers;
    use cubert_runtime::memory::ForeignMemory;
    use cudarc::driver::sys;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let client = client();
    let released = Arc::new(AtomicUsize::new(0));
    let counted = |released: &Arc<AtomicUsize>| {
        let released = released.clone();
        move || {
            released.fetch_add(1, Ordering::SeqCst);
        }
    };
    let refused = |memory: ForeignMemory, why: &str| {
        // SAFETY: refused before the address is used.
        let error = unsafe { client.import_memory(memory) }.unwrap_err();
        assert!(
            matches!(
                error,
                ServerError::Io(cubert_runtime::IoError::InvalidArgument { .. })
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains(why), "{error}");
    };
    let layout = std::alloc::Layout::from_size_align(1 << 16, 1 << 12).unwrap();
    // SAFETY: a non-zero layout.
    let host = unsafe { std::alloc::alloc_zeroed(layout) };
    refused(
        ForeignMemory::new(host as u64, 1 << 16, counted(&released)),
        "device memory",
    );
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(host, layout) };
    let size = 1u64 << 20;
    let device = with_device_buffers(&client, &[], move |_, _| {
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: a valid out pointer; the context is current in the closure.
        let result = unsafe { sys::cuMemAlloc_v2(&mut ptr, size as usize) };
        assert_eq!(result, sys::CUresult::CUDA_SUCCESS);
        ptr
    })
    .unwrap();
    refused(
        ForeignMemory::new(device, 2 * size, counted(&released)),
        "ends at",
    );
    assert_eq!(released.load(Ordering::SeqCst), 2);
    let freed = released.clone();
    let memory = ForeignMemory::new(device, size, move || {
        // SAFETY: allocated above, freed once, after the last use, context current.
        if unsafe { sys::cuMemFree_v2(device) } == sys::CUresult::CUDA_SUCCESS {
            freed.fetch_add(1, Ordering::SeqCst);
        }
    });
    // SAFETY: the megabyte is ours until the callback frees it.
    let imported = unsafe { client.import_memory(memory) }.unwrap();
    client
        .write(&imported, Bytes::from_elems(vec![9u8; size as usize]))
        .unwrap();
    assert!(
        client
            .read_one(imported.clone())
            .unwrap()
            .iter()
            .all(|b| *b == 9)
    );
    drop(imported);
    let start = std::time::Instant::now();
    while released.load(Ordering::SeqCst) < 3 && start.elapsed().as_secs() < 10 {
        client.sync().unwrap();
    }
    assert_eq!(released.load(Ordering::SeqCst), 3);
}

/// cuBLAS's f32 and bf16 products, run on cubert handles through the interop, equal
/// cubert's own matmul bit for bit on integer inputs (every partial sum exact in f32, every
/// result exact in bf16), and a shape the handles don't hold is refused.
#[test]
#[ignore = "needs a CUDA device"]
fn cublas_products_on_cubert_handles_match_cubert_matmul() {
    use cubert_cuda::cublas::{Cublas, cublas_status};
    use half::bf16;
    if let Err(reason) = cublas_status() {
        eprintln!("skipped: {reason}");
        return;
    }
    let client = client();
    let cublas = Cublas::new(&client).unwrap();
    let (m, k, n) = (192, 64, 96);
    let value = |i: usize, seed: usize| ((i * 7 + seed * 3) % 5) as f32 - 2.0;
    let a: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
    let b: Vec<f32> = (0..k * n).map(|i| value(i, 2)).collect();
    let (lhs, rhs) = (
        client.create(Bytes::from_elems(a.clone())).unwrap(),
        client.create(Bytes::from_elems(b.clone())).unwrap(),
    );
    let (ours, theirs) = (
        client.empty(m * n * 4).unwrap(),
        client.empty(m * n * 4).unwrap(),
    );
    ops::matmul(&client, &lhs, &rhs, &ours, m, k, n, ElemType::F32).unwrap();
    cublas
        .sgemm(&client, (&lhs, &rhs, &theirs), (m, k, n))
        .unwrap();
    let want = client.read_one(ours).unwrap().to_elems::<f32>();
    assert_eq!(client.read_one(theirs).unwrap().to_elems::<f32>(), want);
    let to_bf16 = |v: &[f32]| v.iter().map(|x| bf16::from_f32(*x)).collect::<Vec<_>>();
    let (lhs16, rhs16) = (
        client.create(Bytes::from_elems(to_bf16(&a))).unwrap(),
        client.create(Bytes::from_elems(to_bf16(&b))).unwrap(),
    );
    let (ours16, theirs16) = (
        client.empty(m * n * 2).unwrap(),
        client.empty(m * n * 2).unwrap(),
    );
    ops::matmul(&client, &lhs16, &rhs16, &ours16, m, k, n, ElemType::BF16).unwrap();
    cublas
        .gemm_bf16(&client, (&lhs16, &rhs16, &theirs16), (m, k, n))
        .unwrap();
    let want16 = client.read_one(ours16).unwrap().to_elems::<bf16>();
    assert_eq!(want16, to_bf16(&want), "cubert's bf16 matmul");
    assert_eq!(
        client
            .read_one(theirs16.clone())
            .unwrap()
            .to_elems::<bf16>(),
        want16
    );
    let error = cublas
        .sgemm(&client, (&lhs, &rhs, &theirs16), (m, k, n))
        .unwrap_err();
    assert!(error.to_string().contains("matmul"), "{error}");
}

/// Which work CUDA runs on an idle device's calling thread (`ComputeServer::CALLER_WORK`):
/// allocations, syncs and reads (host bookkeeping, copies and events queued), and the first
/// launch after a sync or a read; the launches after it go to the runner until the next
/// sync or read.
#[test]
#[ignore = "needs a CUDA device"]
fn an_idle_cuda_device_runs_allocations_syncs_reads_and_a_first_launch_on_the_caller() {
    use cubert_runtime::server::CallerWork;
    use cubert_test_suite::support::{
        assert_first_launch_after_a_wait_runs_on_the_caller, runs_on_caller,
    };
    let client = client();
    assert!(runs_on_caller(&client, CallerWork::Allocation, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Sync, 100_000));
    assert!(runs_on_caller(&client, CallerWork::Read, 100_000));
    assert!(!runs_on_caller(&client, CallerWork::Upload, 1_000));
    assert_first_launch_after_a_wait_runs_on_the_caller(&client);
    // Reads made on the caller return the data, also right behind a launch.
    let handle = client.create(Bytes::from_elems(vec![1.5f32, 2.5])).unwrap();
    let one = client.create(Bytes::from_elems(vec![1.0f32, 1.0])).unwrap();
    for round in 0..100 {
        ops::add(&client, &handle, &one, &handle, 2, ElemType::F32).unwrap();
        let read = client.read_one(handle.clone()).unwrap().to_elems::<f32>();
        assert_eq!(read, vec![2.5 + round as f32, 3.5 + round as f32]);
    }
}
