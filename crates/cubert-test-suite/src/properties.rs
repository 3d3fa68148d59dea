//! What a client says about its device: `info`, `properties`, `features`, device
//! enumeration and counts, `io_optimized_vector_sizes`.

use crate::backend::{ClientOptions, TestBackend};
use crate::support::{client, client_with};
use cubert_runtime::ElemType;

/// Properties are consistent: features are the properties' features, the standard kernels'
/// types are supported, limits are non-zero, alignments are powers of two, the largest
/// allocation fits in the device.
pub fn properties_and_features_are_consistent<B: TestBackend>() {
    let client = client::<B>();
    let properties = client.properties();
    assert_eq!(client.features(), &properties.features);
    assert!(!properties.name.is_empty());
    for elem in [ElemType::F32, ElemType::F64, ElemType::I32, ElemType::U8] {
        assert!(client.features().supports_type(elem), "{elem} unsupported");
    }
    let hardware = &properties.hardware;
    assert!(hardware.max_units_per_cube >= 1);
    assert!(
        hardware.max_bindings >= 3,
        "the standard kernels bind 3 buffers"
    );
    let (x, y, z) = hardware.max_cube_count;
    assert!(x >= 1 && y >= 1 && z >= 1);
    assert!(hardware.plane_size_min <= hardware.plane_size_max);
    // A device is a CPU or a GPU; wgpu can't tell a GPU's multiprocessors, so both may be
    // unknown, never both known.
    assert!(hardware.num_cpu_cores.is_none() || hardware.num_streaming_multiprocessors.is_none());
    let memory = &properties.memory;
    assert!(memory.alignment.is_power_of_two(), "{memory:?}");
    assert!(memory.pitch_alignment >= 1, "{memory:?}");
    assert!(
        memory.max_allocation_size <= memory.total_memory,
        "{memory:?}"
    );
    assert!(memory.max_allocation_size > 0, "{memory:?}");
}

/// The configured pitch alignment is what the properties report.
pub fn pitch_alignment_option_is_reported_in_properties<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_pitch_alignment(512));
    assert_eq!(client.properties().memory.pitch_alignment, 512);
}

/// Device enumeration lists the client's device; counts match the lists; other device
/// kinds are not mixed in; `info` describes the backend.
pub fn enumerate_devices_lists_the_client_device<B: TestBackend>() {
    let client = client::<B>();
    let id = client.device_id();
    let same_kind = client.enumerate_devices(id.type_id);
    assert!(same_kind.contains(&id), "{same_kind:?} lacks {id:?}");
    assert!(same_kind.iter().all(|device| device.type_id == id.type_id));
    assert_eq!(client.device_count(id.type_id), same_kind.len());
    let all = client.enumerate_all_devices();
    assert_eq!(client.device_count_total(), all.len());
    for device in &same_kind {
        assert!(all.contains(device));
    }
    // Backends may open more test devices than they enumerate (CUDA tests use several
    // contexts on one GPU), so only the client's own device is required.
    assert!(client.device_count_total() >= 1);
    let unknown_kind = u16::MAX;
    assert!(!all.iter().any(|device| device.type_id == unknown_kind));
    assert!(client.enumerate_devices(unknown_kind).is_empty());
    assert_eq!(client.device_count(unknown_kind), 0);
    assert!(!format!("{:?}", client.info()).is_empty());
    assert!(format!("{client:?}").contains(&format!("{id:?}")));
}

/// `io_optimized_vector_sizes` gives halving powers of two, widest first, ending at 1, the
/// widest within the device's load width and maximum vector size.
pub fn io_optimized_vector_sizes_are_halving_powers_of_two<B: TestBackend>() {
    let client = client::<B>();
    let hardware = client.properties().hardware.clone();
    for elem_size in [1usize, 2, 4, 8, 16] {
        let sizes: Vec<usize> = client.io_optimized_vector_sizes(elem_size).collect();
        assert_eq!(sizes.last(), Some(&1), "{elem_size}: {sizes:?}");
        assert!(sizes.iter().all(|s| s.is_power_of_two()), "{sizes:?}");
        for pair in sizes.windows(2) {
            assert_eq!(pair[0], pair[1] * 2, "{sizes:?}");
        }
        let widest = sizes[0];
        assert!(widest <= hardware.max_vector_size.max(1), "{sizes:?}");
        if widest > 1 {
            assert!(
                widest * elem_size * 8 <= hardware.load_width as usize,
                "{elem_size}-byte elements: {sizes:?} exceed a {}-bit load",
                hardware.load_width
            );
        }
    }
}

/// Sums each plane's values (for the feature test).
#[cubert_macros::kernel(crate = cubert_runtime)]
fn plane_totals(
    x: &cubert_runtime::lang::native::Array<u32>,
    out: &mut cubert_runtime::lang::native::Array<u32>,
) {
    let i = ABSOLUTE_POS;
    out[i] = plane_sum(x[i]) * 1000 + PLANE_DIM;
}

/// Each feature flag says what works: with `plane`, plane operations run over planes of the
/// advertised width (`plane_size_max`); with `collectives`, an all-reduce over a group of
/// this one device runs (without, it is refused).
pub fn feature_flags_say_what_works<B: TestBackend>() {
    let client = client::<B>();
    let features = client.features().clone();
    let width = client.properties().hardware.plane_size_max;
    if features.plane {
        let x: Vec<u32> = (0..64).collect();
        let xs = client
            .create(cubert_runtime::Bytes::from_elems(x.clone()))
            .unwrap();
        let out = client.empty(64 * 4).unwrap();
        plane_totals::launch::<B::R>(
            &client,
            cubert_runtime::CubeCount::Static(1, 1, 1),
            cubert_runtime::CubeDim::new_1d(64),
            &xs,
            &out,
        )
        .unwrap();
        let got = client.read_one(out).unwrap().to_elems::<u32>();
        let want: Vec<u32> = x
            .chunks(width as usize)
            .flat_map(|plane| {
                let total: u32 = plane.iter().sum();
                vec![total * 1000 + width; plane.len()]
            })
            .collect();
        assert_eq!(got, want, "planes of {width}");
    }
    let _lock = crate::collectives::collective_lock();
    let values = vec![3i32; 100];
    let src = client
        .create(cubert_runtime::Bytes::from_elems(values.clone()))
        .unwrap();
    let dst = client.empty(400).unwrap();
    let reduced = client.all_reduce(
        src,
        dst.clone(),
        ElemType::I32,
        vec![client.device_id()],
        cubert_runtime::server::ReduceOperation::Sum,
    );
    if features.collectives {
        reduced.unwrap();
        client.sync_collective().unwrap();
        assert_eq!(client.read_one(dst).unwrap().to_elems::<i32>(), values);
    } else {
        assert!(reduced.is_err(), "collectives are said to be missing");
    }
}
