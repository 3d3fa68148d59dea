//! Units that cooperate: shared arrays with `sync_cube`, plane operations and atomics.
//! Expected values are computed on the host with the language's rules: plane reductions
//! fold the plane's live lanes in lane order (from zero for sums), planes are runs of 32
//! units in `UNIT_POS` order, atomics return the previous value.

use super::{assert_same, filled, read_scalars, upload_scalars};
use crate::backend::TestBackend;
use crate::support::client;
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeCount, CubeDim, LaunchError, ResourceLimitError, ServerError};

/// Units per cube in the shared-memory tests.
const TILE: u32 = 64;

/// Each cube reverses its 64 elements through shared memory: unit `u` writes element `u`,
/// waits for the cube, then reads element `63 - u`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn reverse_each_cube(x: &Array<u32>, out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(TILE);
    let u = UNIT_POS;
    tile[u] = x[ABSOLUTE_POS];
    sync_cube();
    out[ABSOLUTE_POS] = tile[TILE - 1 - u];
}

/// The sum of each cube's elements by a tree reduction in shared memory (`sync_cube` in a
/// loop), written by unit 0.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn tree_sum_each_cube(x: &Array<u32>, sums: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(TILE);
    let u = UNIT_POS;
    tile[u] = x[ABSOLUTE_POS];
    sync_cube();
    let mut stride = CUBE_DIM / 2;
    while stride > 0 {
        if u < stride {
            tile[u] += tile[u + stride];
        }
        sync_cube();
        stride /= 2;
    }
    if u == 0 {
        sums[CUBE_POS] = tile[0];
    }
}

/// Plane reductions: per unit, the sum, min and max of its plane's values and the lane and
/// plane width it sees. Units past `x.len()` return first and take no part.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn plane_reductions<T: Numeric>(
    x: &Array<T>,
    sums: &mut Array<T>,
    mins: &mut Array<T>,
    maxs: &mut Array<T>,
    lanes: &mut Array<u32>,
) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        return;
    }
    let v = x[i];
    sums[i] = plane_sum(v);
    mins[i] = plane_min(v);
    maxs[i] = plane_max(v);
    lanes[i] = UNIT_POS_PLANE * 100 + PLANE_DIM;
}

/// `plane_all`, `plane_any`, `plane_shuffle` from the next lane and `plane_broadcast` of
/// lane 3, per unit.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn plane_votes_and_shuffles(x: &Array<i32>, votes: &mut Array<u32>, moved: &mut Array<i32>) {
    let i = ABSOLUTE_POS;
    let v = x[i];
    let all = plane_all(v > 0);
    let any = plane_any(v > 100);
    votes[i] = select(all, 1u32, 0u32) + select(any, 2u32, 0u32);
    let next = plane_shuffle(v, (UNIT_POS_PLANE + 1) % PLANE_DIM);
    let third = plane_broadcast(v, 3u32);
    moved[2 * i] = next;
    moved[2 * i + 1] = third;
}

/// Global atomics from every unit of every cube: a histogram of `x % 8` (`u32` add), the
/// `i32` max and min, an `f32` sum of small integers (exact in any order), one winner of
/// a compare-exchange on `flags[0]` and the count of winners.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn global_atomics(
    x: &Array<i32>,
    histogram: &mut Array<u32>,
    extremes: &mut Array<i32>,
    total: &mut Array<f32>,
    flags: &mut Array<u32>,
) {
    let i = ABSOLUTE_POS;
    if i >= x.len() {
        return;
    }
    let v = x[i];
    atomic_add(histogram, (v as u32) % 8, 1u32);
    atomic_max(extremes, 0u32, v);
    atomic_min(extremes, 1u32, v);
    atomic_add(total, 0u32, v as f32);
    let previous = atomic_compare_exchange(flags, 0u32, 0u32, i + 1);
    if previous == 0 {
        atomic_add(flags, 1u32, 1u32);
    }
    atomic_exchange(flags, 2u32, 7u32);
}

/// A histogram per cube in shared memory (shared atomics), added to the global one by the
/// first 8 units after `sync_cube`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn shared_histogram(x: &Array<u32>, histogram: &mut Array<u32>) {
    let mut bins = SharedMemory::<u32>::new(8);
    let u = UNIT_POS;
    // Shared memory starts with unspecified contents (zero only on the CPU).
    if u < 8 {
        bins[u] = 0u32;
    }
    sync_cube();
    let i = ABSOLUTE_POS;
    if i < x.len() {
        atomic_add(bins, x[i] % 8, 1u32);
    }
    sync_cube();
    if u < 8 {
        atomic_add(histogram, u, bins[u]);
    }
}

