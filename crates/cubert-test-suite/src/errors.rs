//! Bad input gives errors, never panics: zero sizes, impossible and transient allocation
//! failures, data that doesn't match its shape, descriptors outside their buffer, handles of
//! another device, launches over the device's limits, out-of-bounds kernels.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{
    SeededRng, client, client_with, launch_elementwise_unchecked, read_elems, settled_usage,
    two_devices, upload,
};
use cubert_runtime::kernel::standard::{StandardKernel, encode_scalar};
use cubert_runtime::{
    Bytes, CopyDescriptor, CubeCount, CubeDim, ElemType, IoError, KernelArguments, LaunchError,
    MemoryLayoutDescriptor, MetadataBindingInfo, ResourceLimitError, Runtime, ServerError, Strides,
    ops,
};

const MIB: u64 = 1 << 20;

fn is_invalid<T: std::fmt::Debug>(result: Result<T, IoError>, what: &str) {
    assert!(
        matches!(result, Err(IoError::InvalidArgument { .. })),
        "{what}: expected InvalidArgument, got {result:?}"
    );
}

fn is_too_big<T: std::fmt::Debug>(result: Result<T, IoError>, what: &str) {
    assert!(
        matches!(result, Err(IoError::BufferTooBig { .. })),
        "{what}: expected BufferTooBig, got {result:?}"
    );
}

/// Zero-byte allocations and uploads are `InvalidArgument`, and nothing is allocated.
pub fn zero_byte_allocation_is_invalid_argument<B: TestBackend>() {
    let client = client::<B>();
    is_invalid(client.empty(0), "empty(0)");
    is_invalid(
        client.create(Bytes::from_bytes_vec(Vec::new())),
        "create(empty)",
    );
    is_invalid(client.create_from_slice(&[]), "create_from_slice(&[])");
    is_invalid(
        client.create_from_slice_pinned(&[]),
        "create_from_slice_pinned(&[])",
    );
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}

/// Tensors without elements, or with a zero element size, are `InvalidArgument`.
pub fn zero_element_tensors_are_invalid_argument<B: TestBackend>() {
    let client = client::<B>();
    is_invalid(client.empty_tensor([0], 4), "empty_tensor([0])");
    is_invalid(client.empty_tensor([3, 0], 4), "empty_tensor([3, 0])");
    is_invalid(client.empty_tensor([3, 4], 0), "elem_size 0");
    is_invalid(
        client.create_tensor(Bytes::from_bytes_vec(Vec::new()), [0, 4], 4),
        "create_tensor([0, 4])",
    );
    is_invalid(
        client.empty_tensors(vec![
            MemoryLayoutDescriptor::optimized([2, 2], 4),
            MemoryLayoutDescriptor::optimized([2, 0], 4),
        ]),
        "empty_tensors with one empty tensor",
    );
    is_invalid(client.empty_tensors(Vec::new()), "empty_tensors(none)");
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}

/// An allocation that can never fit (larger than the device's largest allocation, or a
/// size that overflows) is `BufferTooBig` at once; the client keeps working.
pub fn impossible_allocation_is_buffer_too_big<B: TestBackend>() {
    let client = client::<B>();
    let max = client.properties().memory.max_allocation_size;
    is_too_big(client.empty(usize::MAX), "empty(usize::MAX)");
    if let Ok(over) = usize::try_from(max.saturating_add(1)) {
        is_too_big(client.empty(over), "empty(max_allocation_size + 1)");
    }
    is_too_big(
        client.empty_tensor([usize::MAX, 2], 4),
        "empty_tensor overflowing",
    );
    is_too_big(
        client.empty_tensor([usize::MAX / 8, 2], 4),
        "empty_tensor over the device",
    );
    client.sync().unwrap();
    let handle = upload::<B, u32>(&client, &[1, 2, 3]);
    assert_eq!(read_elems::<B, u32>(&client, &handle), vec![1, 2, 3]);
}

