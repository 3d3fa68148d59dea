//! The settings, their defaults, and how one `section.key = value` is applied.
//!
//! [`CubertConfig::apply`] is the single place a key is understood; the file loader and the
//! environment loader both go through it, so both accept the same keys and values. Sizes
//! accept plain integers or strings with a unit (`"2 MiB"`, `"1GiB"`, `"512"`).

use crate::memory::MemoryOptions;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// How a device's work is executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceHandleMode {
    /// One runner thread per device; submitting returns at once.
    #[default]
    Threaded,
    /// Work runs on the calling thread under a lock.
    Inline,
}

/// `[runtime]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeConfig {
    /// Threaded or inline device handles.
    pub device_handle: DeviceHandleMode,
    /// Default backend (`cpu` or `cuda`).
    pub backend: String,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            device_handle: DeviceHandleMode::Threaded,
            backend: "cpu".into(),
        }
    }
}

/// `[memory]`: pool tunables (see `MemoryOptions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryConfig {
    /// Request rounding in bytes.
    pub rounding: u64,
    /// Largest request of the small pool.
    pub small_max_request: u64,
    /// Small pool segment size.
    pub small_segment: u64,
    /// Largest request sharing a mid-size large segment.
    pub large_mid_request: u64,
    /// Mid-size large segment size.
    pub large_mid_segment: u64,
    /// Rounding of dedicated large segments.
    pub large_round: u64,
    /// Smallest remainder split off a large block.
    pub large_min_split: u64,
    /// Free segments idle this many milliseconds are released; 0 never releases them.
    pub idle_release_ms: u64,
    /// Give cached free segments back before growing (see `MemoryOptions`).
    pub compact_before_growth: bool,
    /// Large requests from individually mapped pages where the backend can (CUDA).
    pub paged: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        let options = MemoryOptions::default();
        Self {
            rounding: options.rounding,
            small_max_request: options.small_max_request,
            small_segment: options.small_segment,
            large_mid_request: options.large_mid_request,
            large_mid_segment: options.large_mid_segment,
            large_round: options.large_round,
            large_min_split: options.large_min_split,
            idle_release_ms: options
                .idle_release
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            compact_before_growth: options.compact_before_growth,
            paged: options.paged,
        }
    }
}

impl MemoryConfig {
    /// The pool options these settings describe.
    pub fn options(&self) -> MemoryOptions {
        MemoryOptions {
            rounding: self.rounding.max(1),
            small_max_request: self.small_max_request,
            small_segment: self.small_segment.max(self.small_max_request),
            large_mid_request: self.large_mid_request,
            large_mid_segment: self.large_mid_segment.max(self.large_mid_request),
            large_round: self.large_round.max(1),
            large_min_split: self.large_min_split.max(1),
            idle_release: (self.idle_release_ms > 0)
                .then(|| Duration::from_millis(self.idle_release_ms)),
            compact_before_growth: self.compact_before_growth,
            paged: self.paged,
        }
    }
}

/// `[cpu]`: the CPU backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuConfig {
    /// Number of virtual CPU devices.
    pub devices: u32,
    /// Worker threads per device; 0 means one per core.
    pub threads: u32,
    /// Memory each device may hold in bytes; 0 means the machine's physical memory.
    pub memory_limit: u64,
    /// Shared memory per cube in bytes.
    pub max_shared_memory: u64,
    /// Row alignment in bytes of optimized (pitched) tensors; 1 keeps them dense.
    pub pitch_alignment: u64,
}

impl Default for CpuConfig {
    fn default() -> Self {
        Self {
            devices: 1,
            threads: 0,
            memory_limit: 0,
            max_shared_memory: 48 * 1024,
            pitch_alignment: 1,
        }
    }
}

/// `[cuda]`: the CUDA backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaConfig {
    /// Device memory each client may hold in bytes; 0 means the device's memory.
    pub memory_limit: u64,
    /// Freed pinned host memory kept for reuse, in bytes.
    pub pinned_cache: u64,
    /// Row alignment in bytes of optimized (pitched) tensors; 0 uses the device's.
    pub pitch_alignment: u64,
    /// Whether `to_client` copies GPU to GPU directly where the GPUs reach each other;
    /// `false` sends every copy through pinned host memory.
    pub peer_copy: bool,
    /// Threads copying pageable bytes into pinned staging memory for uploads; 0 means one
    /// per core, at most 8.
    pub copy_threads: u64,
}