/// Asks for `len` `f32`s of shared memory.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn large_shared(out: &mut Array<f32>, #[comptime] len: u32) {
    let mut tile = SharedMemory::<f32>::new(len);
    tile[UNIT_POS] = 1.0;
    sync_cube();
    out[ABSOLUTE_POS] = tile[0];
}

/// Writes shared element `UNIT_POS + 8` of an array of 8: out of bounds for every unit.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn shared_out_of_bounds(out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(8);
    tile[UNIT_POS + 8] = 5u32;
    sync_cube();
    out[ABSOLUTE_POS] = UNIT_POS;
}

/// A specialization of each kernel here.
pub(super) fn definitions() -> Vec<KernelDefinition> {
    vec![
        reverse_each_cube::definition(),
        tree_sum_each_cube::definition(),
        plane_reductions::definition::<i32>(),
        plane_reductions::definition::<u32>(),
        plane_reductions::definition::<f32>(),
        plane_reductions::definition::<f16>(),
        plane_reductions::definition::<f64>(),
        plane_reductions::definition::<i64>(),
        plane_votes_and_shuffles::definition(),
        global_atomics::definition(),
        shared_histogram::definition(),
        large_shared::definition(256),
        shared_out_of_bounds::definition(),
    ]
}

/// Shared memory written before `sync_cube` is read by other units of the cube after it:
/// each cube of 64 comes back reversed.
pub fn shared_memory_is_seen_by_the_whole_cube_after_sync_cube<B: TestBackend>() {
    let client = client::<B>();
    let cubes = 5u32;
    let x: Vec<u32> = (0..cubes * TILE).map(|v| v * 3 + 1).collect();
    let xs = upload_scalars::<B, u32>(&client, &x);
    let out = filled::<B, u32>(&client, 0, x.len());
    reverse_each_cube::launch::<B::R>(
        &client,
        CubeCount::Static(cubes, 1, 1),
        CubeDim::new_1d(TILE),
        &xs,
        &out,
    )
    .unwrap();
    let want: Vec<u32> = x
        .chunks(TILE as usize)
        .flat_map(|cube| cube.iter().rev().copied())
        .collect();
    assert_eq!(read_scalars::<B, u32>(&client, &out), want);
}

/// A tree reduction with `sync_cube` inside a loop sums each cube exactly.
pub fn tree_reduction_with_sync_cube_in_a_loop_sums_each_cube<B: TestBackend>() {
    let client = client::<B>();
    let cubes = 7u32;
    let x: Vec<u32> = (0..cubes * TILE)
        .map(|v| v.wrapping_mul(2_654_435_761))
        .collect();
    let xs = upload_scalars::<B, u32>(&client, &x);
    let sums = filled::<B, u32>(&client, 0, cubes as usize);
    tree_sum_each_cube::launch::<B::R>(
        &client,
        CubeCount::Static(cubes, 1, 1),
        CubeDim::new_1d(TILE),
        &xs,
        &sums,
    )
    .unwrap();
    let want: Vec<u32> = x
        .chunks(TILE as usize)
        .map(|cube| cube.iter().fold(0u32, |acc, v| acc.wrapping_add(*v)))
        .collect();
    assert_eq!(read_scalars::<B, u32>(&client, &sums), want);
}

/// The expected plane sum, min and max of every unit: lanes in order, planes of 32 units of
/// one cube, only units below `len`.
/// The device's plane size (`PLANE_DIM`: 32 on CUDA and the CPU, the subgroup size on
/// wgpu), which the plane tests' expectations follow.
fn plane_dim<B: TestBackend>(client: &crate::backend::Client<B>) -> usize {
    let hardware = &client.properties().hardware;
    assert_eq!(
        hardware.plane_size_min, hardware.plane_size_max,
        "the plane tests expect one plane size"
    );
    hardware.plane_size_max as usize
}

fn plane_expected<T: Numeric>(x: &[T], cube: usize, plane: usize) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (mut sums, mut mins, mut maxs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..x.len() {
        let cube_start = i / cube * cube;
        let lane_start = cube_start + (i - cube_start) / plane * plane;
        let lane_end = (lane_start + plane).min(cube_start + cube).min(x.len());
        let plane = &x[lane_start..lane_end];
        sums.push(plane.iter().fold(T::from_i128(0), |acc, v| T::add(acc, *v)));
        mins.push(plane.iter().copied().reduce(T::min_of).unwrap_or(x[i]));
        maxs.push(plane.iter().copied().reduce(T::max_of).unwrap_or(x[i]));
    }
    (sums, mins, maxs)
}

