//! Kernel and task faults: kernels that panic, return an error, can't be built or launched;
//! a task that panics on the runner; and two regressions (a huge broadcast read, standard
//! kernels launched with absurd lengths).

use crate::support::*;
use cubert_cpu::CpuRuntime;
use cubert_cpu::fault::FaultPlan;
use cubert_cpu::{CpuKernel, KernelError};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::kernel::standard::{StandardKernel, encode_scalar};
use cubert_runtime::{
    Bytes, CubeCount, CubeDim, ElemType, Handle, KernelArguments, LaunchError, MetadataBindingInfo,
    Runtime, ServerError, StreamId, ops,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Kernels that panic (in one cube of many) or return an error fail their launch with
/// `KernelFailed` at the next sync of their stream; the device keeps serving that stream,
/// its other streams and other threads, and no buffer changes.
#[test]
fn kernel_panics_and_errors_are_returned_and_the_device_keeps_serving() {
    const ROUNDS: u64 = 20;
    let client = clean_client(0);
    let busy = client.with_stream(StreamId::new((5 << 40) + 2));
    let kept = Kept::create(&client, 31, 100_000);
    let panicking = CpuKernel::new("panics_in_cube_5", CubeDim::new_1d(4), |ctx| {
        let out = ctx.buffer::<u32>(0)?;
        if ctx.cube_index() == 5 {
            panic!("injected panic in cube 5");
        }
        for unit in ctx.units() {
            out.store(unit.absolute_x as usize, 7);
        }
        Ok(())
    });
    let failing = CpuKernel::new("fails", CubeDim::new_single(), |_| {
        Err(KernelError::new("injected kernel error"))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (busy, stop) = (busy.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let values: Vec<i32> = (0..1000).map(|i| i * rounds as i32).collect();
                let a = busy.create(Bytes::from_slice(&values)).unwrap();
                let out = busy.empty(4000).unwrap();
                ops::add(&busy, &a, &a, &out, 1000, ElemType::I32).unwrap();
                let read = busy.read_one(out).unwrap().to_elems::<i32>();
                assert!(
                    read.iter()
                        .zip(&values)
                        .all(|(r, v)| *r == v.wrapping_mul(2))
                );
                rounds += 1;
            }
            rounds
        })
    };
    let mut injected = 0u64;
    for round in 0..ROUNDS {
        let target = client.empty(64 * 4).unwrap();
        let (kernel, expected) = if round % 2 == 0 {
            (panicking.clone(), "injected panic")
        } else {
            (failing.clone(), "injected kernel error")
        };
        let arguments = KernelArguments::new().with_buffer(target.to_binding());
        client
            .launch(kernel, CubeCount::new_1d(16), arguments)
            .unwrap();
        injected += 1;
        match client.sync().unwrap_err() {
            ServerError::KernelFailed { reason, .. } => {
                assert!(reason.contains(expected), "{reason}")
            }
            other => panic!("expected KernelFailed, got {other:?}"),
        }
        client.sync().expect("the error is returned once");
        kept.check(&client, "after a failed kernel");
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = worker.join().unwrap();
    assert!(rounds > 0);
    eprintln!(
        "kernel faults: {injected} injected ({} panics, {} errors), {injected} returned as \
         KernelFailed and recovered; the busy stream ran {rounds} checked rounds meanwhile",
        ROUNDS.div_ceil(2),
        ROUNDS / 2
    );
}

/// A kernel the backend can't build (the CPU's counterpart of a compile error: arithmetic
/// on booleans), a kernel with an empty or oversized cube dim, and a launch over too many
/// cubes are refused at launch with an error; nothing runs and the client keeps working.
#[test]
fn kernels_that_cannot_be_built_or_launched_are_errors() {
    let client = clean_client(0);
    let kept = Kept::create(&client, 41, 4096);
    let a = client.create(Bytes::from_slice(&[1u8; 16])).unwrap();
    let mut refused = 0;
    let error = ops::add(&client, &a, &a, &a, 16, ElemType::Bool).unwrap_err();
    assert!(error.to_string().contains("boolean"), "{error}");
    refused += 1;
    let empty_dim = CpuKernel::new("empty_dim", CubeDim::new_3d(0, 1, 1), |_| Ok(()));
    let error = client
        .launch(empty_dim, CubeCount::new_single(), KernelArguments::new())
        .unwrap_err();
    assert!(error.to_string().contains("empty cube dim"), "{error}");
    refused += 1;
    let huge = CpuKernel::new("huge", CubeDim::new_1d(u32::MAX), |_| Ok(()));
    let error = client
        .launch(huge, CubeCount::new_single(), KernelArguments::new())
        .unwrap_err();
    assert!(matches!(error, LaunchError::TooManyResources(_)), "{error}");
    refused += 1;
    let noop = CpuKernel::new("noop", CubeDim::new_single(), |_| Ok(()));
    let error = client
        .launch(
            noop,
            CubeCount::Static(u32::MAX, u32::MAX, u32::MAX),
            KernelArguments::new().with_info(MetadataBindingInfo::custom(vec![1])),
        )
        .unwrap_err();
    assert!(matches!(error, LaunchError::TooManyResources(_)), "{error}");
    refused += 1;
    client.sync().expect("nothing was queued");
    kept.check(&client, "after refused launches");
    ops::add(&client, &a, &a, &a, 16, ElemType::U8).unwrap();
    assert_eq!(client.read_one(a).unwrap().to_vec(), vec![2u8; 16]);
    eprintln!("unbuildable/unlaunchable kernels: {refused} refused with an error, 0 ran");
}

/// A task that panics on the runner thread (threaded) or the caller's thread (inline) is
/// returned as an error by the next `flush`/`sync`; the device keeps serving.
#[test]
fn a_panicking_task_is_an_error_and_the_runner_survives() {
    let mut recovered = 0;
    for mode in [DeviceHandleMode::Threaded, DeviceHandleMode::Inline] {
        let plan = FaultPlan::new();
        let client = faulty_client(&plan, 0, mode);
        let kept = Kept::create(&client, 51, 3000);
        for round in 0..10 {
            client
                .device_handle()
                .submit(move |_| panic!("injected panic in task {round}"));
            let error = client.flush().unwrap_err();
            assert!(
                error.to_string().contains("injected panic"),
                "{mode:?}: {error}"
            );
            kept.check(&client, "after a panicking task");
            recovered += 1;
        }
        Kept::create(&client, 52, 100).check(&client, "a new buffer");
    }
    eprintln!("panicking tasks: {recovered} injected, {recovered} returned and recovered");
}

/// Regression: a read whose descriptor broadcasts (stride 0) a tiny buffer to a huge shape
/// passes validation (every element is inside the buffer) but needs a huge host buffer. It
/// used to abort the process ("memory allocation of 70368744177664 bytes failed"); it is now
/// `OutOfMemory`, and the client keeps working.
#[test]
fn huge_broadcast_read_is_an_error_not_an_abort() {
    let client = clean_client(0);
    let kept = Kept::create(&client, 81, 16);
    for elements in [1usize << 46, usize::MAX / 2] {
        let descriptor = cubert_runtime::CopyDescriptor::new(
            kept.handle.to_binding(),
            cubert_runtime::Shape::from([elements]),
            cubert_runtime::Strides::from([0]),
            1,
        );
        let error = client.read_one_tensor(descriptor).unwrap_err();
        assert!(is_out_of_memory(&error), "{elements}: {error:?}");
    }
    kept.check(&client, "after a huge broadcast read");
}

/// A launch to try, boxed so several kinds fit in one list.
type Launch<'a> = Box<dyn Fn() -> Result<(), LaunchError> + 'a>;

/// Regression (found while writing the kernel-argument fuzz target): a checked launch of a
/// standard kernel with an absurd length (`fill` of `usize::MAX` elements into 16) used to
/// loop over every out-of-bounds element, keeping the device busy for ages. Elements past
/// every buffer are now counted, not visited: the launch fails with `OutOfBounds` at once,
/// the in-bounds part is done, and the device keeps serving.
#[test]
fn launches_with_absurd_lengths_fail_fast_with_out_of_bounds() {
    let outcomes = within(Duration::from_secs(60), || {
        let client = clean_client(0);
        let a = client.create(Bytes::from_slice(&[3i32; 16])).unwrap();
        let b = client.create(Bytes::from_slice(&[4i32; 16])).unwrap();
        let out = client.empty(16 * 4).unwrap();
        let huge = usize::MAX;
        // Raw launches of the standard kernels: the `ops` helpers refuse these lengths at
        // the call (behaviour test `ops_refuse_lengths_beyond_their_handles_at_the_call`);
        // this defends the kernels themselves against a caller who builds the launch.
        let raw = |kernel: StandardKernel, buffers: &[&Handle], info: Vec<u64>| {
            let kernel = CpuRuntime::standard_kernel(kernel).unwrap();
            let arguments = KernelArguments::new()
                .with_buffers(buffers.iter().map(|handle| handle.to_binding()).collect())
                .with_info(MetadataBindingInfo::custom(info));
            client.launch(kernel, CubeCount::new_1d(4), arguments)
        };
        let huge = huge as u64;
        let i32s = ElemType::I32;
        let launches: Vec<(&str, Launch<'_>)> = vec![
            (
                "fill",
                Box::new(|| {
                    raw(
                        StandardKernel::Fill(i32s),
                        &[&out],
                        vec![huge, encode_scalar(1i32)],
                    )
                }),
            ),
            (
                "copy",
                Box::new(|| raw(StandardKernel::Copy(i32s), &[&a, &out], vec![huge])),
            ),
            (
                "cast",
                Box::new(|| {
                    let cast = StandardKernel::Cast {
                        from: i32s,
                        to: ElemType::F32,
                    };
                    raw(cast, &[&a, &out], vec![huge])
                }),
            ),
            (
                "add",
                Box::new(|| raw(StandardKernel::Add(i32s), &[&a, &b, &out], vec![huge])),
            ),
            (
                "mul",
                Box::new(|| raw(StandardKernel::Mul(i32s), &[&a, &b, &out], vec![1 << 62])),
            ),
            (
                "reduce_sum",
                Box::new(|| {
                    raw(
                        StandardKernel::ReduceSum(i32s),
                        &[&a, &out],
                        vec![1 << 40, 1 << 40],
                    )
                }),
            ),
            (
                "reduce_sum rows",
                Box::new(|| raw(StandardKernel::ReduceSum(i32s), &[&a, &out], vec![huge, 1])),
            ),
            (
                "matmul",
                Box::new(|| {
                    raw(
                        StandardKernel::Matmul(i32s),
                        &[&a, &b, &out],
                        vec![1 << 40, 1 << 40, 4],
                    )
                }),
            ),
        ];
        let mut outcomes = Vec::new();
        for (name, launch) in &launches {
            launch().unwrap();
            let error = client.sync().unwrap_err();
            assert!(
                matches!(error, ServerError::OutOfBounds { .. }),
                "{name}: {error:?}"
            );
            outcomes.push(name.to_string());
        }
        ops::add(&client, &a, &b, &out, 16, ElemType::I32).unwrap();
        let sum = client.read_one(out.clone()).unwrap().to_elems::<i32>();
        assert_eq!(sum, vec![7; 16]);
        outcomes
    });
    assert_eq!(outcomes.len(), 8);
}

/// A kernel that makes a blocking call to its own client from inside a cube is refused
/// with the re-entrancy error on every thread that runs cubes: the runner (or the caller,
/// inline) and the device's worker threads. Cubes on the workers used to queue the call
/// behind the launch they are part of and deadlock the device.
#[test]
fn blocking_calls_from_any_cube_thread_are_reentrant_not_deadlocks() {
    for mode in [DeviceHandleMode::Threaded, DeviceHandleMode::Inline] {
        let errors = within(Duration::from_secs(60), move || {
            let mut config = config();
            config.cpu.threads = 4;
            let server = cubert_cpu::CpuServer::new(cubert_cpu::CpuDevice::new(1), &config)
                .expect("a CPU server starts");
            let client: Client = cubert_runtime::ComputeClient::from_server(server, mode).unwrap();
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let kernel = {
                let (client, seen) = (client.clone(), seen.clone());
                CpuKernel::new("calls_its_client", CubeDim::new_single(), move |_| {
                    let outcome = client.sync().map_err(|error| error.to_string());
                    seen.lock().unwrap().push(outcome);
                    Ok(())
                })
            };
            client
                .launch(kernel, CubeCount::new_1d(64), KernelArguments::new())
                .unwrap();
            client.sync().unwrap();
            // The device keeps serving.
            let handle = client.create(Bytes::from_slice(&[5u32; 4])).unwrap();
            assert_eq!(client.read_one(handle).unwrap().to_elems::<u32>(), [5; 4]);
            seen.lock().unwrap().clone()
        });
        assert_eq!(errors.len(), 64, "{mode:?}");
        for outcome in errors {
            let error = outcome.expect_err("a blocking call from a cube must be refused");
            assert!(error.contains("from inside a task"), "{mode:?}: {error}");
        }
    }
}

/// A checked launch of 2^40 cubes that all miss a 16-byte buffer stops once it has
/// counted a million out-of-bounds accesses, instead of running every cube (minutes to
/// hours) before it reports; the error says the launch was cut short, and the device
/// keeps serving.
#[test]
fn huge_grid_missing_its_buffer_is_cut_short() {
    let (error, sum) = within(Duration::from_secs(60), || {
        let client = clean_client(2);
        let small = client.create(Bytes::from_slice(&[0u32; 4])).unwrap();
        let kernel = CpuKernel::new("writes_past_the_end", CubeDim::new_single(), |ctx| {
            let out = ctx.buffer::<u32>(0)?;
            out.store(4 + ctx.cube_index() as usize, 1);
            Ok(())
        });
        let arguments = KernelArguments::new().with_buffers(vec![small.to_binding()]);
        client
            .launch(kernel, CubeCount::new_2d(1 << 25, 1 << 15), arguments)
            .unwrap();
        let error = client.sync().unwrap_err();
        let a = client.create(Bytes::from_slice(&[3i32; 16])).unwrap();
        let out = client.empty(16 * 4).unwrap();
        ops::add(&client, &a, &a, &out, 16, ElemType::I32).unwrap();
        (error, client.read_one(out).unwrap().to_elems::<i32>())
    });
    match error {
        ServerError::OutOfBounds {
            accesses, first, ..
        } => {
            assert!(accesses >= cubert_cpu::MAX_COUNTED_VIOLATIONS);
            assert!(accesses < 1 << 40, "{accesses}");
            assert!(first.contains("stopped"), "{first}");
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    assert_eq!(sum, vec![6; 16]);
}

/// A checked matmul whose `m`, `k` and `n` are all absurd (found by the kernel-arguments
/// fuzz target: it ran for hours, trillions of missing loads inside the cubes) stops its
/// loops once the launch has counted enough out-of-bounds accesses, and fails at once.
#[test]
fn checked_matmul_with_absurd_sizes_everywhere_fails_fast() {
    let error = within(Duration::from_secs(60), || {
        let client = clean_client(3);
        let lhs = client.empty(51_163).unwrap();
        let rhs = client.empty(65_535).unwrap();
        let out = client.empty(52).unwrap();
        let kernel = CpuRuntime::standard_kernel(StandardKernel::Matmul(ElemType::F32)).unwrap();
        let arguments = KernelArguments::new()
            .with_buffers(vec![lhs.to_binding(), rhs.to_binding(), out.to_binding()])
            .with_info(MetadataBindingInfo::custom(vec![
                u64::MAX,
                u64::MAX,
                18_427_897_340_749_484_554,
            ]));
        client
            .launch(kernel, CubeCount::new_3d(21, 3, 1), arguments)
            .unwrap();
        client.sync().unwrap_err()
    });
    assert!(
        matches!(error, ServerError::OutOfBounds { .. }),
        "{error:?}"
    );
}
