//! The on-disk cache of tuning results, shared by processes.
//!
//! Layout: `<dir>/<fingerprint id>/<operation>/<hash of the key>.json`, one file per key,
//! holding the [`TuneRecord`] as JSON with a format version. One file per key means no
//! process ever rewrites another key's result, so no lock is needed: a record is written
//! to a temporary file unique to the process and thread, then renamed over the final name,
//! which is atomic. Readers see the old file, the new one, or none, never a partial one;
//! two processes tuning the same key at once both write a complete record and the last
//! rename wins.
//!
//! A file is used only if it parses, has this format version, and names the same
//! fingerprint, operation, key and candidate-set checksum; anything else (a changed set, a
//! hash collision, a truncated file from a crash) reads as missing and is overwritten once
//! the key is tuned again.

use super::memory::CacheKey;
use super::record::TuneRecord;
use crate::error::IoError;
use crate::properties::fnv1a;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Version of the file format; files of another version are ignored.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    record: TuneRecord,
}

/// The default directory: `$XDG_CACHE_HOME/cubert/autotune`, else
/// `$HOME/.cache/cubert/autotune`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(dir).join("cubert").join("autotune"));
    }
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".cache/cubert/autotune"))
}

fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The on-disk cache in one directory. See the module docs.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// A cache in `dir` (created when the first record is written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `key`.
    pub fn path(&self, key: &CacheKey) -> PathBuf {
        self.dir
            .join(file_safe(&key.fingerprint))
            .join(file_safe(&key.operation))
            .join(format!("{:016x}.json", fnv1a(key.key.as_str().as_bytes())))
    }

    /// The record of `key`, if a valid one for exactly this key and checksum is on disk.
    pub fn load(&self, key: &CacheKey) -> Option<TuneRecord> {
        let path = self.path(key);
        let text = std::fs::read_to_string(&path).ok()?;
        let file: CacheFile = match serde_json::from_str(&text) {
            Ok(file) => file,
            Err(error) => {
                tracing::debug!("autotune cache {} is unreadable: {error}", path.display());
                return None;
            }
        };
        let record = file.record;
        let matches = file.format == FORMAT_VERSION
            && record.fingerprint.id() == key.fingerprint
            && record.operation == key.operation
            && record.key == key.key;
        if !matches {
            return None;
        }
        if record.checksum != key.checksum {
            tracing::debug!(
                "autotune cache {}: the candidate set of `{}` changed; tuning again",
                path.display(),
                key.operation
            );
            return None;
        }
        Some(record)
    }

    /// Writes `record` as the result of `key` (atomically, see the module docs).
    ///
    /// # Errors
    /// [`IoError::Unknown`] if the directory or the file can't be written.
    pub fn store(&self, key: &CacheKey, record: &TuneRecord) -> Result<(), IoError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = self.path(key);
        let failed = |what: &str, error: &dyn std::fmt::Display| IoError::Unknown {
            description: format!("autotune cache {}: {what}: {error}", path.display()),
            backtrace: crate::backtrace::BackTrace::capture(),
        };
        let dir = path
            .parent()
            .ok_or_else(|| failed("no parent directory", &"?"))?;
        std::fs::create_dir_all(dir).map_err(|e| failed("can't create the directory", &e))?;
        let text = serde_json::to_string_pretty(&CacheFile {
            format: FORMAT_VERSION,
            record: record.clone(),
        })
        .map_err(|e| failed("can't serialize", &e))?;
        let temporary = dir.join(format!(
            ".{}.{}.{}.tmp",
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::write(&temporary, text)
            .map_err(|e| failed("can't write", &e))
            .and_then(|()| {
                std::fs::rename(&temporary, &path).map_err(|e| failed("can't rename", &e))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AutotuneLevel;
    use crate::tune::key::{DeviceFingerprint, TuneKey};

    fn key(checksum: u64) -> CacheKey {
        CacheKey {
            fingerprint: DeviceFingerprint::new("cpu", 9, "").id(),
            operation: "matmul_f32".into(),
            checksum,
            key: TuneKey::new("m=64,k=64,n=64"),
        }
    }

    fn record(checksum: u64) -> TuneRecord {
        TuneRecord {
            operation: "matmul_f32".into(),
            key: TuneKey::new("m=64,k=64,n=64"),
            fingerprint: DeviceFingerprint::new("cpu", 9, ""),
            checksum,
            level: AutotuneLevel::Balanced,
            winner: "t32".into(),
            candidates: Vec::new(),
            tuning_seconds: 0.5,
            benchmark_runs: 12,
        }
    }

    #[test]
    fn stored_record_loads_back_only_for_the_same_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path());
        assert!(cache.load(&key(1)).is_none());
        cache.store(&key(1), &record(1)).unwrap();
        assert_eq!(cache.load(&key(1)), Some(record(1)));
        assert!(cache.load(&key(2)).is_none(), "a changed set is stale");
        let leftovers: Vec<_> = std::fs::read_dir(cache.path(&key(1)).parent().unwrap())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
    }

    #[test]
    fn truncated_or_foreign_files_read_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path());
        cache.store(&key(1), &record(1)).unwrap();
        let path = cache.path(&key(1));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert!(cache.load(&key(1)).is_none());
        let mut other = record(1);
        other.key = TuneKey::new("m=1");
        cache.store(&key(1), &other).unwrap();
        assert!(cache.load(&key(1)).is_none(), "a record of another key");
    }

    #[test]
    fn concurrent_writers_leave_one_complete_record() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path());
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let mut record = record(1);
                    record.winner = format!("w{i}");
                    for _ in 0..20 {
                        cache.store(&key(1), &record).unwrap();
                        assert!(cache.load(&key(1)).is_some(), "never a partial file");
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        assert!(cache.load(&key(1)).unwrap().winner.starts_with('w'));
    }
}
