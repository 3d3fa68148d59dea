//! The settings: one struct per `[section]`, their defaults, and the values each key takes.
//!
//! serde maps the keys: each section derives `Deserialize` with `deny_unknown_fields`, and
//! each field names the helper (in `values`) that reads its value and checks its range.
//! [`CubertConfig::apply`] applies one `section.key = value` through that schema; the file
//! loader and the environment loader both go through it, so both accept the same keys and
//! values. `[memory]` is the memory manager's own [`MemoryOptions`].

use super::section::{field_names, settings};
use super::values::{self, MAX_CPU_THREADS, MAX_MILLISECONDS, MIB};
use crate::memory::MemoryOptions;
use crate::stream::{StreamPolicy, StreamPriority};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

settings! {
    keys:
    /// `[runtime]`.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct RuntimeConfig {
        /// Threaded or inline device handles.
        #[serde(deserialize_with = "values::choice")]
        pub device_handle: DeviceHandleMode,
        /// Default backend (`cpu`, `cuda`, or `auto`: CUDA when a device is usable, else the
        /// CPU).
        #[serde(deserialize_with = "values::backend")]
        pub backend: String,
        /// Which stream a client's work goes on: `per_thread`, `per_task` or `single`.
        #[serde(deserialize_with = "values::choice")]
        pub stream_policy: StreamPolicy,
        /// The most device queues a server creates for its streams, 1 to 64 (later stream
        /// ids share them round-robin; CUDA creates that many `CUstream`s at most).
        #[serde(deserialize_with = "values::number::<_, _, 1, { MAX_STREAMS as u64 }>")]
        pub max_streams: u32,
        /// The priority of those queues: `normal` or `high`.
        #[serde(deserialize_with = "values::choice")]
        pub stream_priority: StreamPriority,
    }
}

/// The most device queues `[runtime] max_streams` may ask for.
pub const MAX_STREAMS: u32 = 64;

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            device_handle: DeviceHandleMode::Threaded,
            backend: "cpu".into(),
            stream_policy: StreamPolicy::PerThread,
            max_streams: 16,
            stream_priority: StreamPriority::Normal,
        }
    }
}

/// `[memory]`: the pool options of every device's memory manager. The section is read into
/// [`MemoryOptions`] itself (its keys are its fields; `idle_release_ms` sets
/// `idle_release`, 0 meaning never); [`MemoryOptions::options`] gives the options a
/// manager is built with.
pub type MemoryConfig = MemoryOptions;

settings! {
    keys:
    /// `[cpu]`: the CPU backend.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct CpuConfig {
        /// Number of virtual CPU devices.
        #[serde(deserialize_with = "values::cpu_devices")]
        pub devices: u32,
        /// Worker threads per device; 0 means one per core.
        #[serde(deserialize_with = "values::number::<_, _, 0, { MAX_CPU_THREADS as u64 }>")]
        pub threads: u32,
        /// Memory each device may hold in bytes; 0 means the machine's physical memory.
        #[serde(deserialize_with = "values::limit", serialize_with = "values::write_limit")]
        pub memory_limit: u64,
        /// Shared memory per cube in bytes.
        #[serde(deserialize_with = "values::size::<_, 0, { 64 * MIB }>")]
        pub max_shared_memory: u64,
        /// Row alignment in bytes of optimized (pitched) tensors; 1 keeps them dense.
        #[serde(deserialize_with = "values::size::<_, 1, MIB>")]
        pub pitch_alignment: u64,
    }
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

settings! {
    keys:
    /// `[cuda]`: the CUDA backend.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct CudaConfig {
        /// Device memory each client may hold in bytes; 0 means the device's memory.
        #[serde(deserialize_with = "values::limit", serialize_with = "values::write_limit")]
        pub memory_limit: u64,
        /// Freed pinned host memory kept for reuse, in bytes.
        #[serde(deserialize_with = "values::any_size")]
        pub pinned_cache: u64,
        /// Row alignment in bytes of optimized (pitched) tensors; 0 uses the device's.
        #[serde(deserialize_with = "values::size::<_, 0, MIB>")]
        pub pitch_alignment: u64,
        /// Whether `to_client` copies GPU to GPU directly where the GPUs reach each other;
        /// `false` sends every copy through pinned host memory.
        #[serde(deserialize_with = "values::flag")]
        pub peer_copy: bool,
        /// Threads copying pageable bytes into pinned staging memory for uploads; 0 means one
        /// per core, at most 8.
        #[serde(deserialize_with = "values::copy_threads")]
        pub copy_threads: u64,
    }
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
    #[serde(alias = "off")]
    Disabled,
    /// Counts launches per kernel, no timing.
    #[serde(alias = "execution_only")]
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