impl Default for CudaConfig {
    fn default() -> Self {
        Self {
            memory_limit: 0,
            pinned_cache: 4 << 30,
            pitch_alignment: 0,
            peer_copy: true,
            copy_threads: 0,
        }
    }
}

/// What profiling records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileLevel {
    /// Nothing.
    #[default]
    Disabled,
    /// Counts launches per kernel, no timing.
    ExecutionOnly,
    /// Times every launch (each launch waits for the previous one to finish).
    Basic,
    /// Like basic, with kernel ids and cube counts in the names.
    Full,
}

/// Where text output goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogOutput {
    /// Standard output.
    #[default]
    Stdout,
    /// Standard error.
    Stderr,
    /// Appended to a file.
    File(PathBuf),
}

/// `[profiling]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilingConfig {
    /// What is recorded.
    pub level: ProfileLevel,
    /// Where the summary printed on sync goes.
    pub output: LogOutput,
    /// A Chrome trace (open in Perfetto) written when the process asks for it.
    pub trace_file: Option<PathBuf>,
}

/// `[logging]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggingConfig {
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub level: String,
    /// Where log lines go.
    pub output: LogOutput,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            level: "warn".into(),
            output: LogOutput::Stderr,
        }
    }
}

/// How `launch_unchecked` checks bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoundsCheckMode {
    /// Checked anyway.
    Enforce,
    /// Checked and every violation logged.
    Validate,
    /// Unchecked, as asked.
    #[default]
    Auto,
}

/// `[compilation]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompilationConfig {
    /// Bounds checking of `launch_unchecked`.
    pub bounds_check: BoundsCheckMode,
    /// Directory of the on-disk kernel cache; `None` uses the platform cache directory.
    pub cache_dir: Option<PathBuf>,
    /// Whether compiled kernels are cached on disk.
    pub disk_cache: bool,
}

impl Default for CompilationConfig {
    fn default() -> Self {
        Self {
            bounds_check: BoundsCheckMode::Auto,
            cache_dir: None,
            disk_cache: true,
        }
    }
}

/// How hard the autotuner searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutotuneLevel {
    /// Never tune: use each operation's default candidate.
    Off,
    /// Only the highest-priority candidates.
    Minimal,
    /// Most candidates.
    #[default]
    Balanced,
    /// Every candidate.
    Full,
}

/// `[autotune]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutotuneConfig {
    /// Search effort.
    pub level: AutotuneLevel,
    /// Whether results are cached on disk.
    pub disk_cache: bool,
    /// Directory of the cache; `None` uses the platform cache directory.
    pub cache_dir: Option<PathBuf>,
    /// Time budget per key in milliseconds.
    pub budget_ms: u64,
    /// Check mode: every candidate's output is compared with the first one's, and
    /// candidates that differ are skipped.
    pub check: bool,
}

impl Default for AutotuneConfig {
    fn default() -> Self {
        Self {
            level: AutotuneLevel::Balanced,
            disk_cache: true,
            cache_dir: None,
            budget_ms: 2000,
            check: false,
        }
    }
}

/// All settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CubertConfig {
    /// `[runtime]`.
    pub runtime: RuntimeConfig,
    /// `[memory]`.
    pub memory: MemoryConfig,
    /// `[cpu]`.
    pub cpu: CpuConfig,
    /// `[cuda]`.
    pub cuda: CudaConfig,
    /// `[profiling]`.
    pub profiling: ProfilingConfig,
    /// `[logging]`.
    pub logging: LoggingConfig,
    /// `[compilation]`.
    pub compilation: CompilationConfig,
    /// `[autotune]`.
    pub autotune: AutotuneConfig,
}

/// The section names, in the order they are documented.
pub const SECTIONS: [&str; 8] = [
    "runtime",
    "memory",
    "cpu",
    "cuda",
    "profiling",
    "logging",
    "compilation",
    "autotune",
];

