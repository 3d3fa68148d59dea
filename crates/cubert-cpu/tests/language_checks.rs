//! The CPU's checks of kernels written in the language: an out-of-bounds access is reported
//! with the kernel's Rust source line, and the slow checked mode (`[compilation]
//! bounds_check = "validate"`) also finds data races on shared memory (two units touching
//! one element between barriers, at least one writing). Each test plants one bug and checks
//! the report; a correct kernel must report nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cpu::{CpuDevice, CpuRuntime, CpuServer};
use cubert_runtime::config::{BoundsCheckMode, CubertConfig};
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{Bytes, ComputeClient, CubeCount, CubeDim, Handle, ServerError};

/// This file, to find the planted lines in.
const SOURCE: &str = include_str!("language_checks.rs");

/// `file:line` of the line of this file holding `marker`.
fn planted(marker: &str) -> String {
    let line = SOURCE
        .lines()
        .position(|line| line.contains(marker) && !line.contains("planted(\""))
        .unwrap_or_else(|| panic!("no line holds {marker}"));
    format!("language_checks.rs:{}", line + 1)
}

/// A client of a new CPU device whose language launches run in `mode`.
fn client(mode: BoundsCheckMode) -> ComputeClient<CpuRuntime> {
    let mut config = CubertConfig::default();
    config.compilation.bounds_check = mode;
    let server = CpuServer::new(CpuDevice::new(0), &config).unwrap();
    ComputeClient::from_server(server, config.runtime.device_handle).unwrap()
}

