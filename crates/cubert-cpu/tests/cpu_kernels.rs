//! Tests of the CPU kernel API: what a Rust kernel sees (cube position, units, shared
//! memory, info words), the three execution modes, and how kernel failures are reported.

#![allow(clippy::unwrap_used)]

use cubert_cpu::{CpuDevice, CpuKernel, CpuRuntime, CpuServer, KernelError};
use cubert_runtime::config::{BoundsCheckMode, CubertConfig, DeviceHandleMode};
use cubert_runtime::{
    Bytes, ComputeClient, CubeCount, CubeDim, KernelArguments, MetadataBindingInfo, ServerError,
};

fn client_with(config: CubertConfig) -> ComputeClient<CpuRuntime> {
    let server = CpuServer::new(CpuDevice::new(0), &config).unwrap();
    ComputeClient::from_server(server, DeviceHandleMode::Threaded).unwrap()
}

fn client() -> ComputeClient<CpuRuntime> {
    client_with(CubertConfig::default())
}

fn args(handles: &[&cubert_runtime::Handle], info: Vec<u64>) -> KernelArguments {
    KernelArguments::new()
        .with_buffers(handles.iter().map(|h| h.to_binding()).collect())
        .with_info(MetadataBindingInfo::custom(info))
}

/// Writes, for every unit, `cube_index * 1000 + unit index` at its absolute position.
fn position_kernel() -> CpuKernel {
    CpuKernel::new("positions", CubeDim::new_2d(4, 2), |ctx| {
        let out = ctx.buffer::<u32>(0)?;
        let (count_x, _, _) = ctx.cube_count();
        let width = u64::from(count_x) * 4;
        let cube = ctx.cube_index() as u32;
        for unit in ctx.units() {
            let i = (unit.absolute_y * width + unit.absolute_x) as usize;
            out.store(i, cube * 1000 + unit.index);
        }
        Ok(())
    })
}

#[test]
fn every_unit_of_every_cube_runs_once_with_its_position() {
    let client = client();
    let (cubes_x, cubes_y) = (3u32, 2u32);
    let len = (cubes_x * 4 * cubes_y * 2) as usize;
    let out = client.empty(len * 4).unwrap();
    client
        .launch(
            position_kernel(),
            CubeCount::new_2d(cubes_x, cubes_y),
            args(&[&out], vec![]),
        )
        .unwrap();
    let values = client.read_one(out).unwrap().to_elems::<u32>();
    for y in 0..cubes_y * 2 {
        for x in 0..cubes_x * 4 {
            let cube = (y / 2) * cubes_x + x / 4;
            let unit = (y % 2) * 4 + x % 4;
            assert_eq!(values[(y * cubes_x * 4 + x) as usize], cube * 1000 + unit);
        }
    }
}

#[test]
fn dynamic_cube_count_is_read_from_its_buffer() {
    let client = client();
    let count = client.create(Bytes::from_elems(vec![3u32, 2, 1])).unwrap();
    let out = client.empty(48 * 4).unwrap();
    client
        .launch(
            position_kernel(),
            CubeCount::Dynamic(count.binding()),
            args(&[&out], vec![]),
        )
        .unwrap();
    let values = client.read_one(out).unwrap().to_elems::<u32>();
    // The last cube (index 5) wrote its last unit (7) at the last position.
    assert_eq!(values[47], 5007);
}

#[test]
fn dynamic_cube_count_buffer_too_small_is_an_error() {
    let client = client();
    let count = client.create(Bytes::from_elems(vec![3u32])).unwrap();
    let out = client.empty(64).unwrap();
    client
        .launch(
            position_kernel(),
            CubeCount::Dynamic(count.binding()),
            args(&[&out], vec![]),
        )
        .unwrap();
    let error = client.sync().unwrap_err();
    assert!(error.to_string().contains("12 bytes"), "{error}");
}