impl CubertConfig {
    /// Applies `section.key = value`. On error, nothing changes and the message says what
    /// was expected.
    ///
    /// # Errors
    /// A message for an unknown key or a value of the wrong kind.
    pub fn apply(&mut self, section: &str, key: &str, value: &toml::Value) -> Result<(), String> {
        match (section, key) {
            ("runtime", "device_handle") => {
                self.runtime.device_handle = match text(value)?.as_str() {
                    "threaded" => DeviceHandleMode::Threaded,
                    "inline" => DeviceHandleMode::Inline,
                    other => return Err(one_of(other, &["threaded", "inline"])),
                }
            }
            ("runtime", "backend") => {
                self.runtime.backend = match text(value)?.as_str() {
                    name @ ("cpu" | "cuda") => name.to_string(),
                    other => return Err(one_of(other, &["cpu", "cuda"])),
                }
            }
            ("memory", "rounding") => self.memory.rounding = bytes_in(value, 1, GIB)?,
            ("memory", "small_max_request") => {
                self.memory.small_max_request = bytes_in(value, 1, GIB)?
            }
            ("memory", "small_segment") => {
                self.memory.small_segment = bytes_in(value, 1, 16 * GIB)?
            }
            ("memory", "large_mid_request") => {
                self.memory.large_mid_request = bytes_in(value, 1, 64 * GIB)?
            }
            ("memory", "large_mid_segment") => {
                self.memory.large_mid_segment = bytes_in(value, 1, 64 * GIB)?
            }
            ("memory", "large_round") => self.memory.large_round = bytes_in(value, 1, GIB)?,
            ("memory", "large_min_split") => {
                self.memory.large_min_split = bytes_in(value, 1, 64 * GIB)?
            }
            ("memory", "idle_release_ms") => {
                self.memory.idle_release_ms = integer_in(value, 0, MAX_MILLISECONDS)?
            }
            ("memory", "compact_before_growth") => {
                self.memory.compact_before_growth = boolean(value)?
            }
            ("memory", "paged") => self.memory.paged = boolean(value)?,
            ("cpu", "devices") => {
                let devices = integer(value)?;
                if !(1..=64).contains(&devices) {
                    return Err(format!("expected 1 to 64 devices, found {devices}"));
                }
                self.cpu.devices = devices as u32;
            }
            ("cpu", "threads") => {
                self.cpu.threads = integer_in(value, 0, u64::from(MAX_CPU_THREADS))? as u32;
            }
            ("cpu", "memory_limit") => {
                self.cpu.memory_limit = match value {
                    toml::Value::String(s) if s.trim() == "auto" => 0,
                    _ => positive_bytes(value)?,
                }
            }
            ("cpu", "max_shared_memory") => {
                self.cpu.max_shared_memory = bytes_in(value, 0, 64 * MIB)?
            }
            ("cpu", "pitch_alignment") => self.cpu.pitch_alignment = bytes_in(value, 1, MIB)?,
            ("cuda", "memory_limit") => {
                self.cuda.memory_limit = match value {
                    toml::Value::String(s) if s.trim() == "auto" => 0,
                    _ => positive_bytes(value)?,
                }
            }
            ("cuda", "pinned_cache") => self.cuda.pinned_cache = bytes(value)?,
            ("cuda", "pitch_alignment") => self.cuda.pitch_alignment = bytes_in(value, 0, MIB)?,
            ("cuda", "peer_copy") => self.cuda.peer_copy = boolean(value)?,
            ("cuda", "copy_threads") => {
                let threads = integer(value)?;
                if threads > 256 {
                    return Err(format!("expected 0 to 256 threads, found {threads}"));
                }
                self.cuda.copy_threads = threads;
            }
            ("profiling", "level") => {
                self.profiling.level = match text(value)?.as_str() {
                    "disabled" | "off" => ProfileLevel::Disabled,
                    "execution-only" | "execution_only" => ProfileLevel::ExecutionOnly,
                    "basic" => ProfileLevel::Basic,
                    "full" => ProfileLevel::Full,
                    other => {
                        return Err(one_of(
                            other,
                            &["disabled", "execution-only", "basic", "full"],
                        ));
                    }
                }
            }
            ("profiling", "output") => self.profiling.output = output(value)?,
            ("profiling", "trace_file") => {
                let path = text(value)?;
                self.profiling.trace_file = (!path.is_empty()).then(|| PathBuf::from(path));
            }
            ("logging", "level") => {
                self.logging.level = match text(value)?.to_ascii_lowercase().as_str() {
                    level @ ("off" | "error" | "warn" | "info" | "debug" | "trace") => {
                        level.to_string()
                    }
                    other => {
                        return Err(one_of(
                            other,
                            &["off", "error", "warn", "info", "debug", "trace"],
                        ));
                    }
                }
            }
            ("logging", "output") => self.logging.output = output(value)?,
            ("compilation", "bounds_check") => {
                self.compilation.bounds_check = match text(value)?.as_str() {
                    "enforce" => BoundsCheckMode::Enforce,
                    "validate" => BoundsCheckMode::Validate,
                    "auto" => BoundsCheckMode::Auto,
                    other => return Err(one_of(other, &["enforce", "validate", "auto"])),
                }
            }
            ("compilation", "cache_dir") => {
                let path = text(value)?;
                self.compilation.cache_dir = (!path.is_empty()).then(|| PathBuf::from(path));
            }
            ("compilation", "disk_cache") => self.compilation.disk_cache = boolean(value)?,
            ("autotune", "level") => {
                self.autotune.level = match text(value)?.as_str() {
                    "off" => AutotuneLevel::Off,
                    "minimal" => AutotuneLevel::Minimal,
                    "balanced" => AutotuneLevel::Balanced,
                    "full" => AutotuneLevel::Full,
                    other => return Err(one_of(other, &["off", "minimal", "balanced", "full"])),
                }
            }
            ("autotune", "disk_cache") => self.autotune.disk_cache = boolean(value)?,
            ("autotune", "cache_dir") => {
                let path = text(value)?;
                self.autotune.cache_dir = (!path.is_empty()).then(|| PathBuf::from(path));
            }
            ("autotune", "budget_ms") => {
                self.autotune.budget_ms = integer_in(value, 0, MAX_MILLISECONDS)?
            }
            ("autotune", "check") => self.autotune.check = boolean(value)?,
            (section, _) if !SECTIONS.contains(&section) => {
                return Err(format!(
                    "unknown section `{section}` (known: {})",
                    SECTIONS.join(", ")
                ));
            }
            (_, key) => return Err(format!("unknown key `{key}`")),
        }
        Ok(())
    }
}