/// With a small memory limit, an allocation that doesn't fit next to live ones surfaces as
/// `IoError::OutOfMemory` at the next `sync`; after freeing handles, the same allocation
/// succeeds and the client works normally.
pub fn out_of_memory_surfaces_at_sync_and_client_recovers<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_memory_limit(4 * MIB));
    let size = (3 * MIB) as usize;
    is_too_big(
        client.empty(5 * MIB as usize),
        "more than the capped device holds",
    );
    let first = client.empty(size).unwrap();
    client.sync().unwrap();
    let second = client.empty(size).unwrap();
    let error = client.sync().unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::OutOfMemory { .. })),
        "expected OutOfMemory, got {error:?}"
    );
    client.sync().expect("the error is reported once");
    drop(first);
    drop(second);
    let data = SeededRng::new(40).bytes(size);
    let third = client.create_from_slice(&data).unwrap();
    client
        .sync()
        .expect("the allocation fits once the others are freed");
    assert!(client.read_one(third).unwrap()[..] == data[..]);
}

/// An out-of-memory error is returned by the next `read` on the stream; the failed handle
/// itself reads as `NotFound`, and a launch binding it fails at the next sync; live handles
/// are intact.
pub fn out_of_memory_surfaces_at_read_and_failed_handle_is_not_found<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_memory_limit(4 * MIB));
    let live = upload::<B, u8>(&client, &SeededRng::new(41).bytes(3 * MIB as usize));
    let failed = client.empty(3 * MIB as usize).unwrap();
    let error = client.read_one(live.clone()).unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::OutOfMemory { .. })),
        "expected OutOfMemory, got {error:?}"
    );
    let error = client.read_one(failed.clone()).unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::NotFound { .. })),
        "expected NotFound for the handle that was never allocated, got {error:?}"
    );
    ops::fill(&client, &failed, 16, 1u8).unwrap();
    let error = client.sync().unwrap_err();
    assert!(
        matches!(
            error,
            ServerError::Launch(LaunchError::IoError(IoError::NotFound { .. }))
                | ServerError::Io(IoError::NotFound { .. })
        ),
        "expected NotFound for a launch on the handle that was never allocated, got {error:?}"
    );
    assert_eq!(
        client.read_one(live).unwrap().to_vec(),
        SeededRng::new(41).bytes(3 * MIB as usize)
    );
}

/// Data whose length doesn't match the shape is `InvalidArgument`, and nothing is created.
pub fn data_not_matching_its_shape_is_invalid_argument<B: TestBackend>() {
    let client = client::<B>();
    is_invalid(
        client.create_tensor(Bytes::from_bytes_vec(vec![1; 10]), [2, 3], 4),
        "10 bytes for 2x3 f32",
    );
    is_invalid(
        client.create_tensor_from_slice(&[1; 25], [2, 3], 4),
        "25 bytes for 2x3 f32",
    );
    let good = [7u8; 24];
    let bad = [7u8; 23];
    is_invalid(
        client.create_tensors_from_slices(vec![
            (MemoryLayoutDescriptor::optimized([2, 3], 4), &good[..]),
            (MemoryLayoutDescriptor::optimized([2, 3], 4), &bad[..]),
        ]),
        "second tensor short",
    );
    is_invalid(
        client.create_tensors_from_slices_pinned(vec![(
            MemoryLayoutDescriptor::contiguous([2, 3], 4),
            &bad[..],
        )]),
        "pinned tensor short",
    );
    assert_eq!(
        settled_usage::<B>(&client).number_allocs,
        0,
        "nothing created"
    );
}

