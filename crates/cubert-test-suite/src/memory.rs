//! Memory accounting and lifetimes: `memory_usage` baselines, `memory_report`, reuse of
//! dropped slices, `memory_cleanup`, persistent windows and `allocation_mode`, and bindings
//! that outlive their handle.

use crate::backend::TestBackend;
use crate::support::{SeededRng, client_in, read_elems, settled_usage, upload};
use cubert_runtime::config::DeviceHandleMode;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::memory::{MemoryReport, PoolReport};
use cubert_runtime::{
    Bytes, CubeCount, ElemType, IoError, KernelArguments, MemoryAllocationMode,
    MemoryLayoutDescriptor, MetadataBindingInfo, Runtime, ServerError,
};

const MIB: usize = 1 << 20;
const KIB: usize = 1 << 10;

fn pool<'a>(report: &'a MemoryReport, name: &str) -> &'a PoolReport {
    report
        .pools
        .iter()
        .find(|pool| pool.name == name)
        .unwrap_or_else(|| panic!("no `{name}` pool in {report:?}"))
}

fn baseline_in<B: TestBackend>(mode: DeviceHandleMode) {
    let client = client_in::<B>(mode);
    let baseline = settled_usage::<B>(&client);
    let mut rng = SeededRng::new(50);
    let sizes = [1usize, 100, 4096, 100_000, 3 * MIB];
    let mut handles: Vec<_> = sizes
        .iter()
        .map(|size| client.create_from_slice(&rng.bytes(*size)).unwrap())
        .collect();
    handles.push(client.empty(12_345).unwrap());
    handles.extend(
        client
            .create_tensors(vec![
                (
                    MemoryLayoutDescriptor::optimized([3, 3], 4),
                    Bytes::from_elems(vec![1.0f32; 9]),
                ),
                (
                    MemoryLayoutDescriptor::optimized([2], 4),
                    Bytes::from_elems(vec![1.0f32; 2]),
                ),
            ])
            .unwrap()
            .into_iter()
            .map(|layout| layout.memory),
    );
    let live = settled_usage::<B>(&client);
    let requested: u64 = sizes.iter().map(|s| *s as u64).sum::<u64>() + 12_345;
    assert_eq!(
        live.number_allocs,
        baseline.number_allocs + sizes.len() as u64 + 2,
        "{mode:?}: one allocation per create/empty, one for create_tensors"
    );
    assert!(
        live.bytes_in_use >= baseline.bytes_in_use + requested,
        "{mode:?}: {live:?}"
    );
    assert!(
        live.bytes_reserved >= live.bytes_in_use,
        "{mode:?}: {live:?}"
    );
    drop(handles);
    let after = settled_usage::<B>(&client);
    assert_eq!(
        after.number_allocs, baseline.number_allocs,
        "{mode:?}: {after:?}"
    );
    assert_eq!(
        after.bytes_in_use, baseline.bytes_in_use,
        "{mode:?}: {after:?}"
    );
    assert_eq!(
        after.bytes_padding, baseline.bytes_padding,
        "{mode:?}: {after:?}"
    );
    client.memory_cleanup();
    let cleaned = client.memory_usage().unwrap();
    assert_eq!(
        cleaned.bytes_reserved, baseline.bytes_reserved,
        "{mode:?}: memory_cleanup gives back every cached segment: {cleaned:?}"
    );
}

in_both_modes!(
    /// After every handle is dropped, `memory_usage` is back to its baseline (allocations,
    /// bytes in use and padding), and after `memory_cleanup` so are the reserved bytes.
    memory_usage_returns_to_baseline_after_handles_drop_threaded,
    memory_usage_returns_to_baseline_after_handles_drop_inline => baseline_in
);

/// A dropped handle's slice is reused by the next allocation of the same size on the same
/// stream: no new device allocation, no more reserved bytes.
pub fn dropped_handle_is_reused_on_same_stream<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let size = 11 * MIB;
    let first = client.empty(size).unwrap();
    client.sync().unwrap();
    let before = client.memory_report().unwrap();
    drop(first);
    let data = SeededRng::new(51).bytes(size);
    let second = client.create_from_slice(&data).unwrap();
    client.sync().unwrap();
    let after = client.memory_report().unwrap();
    assert_eq!(
        after.storage_allocations, before.storage_allocations,
        "the freed slice was not reused: {after:?}"
    );
    assert_eq!(after.usage.bytes_reserved, before.usage.bytes_reserved);
    assert_eq!(after.usage.number_allocs, 1);
    assert!(client.read_one(second).unwrap()[..] == data[..]);
}