settings! {
    keys:
    /// `[profiling]`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct ProfilingConfig {
        /// What is recorded.
        #[serde(deserialize_with = "values::choice")]
        pub level: ProfileLevel,
        /// Where the summary printed on sync goes.
        #[serde(deserialize_with = "values::output", serialize_with = "values::write_output")]
        pub output: LogOutput,
        /// A Chrome trace (open in Perfetto) written when the process asks for it.
        #[serde(
            deserialize_with = "values::optional_path",
            skip_serializing_if = "Option::is_none"
        )]
        pub trace_file: Option<PathBuf>,
    }
}

settings! {
    keys:
    /// `[logging]`: the log output of the `cubert` CLI. A program using the library sees
    /// cubert's `tracing` events and spans through its own subscriber (or its `log` logger).
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct LoggingConfig {
        /// `off`, `error`, `warn`, `info`, `debug` or `trace`; `RUST_LOG` takes precedence.
        #[serde(deserialize_with = "values::log_level")]
        pub level: String,
        /// Where log lines go.
        #[serde(deserialize_with = "values::output", serialize_with = "values::write_output")]
        pub output: LogOutput,
    }
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

settings! {
    keys:
    /// `[compilation]`.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct CompilationConfig {
        /// Bounds checking of `launch_unchecked`.
        #[serde(deserialize_with = "values::choice")]
        pub bounds_check: BoundsCheckMode,
        /// Directory of the on-disk kernel cache; `None` uses the platform cache directory.
        #[serde(
            deserialize_with = "values::optional_path",
            skip_serializing_if = "Option::is_none"
        )]
        pub cache_dir: Option<PathBuf>,
        /// Whether compiled kernels are cached on disk.
        #[serde(deserialize_with = "values::flag")]
        pub disk_cache: bool,
    }
}

impl CompilationConfig {
    /// The directory of the on-disk kernel caches: `cache_dir`, else `$XDG_CACHE_HOME/cubert/kernels`
    /// or `~/.cache/cubert/kernels`; `None` when `disk_cache` is off or no directory is known.
    pub fn disk_cache_dir(&self) -> Option<PathBuf> {
        if !self.disk_cache {
            return None;
        }
        if let Some(dir) = &self.cache_dir {
            return Some(dir.clone());
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(dir).join("cubert").join("kernels"));
        }
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/cubert/kernels"))
    }
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

/// What the wgpu backend hands a Vulkan driver (`[wgpu] kernels`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WgpuKernels {
    /// SPIR-V compiled by the backend with every float operation marked `NoContraction`
    /// and the device's float controls declared (where wgpu takes SPIR-V as it is: Vulkan);
    /// WGSL elsewhere.
    #[default]
    StrictSpirv,
    /// The same SPIR-V without the markings: what wgpu would make of the WGSL (a
    /// diagnostic: the driver may fuse and reassociate again).
    Spirv,
    /// WGSL, compiled by wgpu.
    Wgsl,
}

settings! {
    keys:
    /// `[wgpu]`: the wgpu backend.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct WgpuConfig {
        /// `strict_spirv` (the default), `spirv` or `wgsl`: see [`WgpuKernels`].
        #[serde(deserialize_with = "values::choice")]
        pub kernels: WgpuKernels,
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

settings! {
    keys:
    /// `[autotune]`.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct AutotuneConfig {
        /// Search effort.
        #[serde(deserialize_with = "values::choice")]
        pub level: AutotuneLevel,
        /// Whether results are cached on disk.
        #[serde(deserialize_with = "values::flag")]
        pub disk_cache: bool,
        /// Directory of the cache; `None` uses the platform cache directory.
        #[serde(
            deserialize_with = "values::optional_path",
            skip_serializing_if = "Option::is_none"
        )]
        pub cache_dir: Option<PathBuf>,
        /// Time budget per key in milliseconds.
        #[serde(deserialize_with = "values::number::<_, _, 0, MAX_MILLISECONDS>")]
        pub budget_ms: u64,
        /// Check mode: every candidate's output is compared with the first one's, and
        /// candidates that differ are skipped.
        #[serde(deserialize_with = "values::flag")]
        pub check: bool,
    }
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