/// `read_tensor` with strides of the wrong rank, strides that reach past the buffer, or a
/// zero element size is `InvalidArgument`, never an out-of-bounds read.
pub fn read_tensor_with_bad_strides_is_invalid_argument<B: TestBackend>() {
    let client = client::<B>();
    let handle = upload::<B, f32>(&client, &[1.0; 6]);
    let read = |shape: &[usize], strides: &[usize], elem: usize| {
        client.read_one_tensor(CopyDescriptor::new(
            handle.to_binding(),
            shape.into(),
            Strides::from(strides),
            elem,
        ))
    };
    for (shape, strides, elem, what) in [
        (&[2usize, 3][..], &[3usize][..], 4, "rank mismatch"),
        (&[2, 3], &[4, 1], 4, "pitch 4 needs 28 bytes of 24"),
        (&[7], &[1], 4, "7 elements in 6"),
        (&[2, 3], &[3, 1], 8, "8-byte elements"),
        (&[2, 3], &[3, 1], 0, "zero element size"),
        (&[usize::MAX, 2], &[2, 1], 4, "overflowing shape"),
    ] {
        let result = read(shape, strides, elem);
        assert!(
            matches!(
                result,
                Err(ServerError::Io(IoError::InvalidArgument { .. }))
            ),
            "{what}: expected InvalidArgument, got {result:?}"
        );
    }
    let fine = read(&[2, 3], &[3, 1], 4).unwrap();
    assert_eq!(fine.to_elems::<f32>(), vec![1.0; 6]);
}

/// A read that broadcasts (stride 0) a small buffer to a huge shape is valid but needs a
/// host buffer no machine has: `OutOfMemory`, never an abort, and the client keeps working.
pub fn huge_broadcast_read_is_out_of_memory_and_client_recovers<B: TestBackend>() {
    let client = client::<B>();
    let handle = upload::<B, f32>(&client, &[2.5; 4]);
    let descriptor = CopyDescriptor::new(
        handle.to_binding(),
        [1usize << 44].into(),
        Strides::from([0usize]),
        4,
    );
    let result = client.read_one_tensor(descriptor);
    assert!(
        matches!(result, Err(ServerError::Io(IoError::OutOfMemory { .. }))),
        "expected OutOfMemory, got {result:?}"
    );
    let again = client.read_one(handle).unwrap();
    assert_eq!(again.to_elems::<f32>(), vec![2.5; 4]);
}

/// A view outside its handle is refused.
pub fn view_outside_its_handle_is_invalid_argument<B: TestBackend>() {
    let client = client::<B>();
    let handle = client.empty(64).unwrap();
    is_invalid(handle.view(60, 5), "view past the end");
    is_invalid(handle.view(u64::MAX, 2), "overflowing view");
    assert!(handle.view(60, 4).is_ok());
}

/// A handle of another device passed to `read` or `get_resource` is `NotFound`, not a read
/// of unrelated memory.
pub fn read_of_another_device_handle_is_not_found<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let foreign = upload::<B, u8>(&second, &[1, 2, 3]);
    let error = first.read_one(foreign.clone()).unwrap_err();
    assert!(
        matches!(error, ServerError::Io(IoError::NotFound { .. })),
        "expected NotFound, got {error:?}"
    );
    let Err(error) = first.get_resource(foreign.clone()) else {
        panic!("get_resource of another device's handle succeeded");
    };
    assert!(
        matches!(error, ServerError::Io(IoError::NotFound { .. })),
        "expected NotFound, got {error:?}"
    );
    assert!(!first.owns(&foreign));
    first.sync().unwrap();
    assert_eq!(second.read_one(foreign).unwrap().to_vec(), vec![1, 2, 3]);
}

/// A launch binding a handle of another device is refused before anything is queued.
pub fn launch_with_another_device_binding_is_refused<B: TestBackend>() {
    let Some((first, second)) = two_devices::<B>(&ClientOptions::new()) else {
        return;
    };
    let local = upload::<B, f32>(&first, &[1.0; 16]);
    let foreign = upload::<B, f32>(&second, &[2.0; 16]);
    let result = ops::copy(&first, &foreign, &local, 16, ElemType::F32);
    assert!(
        matches!(result, Err(LaunchError::IoError(IoError::NotFound { .. }))),
        "expected LaunchError::IoError(NotFound), got {result:?}"
    );
    first.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&first, &local), vec![1.0; 16]);
}