/// `empty` queues only the new id, so a handle dropped at once is often released before its
/// reservation runs: those reservations reserve nothing, and whatever the interleaving,
/// nothing stays in use and the device keeps working.
pub fn handles_dropped_before_their_allocation_runs_leave_nothing_in_use<B: TestBackend>() {
    let client = crate::support::client::<B>();
    client.sync().unwrap();
    let before = client.memory_usage().unwrap();
    for round in 0..20 {
        for _ in 0..1000 {
            drop(client.empty(4 * KIB + round).unwrap());
        }
        // Some kept for a while, so drains see a mix of early and late releases.
        let kept: Vec<_> = (0..10).map(|_| client.empty(64 * KIB).unwrap()).collect();
        client.sync().unwrap();
        drop(kept);
    }
    client.sync().unwrap();
    let after = client.memory_usage().unwrap();
    assert_eq!(after.number_allocs, before.number_allocs, "{after:?}");
    assert_eq!(after.bytes_in_use, before.bytes_in_use, "{after:?}");
    let data = SeededRng::new(77).bytes(4096);
    let handle = client.create_from_slice(&data).unwrap();
    assert!(client.read_one(handle).unwrap()[..] == data[..]);
}

/// `memory_report` agrees with `memory_usage`: its totals equal the usage and the sum of
/// its pools; peaks are at least the current values; device allocations are counted.
pub fn memory_report_agrees_with_memory_usage<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let mut rng = SeededRng::new(52);
    let _small = client.create_from_slice(&rng.bytes(1000)).unwrap();
    let _large = client.create_from_slice(&rng.bytes(2 * MIB)).unwrap();
    let usage = settled_usage::<B>(&client);
    let report = client.memory_report().unwrap();
    assert_eq!(report.usage, usage);
    let names: Vec<&str> = report.pools.iter().map(|p| p.name.as_str()).collect();
    for name in ["small", "large", "persistent"] {
        assert!(names.contains(&name), "{names:?}");
    }
    let allocations: u64 = report.pools.iter().map(|p| p.allocations).sum();
    let in_use: u64 = report.pools.iter().map(|p| p.bytes_in_use).sum();
    let reserved: u64 = report.pools.iter().map(|p| p.bytes_reserved).sum();
    assert_eq!(allocations, usage.number_allocs);
    assert_eq!(in_use, usage.bytes_in_use);
    assert_eq!(reserved, usage.bytes_reserved);
    assert_eq!(usage.number_allocs, 2);
    assert!(usage.bytes_in_use >= 1000 + 2 * MIB as u64);
    assert!(report.peak_bytes_in_use >= usage.bytes_in_use);
    assert!(report.peak_bytes_reserved >= usage.bytes_reserved);
    assert!(report.storage_allocations >= 1);
    assert!(report.storage_allocations >= report.storage_deallocations);
}

/// `memory_cleanup` gives back free cached memory only: live handles keep their data.
pub fn memory_cleanup_keeps_live_handles_intact<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let mut rng = SeededRng::new(53);
    let keep_data = rng.bytes(5000);
    let keep = client.create_from_slice(&keep_data).unwrap();
    let big = client.create_from_slice(&rng.bytes(4 * MIB)).unwrap();
    let reserved_before = settled_usage::<B>(&client).bytes_reserved;
    drop(big);
    client.memory_cleanup();
    let usage = client.memory_usage().unwrap();
    assert!(
        usage.bytes_reserved < reserved_before,
        "the freed 4 MiB were not given back: {usage:?}, before {reserved_before}"
    );
    assert_eq!(usage.number_allocs, 1);
    assert!(usage.bytes_reserved >= usage.bytes_in_use);
    assert!(client.read_one(keep).unwrap()[..] == keep_data[..]);
}

