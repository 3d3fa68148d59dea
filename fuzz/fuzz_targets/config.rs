//! Configuration: an arbitrary `cubert.toml` plus arbitrary `CUBERT_*` variables through
//! `load_config_from`, then a memory manager built with the resulting memory options.
//!
//! Properties: loading never panics and always yields a usable configuration (the invariants
//! the schema promises hold); the file is found and named in its warnings; a manager built
//! from any accepted memory options serves, frees and cleans up a few requests without
//! panicking and ends holding nothing.

#![no_main]

use arbitrary::Arbitrary;
use cubert_cpu::storage::HostStorage;
use cubert_runtime::config::{CONFIG_FILE_NAME, load_config_from, parse_bytes};
use cubert_runtime::device::DeviceId;
use cubert_runtime::handle::{HandleFactory, ReleaseQueue};
use cubert_runtime::memory::{HostOrdering, MemoryLimits, MemoryManager};
use cubert_runtime::stream::StreamId;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[derive(Arbitrary, Debug)]
struct Input {
    file: Vec<u8>,
    env: Vec<(String, String)>,
    sizes: Vec<u32>,
}

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
}

fuzz_target!(|input: Input| {
    let dir = dir();
    let path = dir.path().join(CONFIG_FILE_NAME);
    std::fs::write(&path, &input.file).expect("the config file is written");
    let env: Vec<(String, String)> = input
        .env
        .iter()
        .take(8)
        .map(|(name, value)| (format!("CUBERT_{name}"), value.clone()))
        .filter(|(name, _)| name != "CUBERT_CONFIG")
        .collect();
    let loaded = load_config_from(dir.path(), env);
    assert_eq!(loaded.file.as_deref(), Some(path.as_path()));
    let config = loaded.config;
    assert!((1..=64).contains(&config.cpu.devices), "{config:?}");
    for warning in &loaded.warnings {
        assert!(!warning.is_empty());
    }
    if let Ok(text) = std::str::from_utf8(&input.file) {
        let _ = parse_bytes(text);
    }

    let options = config.memory.options();
    assert!(
        options.rounding > 0 && options.small_segment > 0,
        "{options:?}"
    );
    let mut manager = MemoryManager::new(
        HostStorage::default(),
        options,
        MemoryLimits {
            max_allocation: 16 << 20,
            capacity: Some(64 << 20),
        },
    );
    let factory = HandleFactory::new(DeviceId::new(0, 0), ReleaseQueue::new());
    let stream = StreamId::new(0);
    let mut live = Vec::new();
    for size in input.sizes.iter().take(16) {
        let size = u64::from(*size % (20 << 20));
        let handle = factory.mint(stream, size.max(1));
        if manager
            .reserve(handle.id(), size, stream, &mut HostOrdering)
            .is_ok()
        {
            live.push(handle);
        }
    }
    for handle in live {
        assert!(manager.release(handle.id(), Vec::new()));
    }
    manager.cleanup(&mut HostOrdering);
    let usage = manager.usage();
    assert_eq!(usage.number_allocs, 0, "{usage:?}");
    assert_eq!(usage.bytes_reserved, 0, "{usage:?}");
});
