//! Profiling: `profile` (nested too), and what each `[profiling] level` records per launch.
//!
//! These tests wait with `read`, not `sync`, so that the summary `sync` prints doesn't
//! clutter the test output.

use crate::backend::{Client, ClientOptions, TestBackend};
use crate::support::{SeededRng, client, client_with, read_elems, upload};
use cubert_runtime::config::ProfileLevel;
use cubert_runtime::kernel::standard::StandardKernel;
use cubert_runtime::{ElemType, ProfileError, ops};

/// `profile` returns the work's output and a duration whose end is not before its start;
/// the profiled work really ran.
pub fn profile_returns_output_and_ordered_ticks<B: TestBackend>() {
    let client = client::<B>();
    let values = SeededRng::new(80).f32s(100_000, 1.0);
    let source = upload::<B, f32>(&client, &values);
    let target = client.empty(100_000 * 4).unwrap();
    let (output, duration) = client
        .profile(
            || {
                ops::copy(&client, &source, &target, 100_000, ElemType::F32).unwrap();
                "done"
            },
            "copy",
        )
        .unwrap();
    assert_eq!(output, "done");
    let ticks = duration.resolve_blocking().unwrap();
    assert!(ticks.end() >= ticks.start());
    assert_eq!(ticks.duration(), ticks.end() - ticks.start());
    assert_eq!(read_elems::<B, f32>(&client, &target), values);
}

/// Profiles nest: the inner profile lies within the outer one.
pub fn nested_profiles_measure_inner_within_outer<B: TestBackend>() {
    let client = client::<B>();
    let values = SeededRng::new(81).f32s(50_000, 1.0);
    let source = upload::<B, f32>(&client, &values);
    let target = client.empty(50_000 * 4).unwrap();
    let ((inner, inner_duration), outer_duration) = client
        .profile(
            || {
                ops::copy(&client, &source, &target, 50_000, ElemType::F32).unwrap();
                let inner = client
                    .profile(
                        || {
                            ops::add(&client, &target, &target, &target, 50_000, ElemType::F32)
                                .unwrap();
                            1
                        },
                        "inner",
                    )
                    .unwrap();
                ops::mul(&client, &target, &source, &target, 50_000, ElemType::F32).unwrap();
                inner
            },
            "outer",
        )
        .unwrap();
    assert_eq!(inner, 1);
    let inner = inner_duration.resolve_blocking().unwrap();
    let outer = outer_duration.resolve_blocking().unwrap();
    assert!(
        inner.start() >= outer.start(),
        "{inner:?} starts before {outer:?}"
    );
    assert!(inner.end() <= outer.end(), "{inner:?} ends after {outer:?}");
    assert!(inner.duration() <= outer.duration());
    let expected: Vec<f32> = values.iter().map(|v| (v + v) * v).collect();
    assert_eq!(read_elems::<B, f32>(&client, &target), expected);
}

/// A panic inside profiled work is a `ProfileError`, and the client keeps working.
pub fn profile_of_panicking_work_is_an_error_and_client_keeps_working<B: TestBackend>() {
    let client = client::<B>();
    let result = client.profile(
        || -> u32 { panic!("profiled work failed on purpose") },
        "boom",
    );
    assert!(
        matches!(&result, Err(ProfileError::Unknown { reason, .. }) if reason.contains("on purpose")),
        "expected ProfileError::Unknown naming the panic, got {result:?}"
    );
    let handle = upload::<B, i32>(&client, &[4, 5, 6]);
    assert_eq!(read_elems::<B, i32>(&client, &handle), vec![4, 5, 6]);
    let (value, _) = client.profile(|| 3, "after").unwrap();
    assert_eq!(value, 3);
}

fn run_adds<B: TestBackend>(client: &Client<B>, times: usize) {
    let values = SeededRng::new(82).f32s(4096, 1.0);
    let handle = upload::<B, f32>(client, &values);
    let out = client.empty(4096 * 4).unwrap();
    for _ in 0..times {
        ops::add(client, &handle, &handle, &out, 4096, ElemType::F32).unwrap();
    }
    let expected: Vec<f32> = values.iter().map(|v| v + v).collect();
    assert_eq!(read_elems::<B, f32>(client, &out), expected);
}

fn add_name() -> String {
    StandardKernel::Add(ElemType::F32).name()
}

/// With profiling disabled nothing is recorded.
pub fn disabled_profiling_records_nothing<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_profile_level(ProfileLevel::Disabled));
    run_adds::<B>(&client, 3);
    let summary = client.utilities().logger.summary();
    assert!(summary.kernels.is_empty(), "{summary:?}");
    assert!(summary.executions.is_empty(), "{summary:?}");
}

/// `execution-only` counts launches per kernel name without timing them.
pub fn execution_only_profiling_counts_launches_per_kernel<B: TestBackend>() {
    let client =
        client_with::<B>(&ClientOptions::new().with_profile_level(ProfileLevel::ExecutionOnly));
    run_adds::<B>(&client, 3);
    let summary = client.utilities().logger.summary();
    assert!(summary.kernels.is_empty(), "{summary:?}");
    let count = summary
        .executions
        .iter()
        .find(|(name, _)| *name == add_name())
        .map(|(_, count)| *count);
    assert_eq!(count, Some(3), "{summary:?}");
}

/// `basic` times every launch: one record per launch of the kernel, min <= max <= total.
pub fn basic_profiling_times_every_launch<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_profile_level(ProfileLevel::Basic));
    run_adds::<B>(&client, 4);
    let summary = client.utilities().logger.summary();
    let add = summary
        .kernels
        .iter()
        .find(|kernel| kernel.name == add_name())
        .unwrap_or_else(|| panic!("no `{}` in {summary:?}", add_name()));
    assert_eq!(add.launches, 4);
    assert!(add.min <= add.max && add.max <= add.total, "{add:?}");
    assert_eq!(summary.failures, 0);
}

/// `full` names each record with the kernel's id and cube count.
pub fn full_profiling_names_include_id_and_cube_count<B: TestBackend>() {
    let client = client_with::<B>(&ClientOptions::new().with_profile_level(ProfileLevel::Full));
    run_adds::<B>(&client, 2);
    let summary = client.utilities().logger.summary();
    let prefix = format!("{} [", add_name());
    let records: Vec<_> = summary
        .kernels
        .iter()
        .filter(|kernel| kernel.name.starts_with(&prefix))
        .collect();
    assert!(
        !records.is_empty(),
        "no `{prefix}...` record in {summary:?}"
    );
    assert_eq!(records.iter().map(|k| k.launches).sum::<u64>(), 2);
    assert!(
        records.iter().all(|k| k.name.contains("] (")),
        "{records:?}"
    );
}