fn check_plane_reductions<B: TestBackend, T: Numeric>(x: &[T], cube: u32, cubes: u32) {
    let client = client::<B>();
    let xs = upload_scalars::<B, T>(&client, x);
    let zero = T::from_i128(0);
    let sums = filled::<B, T>(&client, zero, x.len());
    let mins = filled::<B, T>(&client, zero, x.len());
    let maxs = filled::<B, T>(&client, zero, x.len());
    let lanes = filled::<B, u32>(&client, 0, x.len());
    plane_reductions::launch::<T, B::R>(
        &client,
        CubeCount::Static(cubes, 1, 1),
        CubeDim::new_1d(cube),
        &xs,
        &sums,
        &mins,
        &maxs,
        &lanes,
    )
    .unwrap();
    let plane = plane_dim::<B>(&client);
    let (want_sums, want_mins, want_maxs) = plane_expected(x, cube as usize, plane);
    let what = |op: &str| {
        format!(
            "plane_{op} over {} ({} units, cubes of {cube})",
            T::ELEM,
            x.len()
        )
    };
    assert_same(
        &what("sum"),
        x,
        &read_scalars::<B, T>(&client, &sums),
        &want_sums,
    );
    assert_same(
        &what("min"),
        x,
        &read_scalars::<B, T>(&client, &mins),
        &want_mins,
    );
    assert_same(
        &what("max"),
        x,
        &read_scalars::<B, T>(&client, &maxs),
        &want_maxs,
    );
    let want_lanes: Vec<u32> = (0..x.len() as u32)
        .map(|i| (i % cube) % plane as u32 * 100 + plane as u32)
        .collect();
    assert_eq!(read_scalars::<B, u32>(&client, &lanes), want_lanes, "lanes");
}

/// `plane_sum`, `plane_min` and `plane_max` reduce each plane of 32 units in lane order
/// (float sums bit for bit, integer sums wrapping), for full planes, a cube of 48 (a plane
/// of 16) and units that returned before the operation.
pub fn plane_reductions_fold_each_plane_in_lane_order<B: TestBackend>() {
    // Floats whose sum depends on the order: large and small magnitudes mixed.
    let floats: Vec<f32> = (0..200)
        .map(|i| {
            let sign = if i % 3 == 0 { -1.0 } else { 1.0 };
            sign * (1.0 + i as f32 * 0.37) * 10f32.powi((i % 7) - 3)
        })
        .collect();
    check_plane_reductions::<B, f32>(&floats, 64, 4); // 200 of 256 units: a partial plane
    check_plane_reductions::<B, f32>(&floats[..192], 48, 4); // planes of 32 and 16
    let halves: Vec<f16> = floats.iter().map(|v| f16::from_f32(*v)).collect();
    check_plane_reductions::<B, f16>(&halves, 64, 4);
    let doubles: Vec<f64> = floats.iter().map(|v| f64::from(*v) * 1e10).collect();
    check_plane_reductions::<B, f64>(&doubles, 64, 4);
    let ints: Vec<i32> = (0..200)
        .map(|i: i32| i.wrapping_mul(1_000_000_007).wrapping_add(i32::MAX / 3))
        .collect();
    check_plane_reductions::<B, i32>(&ints, 64, 4);
    let unsigned: Vec<u32> = ints.iter().map(|v| v.cast_unsigned()).collect();
    check_plane_reductions::<B, u32>(&unsigned, 96, 3);
    let longs: Vec<i64> = ints.iter().map(|v| i64::from(*v) << 20).collect();
    check_plane_reductions::<B, i64>(&longs, 64, 4);
}

/// `plane_all` and `plane_any` vote over the plane; `plane_shuffle` reads another lane's
/// value and `plane_broadcast` one lane's value for every unit.
pub fn plane_votes_and_shuffles_read_the_planes_lanes<B: TestBackend>() {
    let client = client::<B>();
    // Plane 0: all positive, none above 100; plane 1: one zero, one 500; planes 2, 3: mixed.
    let mut x: Vec<i32> = (0..128).map(|i| i % 50 + 1).collect();
    x[40] = 0;
    x[50] = 500;
    x[64 + 7] = 101;
    x[96] = -3;
    let xs = upload_scalars::<B, i32>(&client, &x);
    let votes = filled::<B, u32>(&client, 9, x.len());
    let moved = filled::<B, i32>(&client, 0, 2 * x.len());
    plane_votes_and_shuffles::launch::<B::R>(
        &client,
        CubeCount::Static(2, 1, 1),
        CubeDim::new_1d(64),
        &xs,
        &votes,
        &moved,
    )
    .unwrap();
    let size = plane_dim::<B>(&client);
    let mut want_votes = Vec::new();
    let mut want_moved = Vec::new();
    for i in 0..x.len() {
        let start = i / size * size;
        let plane = &x[start..start + size];
        let all = plane.iter().all(|v| *v > 0);
        let any = plane.iter().any(|v| *v > 100);
        want_votes.push(u32::from(all) + 2 * u32::from(any));
        want_moved.push(plane[(i - start + 1) % size]);
        want_moved.push(plane[3]);
    }
    assert_eq!(read_scalars::<B, u32>(&client, &votes), want_votes, "votes");
    assert_eq!(
        read_scalars::<B, i32>(&client, &moved),
        want_moved,
        "shuffles"
    );
}