settings! {
    sections:
    /// All settings, one field per `[section]`.
    ///
    /// Deserializing it from a whole `cubert.toml` is strict (an unknown key or a bad value
    /// fails it); the loader instead applies key by key, turning each problem into a
    /// warning.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct CubertConfig {
        /// `[runtime]`.
        pub runtime: RuntimeConfig,
        /// `[memory]`.
        pub memory: MemoryConfig,
        /// `[cpu]`.
        pub cpu: CpuConfig,
        /// `[cuda]`.
        pub cuda: CudaConfig,
        /// `[wgpu]`.
        pub wgpu: WgpuConfig,
        /// `[profiling]`.
        pub profiling: ProfilingConfig,
        /// `[logging]`.
        pub logging: LoggingConfig,
        /// `[compilation]`.
        pub compilation: CompilationConfig,
        /// `[autotune]`.
        pub autotune: AutotuneConfig,
    }
}

impl CubertConfig {
    /// Applies `section.key = value`. On error, nothing changes and the message says what
    /// was expected.
    ///
    /// # Errors
    /// A message for an unknown section or key, or a value of the wrong kind or out of its
    /// range.
    pub fn apply(&mut self, section: &str, key: &str, value: &toml::Value) -> Result<(), String> {
        let sections = Self::sections();
        let unknown = || {
            format!(
                "unknown section `{section}` (known: {})",
                sections.join(", ")
            )
        };
        let index = sections
            .iter()
            .position(|known| *known == section)
            .ok_or_else(unknown)?;
        self.section_mut(index)
            .ok_or_else(unknown)?
            .apply_key(key, value)
    }