fn zeros(client: &ComputeClient<CpuRuntime>, len: usize) -> Handle {
    client.create(Bytes::from_elems(vec![0u32; len])).unwrap()
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn store_past_the_end(out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    out[i + 4] = i; // planted: out of bounds
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn everyone_writes_element_zero(out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(32);
    tile[0] = UNIT_POS; // planted: write-write race
    sync_cube();
    out[UNIT_POS] = tile[0];
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn read_the_neighbour_without_a_barrier(out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(32);
    let u = UNIT_POS;
    tile[u] = u * 10;
    out[u] = tile[(u + 31) % 32]; // planted: read-after-write race
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn read_the_neighbour_after_a_barrier(out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(32);
    let u = UNIT_POS;
    tile[u] = u * 10;
    sync_cube();
    out[u] = tile[(u + 31) % 32];
    sync_cube();
    tile[u] = 0;
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn shared_store_past_the_end(out: &mut Array<u32>) {
    let mut tile = SharedMemory::<u32>::new(8);
    tile[UNIT_POS + 8] = 1; // planted: shared out of bounds
    out[UNIT_POS] = UNIT_POS;
}

fn one_cube() -> (CubeCount, CubeDim) {
    (CubeCount::Static(1, 1, 1), CubeDim::new_1d(32))
}

#[test]
fn out_of_bounds_store_is_reported_with_its_source_line() {
    for mode in [BoundsCheckMode::Auto, BoundsCheckMode::Validate] {
        let client = client(mode);
        let out = zeros(&client, 32);
        let (count, dim) = one_cube();
        store_past_the_end::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
        match client.sync() {
            Err(ServerError::OutOfBounds { kernel, first, .. }) => {
                assert!(kernel.contains("store_past_the_end"), "{kernel}");
                let line = planted("planted: out of bounds");
                assert!(first.contains(&line), "{mode:?}: `{first}` names {line}");
            }
            other => panic!("{mode:?}: expected OutOfBounds, got {other:?}"),
        }
    }
}

#[test]
fn shared_out_of_bounds_store_is_reported_with_its_source_line() {
    let client = client(BoundsCheckMode::Auto);
    let out = zeros(&client, 32);
    let (count, dim) = one_cube();
    shared_store_past_the_end::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
    match client.sync() {
        Err(ServerError::OutOfBounds { first, .. }) => {
            let line = planted("planted: shared out of bounds");
            assert!(first.contains(&line), "`{first}` names {line}");
            assert!(first.contains("shared array"), "{first}");
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
}

#[test]
fn validate_mode_reports_two_units_writing_one_shared_element() {
    let client = client(BoundsCheckMode::Validate);
    let out = zeros(&client, 32);
    let (count, dim) = one_cube();
    everyone_writes_element_zero::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
    match client.sync() {
        Err(ServerError::DataRace {
            kernel,
            races,
            first,
            ..
        }) => {
            assert!(kernel.contains("everyone_writes_element_zero"), "{kernel}");
            assert_eq!(races, 31, "units 1..32 each write after unit 0: {first}");
            let line = planted("planted: write-write race");
            assert!(first.contains(&line), "`{first}` names {line}");
            assert!(
                first.contains("unit 1 writes element 0") && first.contains("unit 0 wrote"),
                "{first}"
            );
        }
        other => panic!("expected DataRace, got {other:?}"),
    }
    client
        .sync()
        .expect("the race is reported once; the device works on");
}

#[test]
fn validate_mode_reports_a_read_of_another_units_write_without_a_barrier() {
    let client = client(BoundsCheckMode::Validate);
    let out = zeros(&client, 32);
    let (count, dim) = one_cube();
    read_the_neighbour_without_a_barrier::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
    match client.sync() {
        Err(ServerError::DataRace { first, .. }) => {
            let line = planted("planted: read-after-write race");
            assert!(first.contains(&line), "`{first}` names {line}");
            assert!(first.contains("reads element"), "{first}");
        }
        other => panic!("expected DataRace, got {other:?}"),
    }
}

#[test]
fn accesses_separated_by_sync_cube_are_not_races() {
    let client = client(BoundsCheckMode::Validate);
    let out = zeros(&client, 32);
    let (count, dim) = one_cube();
    read_the_neighbour_after_a_barrier::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
    client
        .sync()
        .expect("no race: a barrier separates the write and the read");
    let got = client.read_one(out).unwrap().to_elems::<u32>();
    let want: Vec<u32> = (0..32).map(|u| ((u + 31) % 32) * 10).collect();
    assert_eq!(got, want);
}

#[test]
fn races_are_only_looked_for_in_validate_mode() {
    let client = client(BoundsCheckMode::Auto);
    let out = zeros(&client, 32);
    let (count, dim) = one_cube();
    everyone_writes_element_zero::launch::<CpuRuntime>(&client, count, dim, &out).unwrap();
    client
        .sync()
        .expect("the fast checked mode doesn't track shared accesses");
}

// Kernels whose units touch only their own elements run over plain accesses where the
// launch's buffers hold every unit's elements (`lang::native::exclusive`); the runs of
// cubes that overrun a buffer take the checked path, so results and reports stay the same.

#[cubert_macros::kernel(crate = cubert_runtime)]
fn add_one_unguarded(a: &Array<u32>, out: &mut Array<u32>) {
    let i = ABSOLUTE_POS;
    out[i] = a[i] + 1; // planted: elementwise out of bounds
}

#[cubert_macros::kernel(crate = cubert_runtime)]
fn add_one_by_lines(a: &Array<u32>, out: &mut Array<u32>, lines: u32) {
    let i = ABSOLUTE_POS;
    if i < lines {
        let x = a.line::<4>(i);
        let mut y = x;
        for k in 0..4u32 {
            y[k] = x[k] + 1;
        }
        out.set_line(i, y);
    }
}

fn counting(client: &ComputeClient<CpuRuntime>, len: u32) -> Handle {
    client
        .create(Bytes::from_elems((0..len).collect::<Vec<u32>>()))
        .unwrap()
}

#[test]
fn elementwise_kernel_overrunning_its_buffers_writes_the_rest_and_reports_the_overrun() {
    let client = client(BoundsCheckMode::Auto);
    // 64 cubes of 32 units over 2000 elements: the last run of cubes overruns.
    let (a, out) = (counting(&client, 2000), zeros(&client, 2000));
    add_one_unguarded::launch::<CpuRuntime>(
        &client,
        CubeCount::Static(64, 1, 1),
        CubeDim::new_1d(32),
        &a,
        &out,
    )
    .unwrap();
    match client.sync() {
        Err(ServerError::OutOfBounds {
            kernel,
            accesses,
            first,
            ..
        }) => {
            assert!(kernel.contains("add_one_unguarded"), "{kernel}");
            assert_eq!(
                accesses,
                2 * (64 * 32 - 2000),
                "a load and a store per unit"
            );
            let line = planted("planted: elementwise out of bounds");
            assert!(first.contains(&line), "`{first}` names {line}");
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    let got = client.read_one(out).unwrap().to_elems::<u32>();
    assert_eq!(got, (1..=2000).collect::<Vec<u32>>());
}

#[test]
fn elementwise_kernel_with_lines_gives_every_element_when_the_grid_overhangs() {
    let client = client(BoundsCheckMode::Auto);
    for len in [1000u32, 1 << 16] {
        let lines = len / 4;
        let (a, out) = (counting(&client, len), zeros(&client, len as usize));
        // Cubes of 32 units rounded up past the last line.
        let cubes = lines.div_ceil(32) + 1;
        add_one_by_lines::launch::<CpuRuntime>(
            &client,
            CubeCount::Static(cubes, 1, 1),
            CubeDim::new_1d(32),
            &a,
            &out,
            lines,
        )
        .unwrap();
        client.sync().unwrap();
        let got = client.read_one(out).unwrap().to_elems::<u32>();
        assert_eq!(got, (1..=len).collect::<Vec<u32>>(), "{len} elements");
    }
}