/// Atomics on global arrays from units of many cubes: nothing is lost (the histogram counts
/// every unit, the float sum of small integers is exact), max and min see every value,
/// exactly one compare-exchange from 0 wins, and each atomic returns the previous value.
pub fn global_atomics_from_every_cube_lose_no_update<B: TestBackend>() {
    let client = client::<B>();
    let n = 1000usize;
    let x: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 2001 - 1000).collect();
    let xs = upload_scalars::<B, i32>(&client, &x);
    let histogram = filled::<B, u32>(&client, 0, 8);
    let extremes = upload_scalars::<B, i32>(&client, &[i32::MIN, i32::MAX]);
    let total = filled::<B, f32>(&client, 0.0, 1);
    let flags = filled::<B, u32>(&client, 0, 3);
    global_atomics::launch::<B::R>(
        &client,
        CubeCount::Static(8, 1, 1),
        CubeDim::new_1d(128),
        &xs,
        &histogram,
        &extremes,
        &total,
        &flags,
    )
    .unwrap();
    let mut want_histogram = vec![0u32; 8];
    for v in &x {
        want_histogram[(v.cast_unsigned() % 8) as usize] += 1;
    }
    assert_eq!(read_scalars::<B, u32>(&client, &histogram), want_histogram);
    let min = *x.iter().min().unwrap();
    let max = *x.iter().max().unwrap();
    assert_eq!(read_scalars::<B, i32>(&client, &extremes), vec![max, min]);
    let sum: i32 = x.iter().sum();
    assert_eq!(read_scalars::<B, f32>(&client, &total), vec![sum as f32]);
    let flags = read_scalars::<B, u32>(&client, &flags);
    assert!(
        (1..=n as u32).contains(&flags[0]),
        "the winner's id: {flags:?}"
    );
    assert_eq!(flags[1..], [1, 7], "one winner; exchange stored 7");
}

/// Atomics on a shared array count each cube's values; after `sync_cube` the cube adds its
/// bins to the global histogram, which then counts every value once.
pub fn shared_atomics_count_within_each_cube<B: TestBackend>() {
    let client = client::<B>();
    let x: Vec<u32> = (0..1000u32).map(|i| i * i + 3 * i).collect();
    let xs = upload_scalars::<B, u32>(&client, &x);
    let histogram = filled::<B, u32>(&client, 0, 8);
    shared_histogram::launch::<B::R>(
        &client,
        CubeCount::Static(8, 1, 1),
        CubeDim::new_1d(128),
        &xs,
        &histogram,
    )
    .unwrap();
    let mut want = vec![0u32; 8];
    for v in &x {
        want[(v % 8) as usize] += 1;
    }
    assert_eq!(read_scalars::<B, u32>(&client, &histogram), want);
}

/// A kernel declaring more shared memory than the device allows is refused at launch with
/// `TooManyResources`, naming the bytes asked for; the same kernel with a small array runs.
pub fn shared_memory_beyond_the_device_limit_is_refused_at_launch<B: TestBackend>() {
    let client = client::<B>();
    let out = filled::<B, f32>(&client, 0.0, 32);
    let len = 4u32 << 20; // 16 MiB of f32
    let result = large_shared::launch::<B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(32),
        &out,
        len,
    );
    match result {
        Err(LaunchError::TooManyResources(ResourceLimitError::SharedMemory {
            requested, ..
        })) => assert_eq!(requested, len as usize * 4),
        other => panic!("expected a shared-memory limit error, got {other:?}"),
    }
    large_shared::launch::<B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(32),
        &out,
        256,
    )
    .unwrap();
    assert_eq!(read_scalars::<B, f32>(&client, &out), vec![1.0; 32]);
}

/// A shared-array index out of bounds fails the launch at the next sync (the store is
/// skipped); the rest of the kernel runs and the device keeps working.
pub fn shared_array_out_of_bounds_fails_the_launch<B: TestBackend>() {
    let client = client::<B>();
    let out = filled::<B, u32>(&client, 9, 32);
    shared_out_of_bounds::launch::<B::R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(32),
        &out,
    )
    .unwrap();
    let error = client.sync().unwrap_err();
    assert!(
        matches!(&error, ServerError::OutOfBounds { kernel, .. }
            if kernel.contains("shared_out_of_bounds")),
        "expected OutOfBounds naming shared_out_of_bounds, got {error:?}"
    );
    assert_eq!(
        read_scalars::<B, u32>(&client, &out),
        (0..32).collect::<Vec<u32>>()
    );
}