#[test]
fn shared_memory_is_private_to_each_cube_and_zeroed() {
    // Each cube sums its 64 inputs through shared memory (one phase writes, the next reads).
    let kernel = CpuKernel::new("shared_sum", CubeDim::new_1d(64), |ctx| {
        let input = ctx.buffer::<f32>(0)?;
        let out = ctx.buffer::<f32>(1)?;
        let cube = ctx.cube_index() as usize;
        let units: Vec<_> = ctx.units().collect();
        let shared = ctx.shared::<f32>();
        if shared.iter().any(|v| *v != 0.0) {
            return Err(KernelError::new("shared memory was not zeroed"));
        }
        for unit in &units {
            shared[unit.index as usize] = input.load(cube * 64 + unit.index as usize);
        }
        out.store(cube, shared.iter().sum());
        Ok(())
    })
    .with_shared_memory(64 * 4);
    let client = client();
    let values: Vec<f32> = (0..64 * 16).map(|i| (i % 7) as f32).collect();
    let expected: Vec<f32> = values.chunks(64).map(|c| c.iter().sum()).collect();
    let input = client.create(Bytes::from_elems(values)).unwrap();
    let out = client.empty(16 * 4).unwrap();
    client
        .launch(kernel, CubeCount::new_1d(16), args(&[&input, &out], vec![]))
        .unwrap();
    assert_eq!(client.read_one(out).unwrap().to_elems::<f32>(), expected);
}

/// Stores 1.0 at every index in `0..info[0]`, regardless of the buffer's length.
fn writer() -> CpuKernel {
    CpuKernel::new("writer", CubeDim::new_single(), |ctx| {
        let out = ctx.buffer::<f32>(0)?;
        let probe = out.load(out.len() + 3);
        for i in 0..ctx.info_usize(0)? {
            out.store(i, 1.0 + probe);
        }
        Ok(())
    })
}