fn kind(value: &toml::Value) -> &'static str {
    value.type_str()
}

fn text(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.trim().to_string()),
        other => Err(format!("expected a string, found {} {other}", kind(other))),
    }
}

fn one_of(found: &str, allowed: &[&str]) -> String {
    format!("expected one of {}, found \"{found}\"", allowed.join(", "))
}

fn integer(value: &toml::Value) -> Result<u64, String> {
    match value {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => s
            .trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| format!("expected a non-negative integer, found \"{s}\"")),
        other => Err(format!(
            "expected a non-negative integer, found {} {other}",
            kind(other)
        )),
    }
}

fn boolean(value: &toml::Value) -> Result<bool, String> {
    match value {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) => match s.trim() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            other => Err(format!("expected true or false, found \"{other}\"")),
        },
        other => Err(format!(
            "expected true or false, found {} {other}",
            kind(other)
        )),
    }
}

/// Parses a size: an integer, or a string with an optional unit (B, KB, KiB, MB, MiB, GB,
/// GiB, TB, TiB; case-insensitive).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim().replace('_', "");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return None,
    };
    if number.contains('.') {
        let value: f64 = number.parse().ok()?;
        let bytes = value * multiplier as f64;
        (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
    } else {
        number.parse::<u64>().ok()?.checked_mul(multiplier)
    }
}