/// A memory cap set at run time (`set_memory_cap`) refuses allocations that would take the
/// device's pools past it with `OutOfMemory` (at the next sync, like a full device), after
/// giving cached memory back; a cap below
/// what live handles hold is refused and leaves the old cap; lifting it allows them again;
/// no live handle loses a byte on the way. `set_memory_fraction` outside (0, 1] is refused.
pub fn memory_cap_refuses_allocations_past_it_and_keeps_data<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let mut rng = SeededRng::new(59);
    let keep_data = rng.bytes(3 * MIB);
    let keep = client.create_from_slice(&keep_data).unwrap();
    // Cached memory the cap must give back rather than count against new allocations.
    drop(client.create_from_slice(&rng.bytes(8 * MIB)).unwrap());
    client.sync().unwrap();
    let cap = 48 * MIB as u64;
    client.set_memory_cap(Some(cap)).unwrap();
    assert_eq!(client.memory_cap(), Some(cap));
    assert!(settled_usage::<B>(&client).bytes_reserved <= cap);
    let fits = client.empty(8 * MIB).unwrap();
    // Allocations are made in stream order: the refusal comes back from the next sync.
    let over = client.empty(64 * MIB).unwrap();
    match client.sync() {
        Err(ServerError::Io(IoError::OutOfMemory { .. })) => {}
        other => panic!("64 MiB past a 48 MiB cap: {other:?}"),
    }
    drop(over);
    assert!(settled_usage::<B>(&client).bytes_reserved <= cap);
    let refused = client.set_memory_cap(Some(MIB as u64));
    assert!(
        matches!(
            refused,
            Err(ServerError::Io(IoError::InvalidArgument { .. }))
        ),
        "a cap below the live handles: {refused:?}"
    );
    assert_eq!(
        client.memory_cap(),
        Some(cap),
        "a refused cap changed the cap"
    );
    assert!(client.set_memory_fraction(0.0).is_err());
    assert!(client.set_memory_fraction(f64::NAN).is_err());
    assert!(client.set_memory_fraction(1.5).is_err());
    client.set_memory_cap(None).unwrap();
    let big = client.empty(64 * MIB).unwrap();
    drop((fits, big));
    assert!(client.read_one(keep).unwrap()[..] == keep_data[..]);
    client.set_memory_fraction(1.0).unwrap();
    client.set_memory_cap(None).unwrap();
}

/// Allocations inside `memory_persistent_allocation` (nested windows included) land in the
/// persistent pool; those after the window don't. The window returns the task's value.
pub fn persistent_window_allocations_land_in_persistent_pool<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let (outer, inner, after_inner, after) = (1000usize, 3000usize, 5000usize, 7000usize);
    let (handles, value) = client
        .memory_persistent_allocation(7u32, |seed| {
            let mut rng = SeededRng::new(u64::from(seed));
            let a = client.create_from_slice(&rng.bytes(outer)).unwrap();
            let b = client
                .memory_persistent_allocation((), |()| {
                    client.create_from_slice(&rng.bytes(inner)).unwrap()
                })
                .unwrap();
            let c = client.create_from_slice(&rng.bytes(after_inner)).unwrap();
            (vec![a, b, c], seed * 6)
        })
        .unwrap();
    assert_eq!(value, 42);
    let d = client.create_from_slice(&[1u8; 7000]).unwrap();
    client.sync().unwrap();
    let report = client.memory_report().unwrap();
    let persistent = pool(&report, "persistent");
    assert_eq!(persistent.allocations, 3, "{report:?}");
    assert_eq!(
        persistent.bytes_in_use,
        (outer + inner + after_inner) as u64,
        "{report:?}"
    );
    let small = pool(&report, "small");
    assert_eq!(small.allocations, 1, "{report:?}");
    assert_eq!(small.bytes_in_use, after as u64, "{report:?}");
    let mut rng = SeededRng::new(7);
    for (handle, size) in handles.iter().zip([outer, inner, after_inner]) {
        assert!(client.read_one(handle.clone()).unwrap()[..] == rng.bytes(size)[..]);
    }
    assert_eq!(client.read_one(d).unwrap().to_vec(), vec![1u8; 7000]);
}

/// A persistent window closes when its task panics: later allocations go to the dynamic
/// pools again.
pub fn persistent_window_closes_when_its_task_panics<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.memory_persistent_allocation((), |()| -> u8 {
            let _inside = client.empty(1024).unwrap();
            panic!("persistent task failed on purpose");
        })
    }));
    assert!(outcome.is_err(), "the panic propagates to the caller");
    let after = client.empty(2048).unwrap();
    client.sync().unwrap();
    let report = client.memory_report().unwrap();
    assert_eq!(pool(&report, "persistent").allocations, 0, "{report:?}");
    assert_eq!(pool(&report, "small").allocations, 1, "{report:?}");
    assert_eq!(pool(&report, "small").bytes_in_use, 2048, "{report:?}");
    drop(after);
}