#[test]
fn checked_launch_skips_out_of_bounds_accesses_and_reports_them() {
    let client = client();
    let out = client.create(Bytes::from_elems(vec![0.0f32; 4])).unwrap();
    let neighbour = client.create(Bytes::from_elems(vec![7.0f32; 64])).unwrap();
    client
        .launch(writer(), CubeCount::new_single(), args(&[&out], vec![10]))
        .unwrap();
    match client.sync().unwrap_err() {
        ServerError::OutOfBounds {
            kernel, accesses, ..
        } => {
            assert_eq!(kernel, "writer");
            // One out-of-bounds load and six stores past the end.
            assert_eq!(accesses, 7);
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
    // In-bounds stores happened (and the out-of-bounds load returned 0); nothing else moved.
    assert_eq!(
        client.read_one(out).unwrap().to_elems::<f32>(),
        vec![1.0; 4]
    );
    assert_eq!(
        client.read_one(neighbour).unwrap().to_elems::<f32>(),
        vec![7.0; 64]
    );
}

#[test]
fn validate_mode_runs_to_the_end_and_reports_every_access() {
    let mut config = CubertConfig::default();
    config.compilation.bounds_check = BoundsCheckMode::Validate;
    let client = client_with(config);
    let out = client.create(Bytes::from_elems(vec![0.0f32; 2])).unwrap();
    // SAFETY: the launch runs in Validate mode (bounds_check = validate), so every access is
    // checked.
    unsafe {
        client
            .launch_unchecked(writer(), CubeCount::new_single(), args(&[&out], vec![5]))
            .unwrap();
    }
    match client.sync().unwrap_err() {
        ServerError::OutOfBounds { accesses, .. } => assert_eq!(accesses, 4),
        other => panic!("expected OutOfBounds, got {other}"),
    }
    assert_eq!(
        client.read_one(out).unwrap().to_elems::<f32>(),
        vec![1.0; 2]
    );
}

#[test]
fn unchecked_launch_of_an_in_bounds_kernel_runs() {
    let client = client();
    let out = client.create(Bytes::from_elems(vec![0.0f32; 8])).unwrap();
    let kernel = CpuKernel::new("in_bounds", CubeDim::new_1d(8), |ctx| {
        let out = ctx.buffer::<f32>(0)?;
        for unit in ctx.units() {
            out.store(unit.index as usize, unit.index as f32);
        }
        Ok(())
    });
    // SAFETY: the kernel writes indices 0..8 of an 8-element buffer.
    unsafe {
        client
            .launch_unchecked(kernel, CubeCount::new_single(), args(&[&out], vec![]))
            .unwrap();
    }
    client.sync().unwrap();
    let expected: Vec<f32> = (0..8).map(|i| i as f32).collect();
    assert_eq!(client.read_one(out).unwrap().to_elems::<f32>(), expected);
}

#[test]
fn kernel_error_is_reported_at_sync_and_the_device_keeps_serving() {
    let client = client();
    let failing = CpuKernel::new("failing", CubeDim::new_single(), |_| {
        Err(KernelError::new("deliberate failure"))
    });
    client
        .launch(failing, CubeCount::new_1d(4), KernelArguments::new())
        .unwrap();
    match client.sync().unwrap_err() {
        ServerError::KernelFailed { kernel, reason, .. } => {
            assert_eq!(kernel, "failing");
            assert!(reason.contains("deliberate failure"));
        }
        other => panic!("expected KernelFailed, got {other}"),
    }
    let data = client.create(Bytes::from_elems(vec![5u8; 3])).unwrap();
    assert_eq!(client.read_one(data).unwrap().to_vec(), vec![5, 5, 5]);
}

#[test]
fn panicking_kernel_becomes_an_error_and_the_device_keeps_serving() {
    let client = client();
    let before = client.create(Bytes::from_elems(vec![9i32; 16])).unwrap();
    let panicking = CpuKernel::new("panicking", CubeDim::new_single(), |ctx| {
        if ctx.cube_index() == 3 {
            panic!("deliberate panic in cube 3");
        }
        Ok(())
    });
    client
        .launch(panicking, CubeCount::new_1d(8), KernelArguments::new())
        .unwrap();
    match client.sync().unwrap_err() {
        ServerError::KernelFailed { reason, .. } => {
            assert!(reason.contains("deliberate panic"), "{reason}")
        }
        other => panic!("expected KernelFailed, got {other}"),
    }
    assert_eq!(
        client.read_one(before).unwrap().to_elems::<i32>(),
        vec![9; 16]
    );
}

#[test]
fn missing_buffer_or_info_word_fails_the_launch_with_a_message() {
    let client = client();
    let needs_two = CpuKernel::new("needs_two", CubeDim::new_single(), |ctx| {
        ctx.buffer::<f32>(1)?;
        Ok(())
    });
    client
        .launch(needs_two, CubeCount::new_single(), KernelArguments::new())
        .unwrap();
    let error = client.sync().unwrap_err().to_string();
    assert!(error.contains("buffer 1 is not bound"), "{error}");

    let needs_info = CpuKernel::new("needs_info", CubeDim::new_single(), |ctx| {
        ctx.info_word(2)?;
        Ok(())
    });
    client
        .launch(needs_info, CubeCount::new_single(), KernelArguments::new())
        .unwrap();
    let error = client.sync().unwrap_err().to_string();
    assert!(error.contains("info word 2 is missing"), "{error}");
}

#[test]
fn racing_cubes_leave_one_of_the_written_values() {
    // Every cube writes its index to element 0: a racy kernel, whose result is one of the
    // written values (never torn, never a crash).
    let client = client();
    let out = client.empty(4).unwrap();
    let racy = CpuKernel::new("racy", CubeDim::new_single(), |ctx| {
        let out = ctx.buffer::<u32>(0)?;
        for _ in 0..100 {
            out.store(0, ctx.cube_index() as u32 * 0x0101_0101);
        }
        Ok(())
    });
    client
        .launch(racy, CubeCount::new_1d(64), args(&[&out], vec![]))
        .unwrap();
    let value = client.read_one(out).unwrap().to_elems::<u32>()[0];
    assert_eq!(value % 0x0101_0101, 0, "torn write: {value:#x}");
    assert!(value / 0x0101_0101 < 64);
}

#[test]
fn empty_cube_count_launches_nothing() {
    let client = client();
    let never = CpuKernel::new("never", CubeDim::new_single(), |_| {
        Err(KernelError::new("must not run"))
    });
    client
        .launch(never, CubeCount::new_3d(4, 0, 2), KernelArguments::new())
        .unwrap();
    client.sync().unwrap();
}