fn copy_kernel_args<B: TestBackend>(
    client: &Client<B>,
) -> (
    crate::backend::KernelOf<B>,
    KernelArguments,
    cubert_runtime::Handle,
) {
    let kernel = B::R::standard_kernel(StandardKernel::Copy(ElemType::F32)).unwrap();
    let src = upload::<B, f32>(client, &[1.0; 32]);
    let dst = upload::<B, f32>(client, &[0.0; 32]);
    let arguments = KernelArguments::new()
        .with_buffers(vec![src.to_binding(), dst.to_binding()])
        .with_info(MetadataBindingInfo::custom(vec![32]));
    (kernel, arguments, dst)
}

/// A cube dim over the device's per-axis maximum is `TooManyResources(CubeDim)`; one within
/// each axis but over the units per cube is `TooManyResources(Units)`; an empty one is an
/// error too. Nothing runs.
pub fn cube_dim_over_device_limit_is_too_many_resources<B: TestBackend>() {
    let client = client::<B>();
    let hardware = client.properties().hardware.clone();
    let (mx, my, mz) = hardware.max_cube_dim;
    let (kernel, arguments, dst) = copy_kernel_args::<B>(&client);
    let too_wide = B::with_cube_dim(kernel, CubeDim::new_3d(mx + 1, 1, 1));
    let result = client.launch(too_wide, CubeCount::new_single(), arguments);
    assert!(
        matches!(
            result,
            Err(LaunchError::TooManyResources(ResourceLimitError::CubeDim { requested, .. }))
                if requested == (mx + 1, 1, 1)
        ),
        "expected CubeDim, got {result:?}"
    );
    let (kernel, arguments, _) = copy_kernel_args::<B>(&client);
    let dim = if u64::from(mx) * u64::from(my) > u64::from(hardware.max_units_per_cube) {
        CubeDim::new_2d(mx, my)
    } else {
        CubeDim::new_3d(mx, my, mz)
    };
    assert!(
        u64::from(dim.x) * u64::from(dim.y) * u64::from(dim.z)
            > u64::from(hardware.max_units_per_cube),
        "the device allows its whole max cube dim; can't exceed the units"
    );
    let result = client.launch(
        B::with_cube_dim(kernel, dim),
        CubeCount::new_single(),
        arguments,
    );
    assert!(
        matches!(
            result,
            Err(LaunchError::TooManyResources(ResourceLimitError::Units { max, .. }))
                if max == hardware.max_units_per_cube
        ),
        "expected Units, got {result:?}"
    );
    let (kernel, arguments, _) = copy_kernel_args::<B>(&client);
    let result = client.launch(
        B::with_cube_dim(kernel, CubeDim::new_3d(0, 1, 1)),
        CubeCount::new_single(),
        arguments,
    );
    assert!(
        matches!(result, Err(LaunchError::Unknown { .. })),
        "expected an error for an empty cube dim, got {result:?}"
    );
    client.sync().unwrap();
    assert_eq!(
        read_elems::<B, f32>(&client, &dst),
        vec![0.0; 32],
        "nothing ran"
    );
}

