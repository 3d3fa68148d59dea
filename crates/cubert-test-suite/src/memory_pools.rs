//! Memory pools a user controls at run time: `install_memory_pools` (what changes when,
//! and what is refused with the old options kept), and the persistent-memory modes
//! (`[memory] persistent`: size_match, enabled, disabled, enforced), each checked by where
//! a request lands in the per-pool report.

use crate::backend::{Client, TestBackend};
use crate::support::client;
use cubert_runtime::memory::{MemoryOptions, PersistentMemory};
use cubert_runtime::{IoError, ServerError};

/// Bytes in use in the pool named `name`.
fn in_use<B: TestBackend>(client: &Client<B>, name: &str) -> u64 {
    let report = client.memory_report().unwrap();
    report
        .pools
        .iter()
        .filter(|pool| pool.name == name)
        .map(|pool| pool.bytes_in_use)
        .sum()
}

/// Reserves 3000 bytes in a persistent window, drops them, then 3000 bytes outside it:
/// the pool each one lands in.
fn placements<B: TestBackend>(mode: PersistentMemory) -> (&'static str, &'static str) {
    let client = client::<B>();
    client
        .install_memory_pools(MemoryOptions {
            persistent: mode,
            ..MemoryOptions::default()
        })
        .unwrap();
    let pool_of = |client: &Client<B>| {
        if in_use::<B>(client, "persistent") > 0 {
            "persistent"
        } else {
            assert!(in_use::<B>(client, "small") > 0, "{mode:?}: in no pool");
            "small"
        }
    };
    let first = client
        .memory_persistent_allocation((), |()| client.empty(3000).unwrap())
        .unwrap();
    let first_pool = pool_of(&client);
    drop(first);
    client.sync().unwrap();
    let second = client.empty(3000).unwrap();
    let second_pool = pool_of(&client);
    drop(second);
    (first_pool, second_pool)
}

/// `size_match` (the default) serves an automatic request from a freed persistent block of
/// its exact size; `enabled` keeps automatic requests in the dynamic pools; `disabled`
/// puts even persistent requests there; `enforced` makes every request persistent.
pub fn persistent_memory_modes_place_requests_as_documented<B: TestBackend>() {
    assert_eq!(
        MemoryOptions::default().persistent,
        PersistentMemory::SizeMatch
    );
    let cases = [
        (PersistentMemory::SizeMatch, ("persistent", "persistent")),
        (PersistentMemory::Enabled, ("persistent", "small")),
        (PersistentMemory::Disabled, ("small", "small")),
        (PersistentMemory::Enforced, ("persistent", "persistent")),
    ];
    for (mode, want) in cases {
        assert_eq!(placements::<B>(mode), want, "{mode:?}");
    }
}

fn is_invalid(error: &ServerError) -> bool {
    matches!(error, ServerError::Io(IoError::InvalidArgument { .. }))
}

/// `install_memory_pools` changes the steering keys at any time, reshapes the pools only
/// while nothing is allocated (a live allocation refuses it and keeps the old shape and the
/// data), and never switches `paged` or `growable`.
pub fn installed_memory_pools_reshape_only_empty_pools<B: TestBackend>() {
    let client = client::<B>();
    let data = client.create_from_slice(&[7u8; 100]).unwrap();
    client
        .install_memory_pools(MemoryOptions {
            persistent: PersistentMemory::Enforced,
            idle_release: None,
            ..MemoryOptions::default()
        })
        .unwrap();
    let reshaped = MemoryOptions {
        small_segment: 4 << 20,
        ..MemoryOptions::default()
    };
    let error = client.install_memory_pools(reshaped.clone()).unwrap_err();
    assert!(is_invalid(&error), "{error}");
    assert!(error.to_string().contains("live"), "{error}");
    let switched = MemoryOptions {
        growable: !MemoryOptions::default().growable,
        paged: true,
        ..MemoryOptions::default()
    };
    let error = client.install_memory_pools(switched).unwrap_err();
    assert!(is_invalid(&error), "{error}");
    assert_eq!(
        client.read_one(data.clone()).unwrap().to_vec(),
        vec![7u8; 100]
    );
    drop(data);
    client.sync().unwrap();
    client.install_memory_pools(reshaped).unwrap();
    let small = client.empty(100).unwrap();
    let report = client.memory_report().unwrap();
    let reserved: u64 = report
        .pools
        .iter()
        .filter(|pool| pool.name == "small")
        .map(|pool| pool.bytes_reserved)
        .sum();
    assert_eq!(reserved, 4 << 20, "one segment of the new size");
    drop(small);
}
