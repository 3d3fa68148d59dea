//! Configuration: `cubert.toml` and `CUBERT_*` environment variables.
//!
//! The file is found by walking up from the working directory (or named by `CUBERT_CONFIG`).
//! Environment variables override it: `CUBERT_<SECTION>_<KEY>`, for example
//! `CUBERT_CPU_DEVICES=4` or `CUBERT_PROFILING_LEVEL=basic`.
//!
//! Each `[section]` is a struct that serde reads (`schema`), each value goes through the
//! helper its field names (`values`: sizes with units, ranges, spellings, paths), and one
//! key is applied at a time (`section`); the environment variable of a key is derived from
//! the same schema, so the file and the environment accept the same keys and values.
//!
//! Configuration never aborts the program. A file that isn't valid TOML, an unknown key or
//! a value of the wrong kind gives a warning naming the file (or variable) and the key, and
//! that setting keeps its default; every other setting still applies.
//!
//! ```toml
//! [runtime]
//! device_handle = "threaded"   # or "inline"
//! backend = "cpu"              # default backend of the CLI and `cubert::default_client`
//! stream_policy = "per_thread" # per_thread | per_task (one per client clone) | single
//! max_streams = 16             # device queues per server (CUDA streams), 1 to 64
//! stream_priority = "normal"   # normal | high (CUDA's greatest stream priority)
//!
//! [memory]
//! rounding = 512
//! small_segment = "2 MiB"
//! idle_release_ms = 10000      # 0 keeps free segments forever
//! compact_before_growth = true # give free segments back before allocating new ones
//! paged = false                # large blocks from mapped pages (CUDA virtual memory)
//! growable = true              # large blocks from one growable mapped range per stream
//! growable_max_chunk = 0       # largest physical chunk of it; 0 = no limit
//! persistent = "size_match"    # size_match | enabled | disabled | enforced
//!
//! [cpu]
//! devices = 1                  # virtual CPU devices
//! threads = 0                  # worker threads, 0 = one per core
//! memory_limit = "auto"        # per device; "auto" = physical memory
//! pitch_alignment = 1          # row alignment of optimized tensors; 1 = dense
//!
//! [cuda]
//! memory_limit = "auto"        # device memory a client may hold; "auto" = all of it
//! pinned_cache = "4 GiB"       # freed pinned host memory kept for reuse
//! peer_copy = true             # to_client GPU to GPU directly (false: through the host)
//! copy_threads = 0             # threads staging pageable uploads; 0 = one per core, <= 8
//!
//! [wgpu]
//! kernels = "strict_spirv"     # strict_spirv (Vulkan; WGSL elsewhere) | spirv | wgsl
//!
//! [profiling]
//! level = "disabled"           # disabled | execution-only | basic | full
//! output = "stdout"            # stdout | stderr | a file path
//!
//! [logging]                    # the CLI's log output (a program installs its own subscriber)
//! level = "warn"               # RUST_LOG, when set, takes precedence
//! output = "stderr"            # stdout | stderr | a file path
//!
//! [compilation]
//! bounds_check = "auto"        # enforce | validate | auto (for launch_unchecked)
//!
//! [autotune]
//! level = "balanced"           # off | minimal | balanced | full (CUBERT_AUTOTUNE_LEVEL)
//! disk_cache = true            # results shared by processes (CUBERT_AUTOTUNE_DISK_CACHE)
//! cache_dir = "/path"          # default: $XDG_CACHE_HOME or ~/.cache, /cubert/autotune
//! budget_ms = 2000             # tuning time per key
//! check = false                # compare every candidate's output with the first one's
//! ```

mod load;
mod schema;
mod section;
pub(crate) mod values;

pub use load::{
    CONFIG_FILE_NAME, DIAGNOSTIC_VARIABLES, LoadedConfig, find_config_file, global_config,
    load_config, load_config_from, report_warnings, set_global_config,
};
pub use schema::{
    AutotuneConfig, AutotuneLevel, BoundsCheckMode, CompilationConfig, CpuConfig, CubertConfig,
    CudaConfig, DeviceHandleMode, LogOutput, LoggingConfig, MAX_STREAMS, MemoryConfig,
    ProfileLevel, ProfilingConfig, RuntimeConfig, WgpuConfig, WgpuKernels,
};
pub(crate) use section::{ApplyKey, Section, settings};
pub use values::parse_bytes;