/// Shared memory over the device's limit is `TooManyResources(SharedMemory)`.
pub fn shared_memory_over_device_limit_is_too_many_resources<B: TestBackend>() {
    let client = client::<B>();
    let max = client.properties().hardware.max_shared_memory_size;
    let (kernel, arguments, dst) = copy_kernel_args::<B>(&client);
    let result = client.launch(
        B::with_shared_memory(kernel, max + 1),
        CubeCount::new_single(),
        arguments,
    );
    assert!(
        matches!(
            result,
            Err(LaunchError::TooManyResources(ResourceLimitError::SharedMemory { requested, max: m, .. }))
                if requested == max + 1 && m == max
        ),
        "expected SharedMemory, got {result:?}"
    );
    // Exactly the limit is allowed.
    let (kernel, arguments, dst_ok) = copy_kernel_args::<B>(&client);
    client
        .launch(
            B::with_shared_memory(kernel, max),
            CubeCount::new_single(),
            arguments,
        )
        .unwrap();
    client.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &dst), vec![0.0; 32]);
    assert_eq!(read_elems::<B, f32>(&client, &dst_ok), vec![1.0; 32]);
}

/// A cube count over the device's maximum is `TooManyResources(CubeCount)`.
pub fn cube_count_over_device_limit_is_too_many_resources<B: TestBackend>() {
    let client = client::<B>();
    let (mx, my, mz) = client.properties().hardware.max_cube_count;
    let count = if mx < u32::MAX {
        (mx + 1, 1, 1)
    } else if my < u32::MAX {
        (1, my + 1, 1)
    } else {
        (1, 1, mz.saturating_add(1))
    };
    let (kernel, arguments, dst) = copy_kernel_args::<B>(&client);
    let result = client.launch(
        kernel,
        CubeCount::new_3d(count.0, count.1, count.2),
        arguments,
    );
    assert!(
        matches!(
            result,
            Err(LaunchError::TooManyResources(ResourceLimitError::CubeCount { requested, .. }))
                if requested == count
        ),
        "expected CubeCount, got {result:?}"
    );
    client.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &dst), vec![0.0; 32]);
}

/// The `ops` helpers refuse lengths and shapes beyond their handles at the call, on the
/// caller's thread, naming the helper and the argument; nothing is queued (a length of
/// 2^62 on a 16-element buffer used to keep a GPU busy for minutes).
pub fn ops_refuse_lengths_beyond_their_handles_at_the_call<B: TestBackend>() {
    let client = client::<B>();
    let a = upload::<B, f32>(&client, &[1.0; 16]);
    let b = upload::<B, f32>(&client, &[2.0; 16]);
    let out = upload::<B, f32>(&client, &[0.0; 16]);
    let huge = 1usize << 62;
    let named = |result: Result<(), LaunchError>, op: &str, argument: &str| {
        let error = result.expect_err(op);
        assert!(
            matches!(error, LaunchError::IoError(IoError::InvalidArgument { .. })),
            "{op}: {error:?}"
        );
        let text = error.to_string();
        assert!(text.contains(&format!("ops::{op}")), "{text}");
        assert!(text.contains(&format!("`{argument}`")), "{text}");
    };
    named(
        ops::add(&client, &a, &b, &out, huge, ElemType::F32),
        "add",
        "lhs",
    );
    named(
        ops::mul(&client, &a, &b, &out, 17, ElemType::F32),
        "mul",
        "lhs",
    );
    named(ops::fill(&client, &out, huge, 1.0f32), "fill", "out");
    named(
        ops::copy(&client, &a, &out, 17, ElemType::F32),
        "copy",
        "src",
    );
    named(
        ops::cast(&client, &a, &out, 16, ElemType::F32, ElemType::F64),
        "cast",
        "dst",
    );
    named(
        ops::reduce_sum(&client, &a, &out, huge, huge, ElemType::F32),
        "reduce_sum",
        "input",
    );
    named(
        ops::reduce_sum(&client, &a, &out, 2, 8, ElemType::F64),
        "reduce_sum",
        "input",
    );
    named(
        ops::matmul(&client, &a, &b, &out, 4, 4, 5, ElemType::F32),
        "matmul",
        "rhs",
    );
    named(
        ops::matmul(&client, &a, &b, &out, huge, huge, huge, ElemType::F32),
        "matmul",
        "lhs",
    );
    // The output is checked too, and exact fits pass.
    let short = upload::<B, f32>(&client, &[0.0; 15]);
    named(
        ops::add(&client, &a, &b, &short, 16, ElemType::F32),
        "add",
        "out",
    );
    ops::add(&client, &a, &b, &out, 16, ElemType::F32).unwrap();
    ops::matmul(&client, &a, &b, &out, 4, 4, 4, ElemType::F32).unwrap();
    client.sync().unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &out), vec![8.0; 16]);
}