fn bytes(value: &toml::Value) -> Result<u64, String> {
    match value {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        toml::Value::String(s) => parse_bytes(s)
            .ok_or_else(|| format!("expected a size such as 4096 or \"2 MiB\", found \"{s}\"")),
        other => Err(format!(
            "expected a size such as 4096 or \"2 MiB\", found {} {other}",
            kind(other)
        )),
    }
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Longest duration a `*_ms` key accepts: one week.
pub const MAX_MILLISECONDS: u64 = 7 * 24 * 3600 * 1000;
/// Most worker threads `[cpu] threads` accepts per device.
pub const MAX_CPU_THREADS: u32 = 1024;

/// A size in `min..=max` bytes; the error names the range in bytes and with units.
fn bytes_in(value: &toml::Value, min: u64, max: u64) -> Result<u64, String> {
    let size = bytes(value)?;
    if (min..=max).contains(&size) {
        Ok(size)
    } else {
        Err(format!(
            "expected a size from {min} to {max} bytes ({}), found {size}",
            describe_bytes(max)
        ))
    }
}

/// An integer in `min..=max`; the error names the range.
fn integer_in(value: &toml::Value, min: u64, max: u64) -> Result<u64, String> {
    let number = integer(value)?;
    if (min..=max).contains(&number) {
        Ok(number)
    } else {
        Err(format!("expected {min} to {max}, found {number}"))
    }
}

fn describe_bytes(size: u64) -> String {
    match size {
        size if size >= GIB && size.is_multiple_of(GIB) => format!("{} GiB", size / GIB),
        size if size >= MIB && size.is_multiple_of(MIB) => format!("{} MiB", size / MIB),
        size => format!("{size} B"),
    }
}

fn positive_bytes(value: &toml::Value) -> Result<u64, String> {
    match bytes(value)? {
        0 => Err("expected a size above 0".to_string()),
        size => Ok(size),
    }
}

fn output(value: &toml::Value) -> Result<LogOutput, String> {
    let target = text(value)?;
    Ok(match target.as_str() {
        "stdout" => LogOutput::Stdout,
        "stderr" => LogOutput::Stderr,
        "" => return Err("expected stdout, stderr or a file path, found \"\"".into()),
        path => LogOutput::File(PathBuf::from(path)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_units() {
        assert_eq!(parse_bytes("2 MiB"), Some(2 << 20));
        assert_eq!(parse_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("1.5 KiB"), Some(1536));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999999999999 TiB"), None);
    }

    #[test]
    fn wrong_kind_of_value_is_refused_and_changes_nothing() {
        let mut config = CubertConfig::default();
        let error = config
            .apply("cpu", "devices", &toml::Value::String("many".into()))
            .unwrap_err();
        assert!(error.contains("many"), "{error}");
        assert_eq!(config, CubertConfig::default());
    }

    #[test]
    fn values_outside_their_range_are_refused_naming_the_range() {
        let mut config = CubertConfig::default();
        for (section, key, value, range) in [
            ("cpu", "threads", toml::Value::Integer(100_000), "0 to 1024"),
            (
                "memory",
                "rounding",
                toml::Value::Integer(i64::MAX),
                "1 to 1073741824 bytes (1 GiB)",
            ),
            (
                "memory",
                "idle_release_ms",
                toml::Value::Integer(i64::MAX),
                "604800000",
            ),
            (
                "autotune",
                "budget_ms",
                toml::Value::Integer(i64::MAX),
                "604800000",
            ),
            ("cpu", "max_shared_memory", "1 TiB".into(), "64 MiB"),
            ("memory", "small_segment", "100 GiB".into(), "16 GiB"),
        ] {
            let error = config.apply(section, key, &value).unwrap_err();
            assert!(error.contains(range), "{section}.{key}: {error}");
        }
        assert_eq!(config, CubertConfig::default());
        config
            .apply("cpu", "threads", &toml::Value::Integer(1024))
            .unwrap();
        assert_eq!(config.cpu.threads, 1024);
    }

    #[test]
    fn unknown_keys_and_sections_are_named() {
        let mut config = CubertConfig::default();
        let error = config
            .apply("cpu", "cores", &toml::Value::Integer(2))
            .unwrap_err();
        assert!(error.contains("cores"));
        let error = config
            .apply("gpu", "cores", &toml::Value::Integer(2))
            .unwrap_err();
        assert!(error.contains("gpu"));
    }
}