    /// The section names, in the order they are declared (and documented).
    pub(crate) fn sections() -> &'static [&'static str] {
        field_names::<Self>()
    }

    /// Every `(section, key)` the schema knows.
    #[cfg(test)]
    pub(crate) fn keys() -> Vec<(&'static str, &'static str)> {
        let mut config = Self::default();
        Self::sections()
            .iter()
            .enumerate()
            .flat_map(|(index, section)| {
                let keys = config.section_mut(index).map_or(&[][..], |s| s.keys());
                keys.iter().map(move |key| (*section, *key))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sections_are_the_fields_in_documented_order() {
        assert_eq!(
            CubertConfig::sections(),
            [
                "runtime",
                "memory",
                "cpu",
                "cuda",
                "wgpu",
                "profiling",
                "logging",
                "compilation",
                "autotune"
            ]
        );
    }

    /// A valid value, other than the default, for every key the schema has: applying it
    /// changes that setting and no other, so serde's key list and the fields line up.
    #[test]
    fn every_key_applies_to_its_own_setting_only() {
        let values: &[(&str, &str, toml::Value)] = &[
            ("runtime", "device_handle", "inline".into()),
            ("runtime", "backend", "cuda".into()),
            ("runtime", "stream_policy", "single".into()),
            ("runtime", "max_streams", 4.into()),
            ("runtime", "stream_priority", "high".into()),
            ("memory", "rounding", 256.into()),
            ("memory", "small_max_request", "512 KiB".into()),
            ("memory", "small_segment", "4 MiB".into()),
            ("memory", "large_mid_request", "8 MiB".into()),
            ("memory", "large_mid_segment", "32 MiB".into()),
            ("memory", "large_round", "4 MiB".into()),
            ("memory", "large_min_split", "2 MiB".into()),
            ("memory", "idle_release_ms", 0.into()),
            ("memory", "compact_before_growth", false.into()),
            ("memory", "paged", "yes".into()),
            ("memory", "growable", false.into()),
            ("memory", "growable_block", "4 MiB".into()),
            ("memory", "growable_max_chunk", "16 MiB".into()),
            ("memory", "persistent", "enforced".into()),
            ("cpu", "devices", 4.into()),
            ("cpu", "threads", 2.into()),
            ("cpu", "memory_limit", "1 GiB".into()),
            ("cpu", "max_shared_memory", 1024.into()),
            ("cpu", "pitch_alignment", 64.into()),
            ("cuda", "memory_limit", "2 GiB".into()),
            ("cuda", "pinned_cache", "1 GiB".into()),
            ("cuda", "pitch_alignment", 256.into()),
            ("cuda", "peer_copy", false.into()),
            ("cuda", "copy_threads", 4.into()),
            ("wgpu", "kernels", "wgsl".into()),
            ("profiling", "level", "execution_only".into()),
            ("profiling", "output", "profile.txt".into()),
            ("profiling", "trace_file", "trace.json".into()),
            ("logging", "level", "DEBUG".into()),
            ("logging", "output", "stdout".into()),
            ("compilation", "bounds_check", "enforce".into()),
            ("compilation", "cache_dir", "/tmp/kernels".into()),
            ("compilation", "disk_cache", false.into()),
            ("autotune", "level", "off".into()),
            ("autotune", "disk_cache", "off".into()),
            ("autotune", "cache_dir", "/tmp/tune".into()),
            ("autotune", "budget_ms", 50.into()),
            ("autotune", "check", true.into()),
        ];
        let keys = CubertConfig::keys();
        assert_eq!(keys.len(), values.len(), "{keys:?}");
        let defaults = toml::Table::try_from(CubertConfig::default()).unwrap();
        for (section, key) in keys {
            let (_, _, value) = values
                .iter()
                .find(|(s, k, _)| (*s, *k) == (section, key))
                .unwrap_or_else(|| panic!("no test value for {section}.{key}"));
            let mut config = CubertConfig::default();
            config.apply(section, key, value).unwrap();
            let applied = toml::Table::try_from(&config).unwrap();
            for (name, table) in &applied {
                let before = defaults[name].as_table().unwrap();
                let table = table.as_table().unwrap();
                for field in before.keys().chain(table.keys()) {
                    let changed = before.get(field) != table.get(field);
                    let expected = (name.as_str(), field.as_str()) == (section, key);
                    assert_eq!(changed, expected, "{section}.{key} changed {name}.{field}");
                }
            }
        }
    }

    /// What a configuration serializes to reads back, key by key or as a whole file.
    #[test]
    fn a_serialized_configuration_reads_back() {
        let mut config = CubertConfig::default();
        config
            .apply("cuda", "memory_limit", &"3 GiB".into())
            .unwrap();
        config
            .apply("logging", "output", &"log.txt".into())
            .unwrap();
        config
            .apply("memory", "idle_release_ms", &0.into())
            .unwrap();
        let text = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<CubertConfig>(&text).unwrap(), config);
        let mut read = CubertConfig::default();
        for (section, keys) in text.parse::<toml::Table>().unwrap() {
            for (key, value) in keys.as_table().unwrap() {
                read.apply(&section, key, value).unwrap();
            }
        }
        assert_eq!(read, config);
    }

    #[test]
    fn enums_take_each_spelling_and_name_the_written_ones() {
        let mut config = CubertConfig::default();
        for (spelling, level) in [
            ("execution-only", ProfileLevel::ExecutionOnly),
            (" execution_only ", ProfileLevel::ExecutionOnly),
            ("basic", ProfileLevel::Basic),
            ("off", ProfileLevel::Disabled),
        ] {
            config
                .apply("profiling", "level", &spelling.into())
                .unwrap();
            assert_eq!(config.profiling.level, level);
        }
        let error = config
            .apply("profiling", "level", &"loud".into())
            .unwrap_err();
        assert_eq!(
            error,
            "expected one of disabled, execution-only, basic, full, found \"loud\""
        );
        let error = config.apply("autotune", "level", &3.into()).unwrap_err();
        assert_eq!(error, "expected a string, found integer 3");
    }

    #[test]
    fn a_datetime_is_not_taken_for_a_string() {
        let mut config = CubertConfig::default();
        let date: toml::Value = "1979-05-27"
            .parse::<toml::value::Datetime>()
            .unwrap()
            .into();
        let error = config.apply("compilation", "cache_dir", &date).unwrap_err();
        assert_eq!(error, "expected a string, found datetime 1979-05-27");
        assert_eq!(config, CubertConfig::default());
    }

    #[test]
    fn memory_section_gives_the_pool_options() {
        let mut config = CubertConfig::default();
        assert_eq!(config.memory.options(), MemoryOptions::default());
        config
            .apply("memory", "idle_release_ms", &0.into())
            .unwrap();
        config
            .apply("memory", "small_segment", &"4 KiB".into())
            .unwrap();
        let options = config.memory.options();
        assert_eq!(options.idle_release, None);
        // A segment smaller than the largest request it serves is raised to it.
        assert_eq!(options.small_segment, options.small_max_request);
        let error = config
            .apply("memory", "idle_release", &0.into())
            .unwrap_err();
        assert_eq!(error, "unknown key `idle_release`");
    }
}