/// A persistent window applies to its client's stream only: allocations made meanwhile on
/// another stream go to the dynamic pools.
pub fn persistent_window_applies_only_to_its_stream<B: TestBackend>() {
    let client =
        crate::support::client::<B>().with_stream(cubert_runtime::StreamId::new((1 << 40) + 30));
    let other = client.with_stream(cubert_runtime::StreamId::new((1 << 40) + 31));
    let (inside, elsewhere) = client
        .memory_persistent_allocation((), |()| {
            (client.empty(1536).unwrap(), other.empty(2560).unwrap())
        })
        .unwrap();
    client.sync().unwrap();
    other.sync().unwrap();
    let report = client.memory_report().unwrap();
    assert_eq!(pool(&report, "persistent").allocations, 1, "{report:?}");
    assert_eq!(pool(&report, "persistent").bytes_in_use, 1536, "{report:?}");
    assert_eq!(pool(&report, "small").bytes_in_use, 2560, "{report:?}");
    drop((inside, elsewhere));
}

/// `allocation_mode(Persistent)` routes the stream's allocations to the persistent pool
/// until it is set back to `Auto`.
pub fn allocation_mode_routes_until_reset<B: TestBackend>() {
    let client = crate::support::client::<B>();
    client.allocation_mode(MemoryAllocationMode::Persistent);
    let a = client.empty(2048).unwrap();
    let b = client.empty(4096).unwrap();
    client.allocation_mode(MemoryAllocationMode::Auto);
    let c = client.empty(2048).unwrap();
    client.sync().unwrap();
    let report = client.memory_report().unwrap();
    assert_eq!(pool(&report, "persistent").allocations, 2, "{report:?}");
    assert_eq!(pool(&report, "persistent").bytes_in_use, 6144, "{report:?}");
    assert_eq!(pool(&report, "small").allocations, 1, "{report:?}");
    drop((a, b, c));
}

/// A binding taken before its handle is dropped keeps the memory alive: a same-size
/// allocation made meanwhile doesn't take it, and a launch through the binding reads the
/// original data.
pub fn binding_of_dropped_handle_keeps_memory_alive_for_launch<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let mut rng = SeededRng::new(54);
    let original = rng.f32s(1024, 100.0);
    let source = upload::<B, f32>(&client, &original);
    let by_value = source.clone().binding();
    let by_ref = source.to_binding();
    drop(source);
    // Would reuse the slice if the bindings didn't hold it.
    let intruder = upload::<B, f32>(&client, &rng.f32s(1024, 100.0));
    let target = client.empty(1024 * 4).unwrap();
    let kernel = B::R::standard_kernel(StandardKernel::Copy(ElemType::F32)).unwrap();
    let arguments = KernelArguments::new()
        .with_buffers(vec![by_value, target.to_binding()])
        .with_info(MetadataBindingInfo::custom(vec![1024]));
    client
        .launch(kernel, CubeCount::new_1d(1), arguments)
        .unwrap();
    assert_eq!(read_elems::<B, f32>(&client, &target), original);
    let usage = settled_usage::<B>(&client);
    assert_eq!(
        usage.number_allocs, 3,
        "by_ref still holds the source: {usage:?}"
    );
    drop(by_ref);
    let usage = settled_usage::<B>(&client);
    assert_eq!(
        usage.number_allocs, 2,
        "the source is freed with its last binding"
    );
    drop((intruder, target));
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}

/// Views keep their whole allocation alive until the last one is dropped.
pub fn views_keep_their_allocation_alive<B: TestBackend>() {
    let client = crate::support::client::<B>();
    let layouts = client
        .create_tensors(vec![
            (
                MemoryLayoutDescriptor::contiguous([4], 4),
                Bytes::from_elems(vec![1i32, 2, 3, 4]),
            ),
            (
                MemoryLayoutDescriptor::contiguous([2], 4),
                Bytes::from_elems(vec![5i32, 6]),
            ),
        ])
        .unwrap();
    let mut views = layouts.into_iter().map(|layout| layout.memory);
    let (first, second) = (views.next().unwrap(), views.next().unwrap());
    drop(first);
    assert_eq!(settled_usage::<B>(&client).number_allocs, 1);
    assert_eq!(read_elems::<B, i32>(&client, &second), vec![5, 6]);
    drop(second);
    assert_eq!(settled_usage::<B>(&client).number_allocs, 0);
}