/// A checked kernel writing past its buffers fails with `OutOfBounds` at the next sync; the
/// in-bounds part is written, a neighbouring allocation is intact, and the error is
/// reported once.
pub fn out_of_bounds_kernel_fails_at_sync_and_spares_neighbours<B: TestBackend>() {
    let client = client::<B>();
    let mut rng = SeededRng::new(42);
    let (lhs, rhs) = (rng.f32s(64, 10.0), rng.f32s(64, 10.0));
    let l = upload::<B, f32>(&client, &lhs);
    let r = upload::<B, f32>(&client, &rhs);
    let out = upload::<B, f32>(&client, &[0.0; 64]);
    let neighbour_data = rng.f32s(256, 10.0);
    let neighbour = upload::<B, f32>(&client, &neighbour_data);
    launch_elementwise_unchecked::<B>(
        &client,
        StandardKernel::Add(ElemType::F32),
        &[&l, &r, &out],
        vec![64 + 137],
    )
    .unwrap();
    let error = client.sync().unwrap_err();
    assert!(
        matches!(error, ServerError::OutOfBounds { accesses, .. } if accesses >= 1),
        "expected OutOfBounds, got {error:?}"
    );
    client.sync().expect("the error is reported once");
    let expected: Vec<f32> = lhs.iter().zip(&rhs).map(|(a, b)| a + b).collect();
    assert_eq!(read_elems::<B, f32>(&client, &out), expected);
    assert_eq!(read_elems::<B, f32>(&client, &neighbour), neighbour_data);
    assert_eq!(read_elems::<B, f32>(&client, &l), lhs);
    assert_eq!(read_elems::<B, f32>(&client, &r), rhs);
}

/// A queued error is returned exactly once: by `flush` if the backend already knows it
/// (a synchronous device), else by the next `sync` (an asynchronous one, whose kernels may
/// still be running when `flush` returns); nothing reports it again.
pub fn queued_error_is_returned_once_by_flush_or_sync<B: TestBackend>() {
    let client = client::<B>();
    let small = upload::<B, i32>(&client, &[1; 8]);
    launch_elementwise_unchecked::<B>(
        &client,
        StandardKernel::Fill(ElemType::I32),
        &[&small],
        vec![100, encode_scalar(5i32)],
    )
    .unwrap();
    let error = match client.flush() {
        Err(error) => {
            client.sync().unwrap();
            error
        }
        Ok(()) => client.sync().unwrap_err(),
    };
    assert!(
        matches!(error, ServerError::OutOfBounds { .. }),
        "expected OutOfBounds, got {error:?}"
    );
    client.flush().unwrap();
    client.sync().unwrap();
    assert_eq!(read_elems::<B, i32>(&client, &small), vec![5; 8]);
}

/// `sync_async` resolves to the queued error, then to `Ok`.
pub fn sync_async_resolves_to_queued_errors<B: TestBackend>() {
    let client = client::<B>();
    let small = upload::<B, u8>(&client, &[1; 8]);
    launch_elementwise_unchecked::<B>(
        &client,
        StandardKernel::Copy(ElemType::U8),
        &[&small, &small],
        vec![9],
    )
    .unwrap();
    let error = cubert_runtime::future::block_on(client.sync_async()).unwrap_err();
    assert!(
        matches!(error, ServerError::OutOfBounds { .. }),
        "expected OutOfBounds, got {error:?}"
    );
    cubert_runtime::future::block_on(client.sync_async()).unwrap();
}
