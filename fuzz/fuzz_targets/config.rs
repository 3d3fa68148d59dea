//! Configuration: an arbitrary `cubert.toml` plus an arbitrary environment through
//! `load_config_from`, then a memory manager built with the resulting memory options.
//!
//! The environment is OS strings made from raw bytes (`OsStringExt::from_vec`): names with
//! the `CUBERT_` prefix and any suffix, or without it, and any values, so names and values
//! that are not UTF-8 are included.
//!
//! Properties: loading never panics and always yields a usable configuration (the invariants
//! the schema promises hold); the file is found; every `CUBERT_*` variable whose name or
//! value is not UTF-8 is ignored with a warning naming it; a manager built from any accepted
//! memory options serves, frees and cleans up a few requests without panicking and ends
//! holding nothing.

#![no_main]

use arbitrary::Arbitrary;
use cubert_cpu::storage::HostStorage;
use cubert_runtime::config::{CONFIG_FILE_NAME, load_config_from, parse_bytes};
use cubert_runtime::device::DeviceId;
use cubert_runtime::handle::{HandleFactory, ReleaseQueue};
use cubert_runtime::memory::{HostOrdering, MemoryLimits, MemoryManager};
use cubert_runtime::stream::StreamId;
use libfuzzer_sys::fuzz_target;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::OnceLock;

/// One environment variable, as bytes.
#[derive(Arbitrary, Debug)]
struct Variable {
    /// Whether the name gets the `CUBERT_` prefix in front of `name`.
    prefixed: bool,
    name: Vec<u8>,
    value: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    file: Vec<u8>,
    env: Vec<Variable>,
    sizes: Vec<u32>,
}

/// The directory of the config file, one per process: in memory (`/dev/shm`) where there
/// is one, since on ext4 rewriting a truncated file flushes it to disk at every input.
fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("a temporary directory")
    })
}

fuzz_target!(|input: Input| {
    let dir = dir();
    let path = dir.path().join(CONFIG_FILE_NAME);
    std::fs::write(&path, &input.file).expect("the config file is written");
    let env: Vec<(OsString, OsString)> = input
        .env
        .iter()
        .take(8)
        .map(|variable| {
            let mut name = Vec::new();
            if variable.prefixed {
                name.extend_from_slice(b"CUBERT_");
            }
            name.extend_from_slice(&variable.name);
            (
                OsString::from_vec(name),
                OsString::from_vec(variable.value.clone()),
            )
        })
        // CUBERT_CONFIG would name another file.
        .filter(|(name, _)| name != "CUBERT_CONFIG")
        .collect();
    // The warning each `CUBERT_*` variable that is not UTF-8 must get.
    let expected: Vec<String> = env
        .iter()
        .filter(|(name, _)| name.as_bytes().starts_with(b"CUBERT_"))
        .filter_map(|(name, value)| match (name.to_str(), value.to_str()) {
            (Some(_), Some(_)) => None,
            (Some(name), None) => Some(format!("{name}: the value is not valid UTF-8; ignored")),
            (None, _) => Some(format!(
                "{}: the name is not valid UTF-8; ignored",
                name.to_string_lossy()
            )),
        })
        .collect();
    let loaded = load_config_from(dir.path(), env);
    assert_eq!(loaded.file.as_deref(), Some(path.as_path()));
    for warning in &expected {
        assert!(
            loaded.warnings.contains(warning),
            "missing warning {warning:?} in {:?}",
            loaded.warnings
        );
    }
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
