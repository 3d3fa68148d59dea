//! Compiling kernels with NVRTC, and caching what was compiled.
//!
//! CUDA C++ is compiled to a cubin for the device's architecture (`sm_90` on Hopper) with
//! the prelude prepended and `CUBERT_CHECKED`/`CUBERT_VALIDATE` set for the launch's
//! execution mode. PTX is handed to the driver's JIT; cubins are loaded as they are.
//!
//! Two caches: loaded modules in memory (key: kernel id and mode), and cubins on disk (key:
//! a hash of the prelude version, source, entry, options, mode, architecture, NVRTC version
//! and driver version), so a second process skips NVRTC. Disk entries are written to a
//! temporary file and renamed, so concurrent processes never read a partial file.

use crate::context::CudaContext;
use crate::driver::{self, DriverFailure, nvrtc};
use crate::kernel::{CudaKernel, KernelSource};
use crate::prelude::{PRELUDE, PRELUDE_VERSION};
use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::memory::FastMap;
use cubert_runtime::properties::fnv1a;
use cubert_runtime::{CompilationError, ExecutionMode, KernelMetadata, LaunchError};
use cudarc::driver::sys::{CUfunction, CUmodule};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Counters of the compile caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Kernels compiled by NVRTC.
    pub nvrtc_compiles: u64,
    /// Cubins read from the disk cache.
    pub disk_hits: u64,
    /// Launches that found their module in memory.
    pub memory_hits: u64,
}

struct Loaded {
    module: CUmodule,
    function: CUfunction,
    max_dynamic_shared: usize,
}

/// The NVRTC version as (major, minor), or why NVRTC can't be used.
///
/// # Errors
/// A message when the NVRTC library isn't found.
pub fn nvrtc_version() -> Result<(i32, i32), String> {
    if !nvrtc::is_present() {
        return Err("NVRTC (libnvrtc.so) was not found; install the CUDA toolkit's NVRTC".into());
    }
    nvrtc::version().map_err(|failure| failure.to_string())
}

/// The NVRTC options for a mode, an architecture and extra options.
pub fn nvrtc_options(arch: (u32, u32), mode: ExecutionMode, extra: &[String]) -> Vec<String> {
    let (checked, validate) = match mode {
        ExecutionMode::Checked => (1, 0),
        ExecutionMode::Validate => (1, 1),
        ExecutionMode::Unchecked => (0, 0),
    };
    let mut options = vec![
        // Compute capability 9.0 gets sm_90a, whose `wgmma` `plane_group_mma` prints; the
        // cubin is built for the device it runs on, so the arch-specific target costs
        // nothing.
        if arch == (9, 0) {
            "--gpu-architecture=sm_90a".to_string()
        } else {
            format!("--gpu-architecture=sm_{}{}", arch.0, arch.1)
        },
        "--std=c++17".to_string(),
        format!("-DCUBERT_CHECKED={checked}"),
        format!("-DCUBERT_VALIDATE={validate}"),
    ];
    options.extend(extra.iter().cloned());
    options
}

/// Compiles CUDA C++ `source` (the prelude is prepended) to a cubin.
///
/// # Errors
/// The compiler's log when compilation fails, or a message when NVRTC is missing.
pub fn compile_cuda(name: &str, source: &str, options: &[String]) -> Result<Vec<u8>, String> {
    nvrtc_version()?;
    let full = format!("{PRELUDE}\n#line 1 \"{name}.cu\"\n{source}");
    let full =
        CString::new(full).map_err(|_| "the kernel source contains a NUL byte".to_string())?;
    let file = CString::new(format!("{name}.cu"))
        .map_err(|_| "the kernel name contains a NUL byte".to_string())?;
    let options: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| "a compile option contains a NUL byte".to_string())?;
    let mut program = nvrtc::Program::new(&full, &file).map_err(|failure| failure.to_string())?;
    if program.compile(&options).is_err() {
        return Err(crate::source_map::annotate(name, source, &program.log()));
    }
    match program.cubin() {
        Ok(cubin) if !cubin.is_empty() => Ok(cubin),
        _ => Err(format!(
            "NVRTC produced no cubin (is --gpu-architecture a real sm_XX?): {}",
            program.log()
        )),
    }
}

/// Compiles and loads kernels for one context. See the module docs.
pub struct Compiler {
    context: Arc<CudaContext>,
    arch: (u32, u32),
    driver_version: i32,
    disk: Option<PathBuf>,
    loaded: FastMap<String, [Option<Loaded>; 3]>,
    stats: CompileStats,
}

impl Compiler {
    /// A compiler for `context`'s device of architecture `arch`, caching cubins in `disk`.
    pub fn new(context: Arc<CudaContext>, arch: (u32, u32), disk: Option<PathBuf>) -> Self {
        let driver_version = driver::device::driver_version().unwrap_or(0);
        Self {
            context,
            arch,
            driver_version,
            disk,
            loaded: FastMap::default(),
            stats: CompileStats::default(),
        }
    }

    /// Cache counters.
    pub fn stats(&self) -> CompileStats {
        self.stats
    }

    fn disk_key(&self, kernel: &CudaKernel, source: &str, mode: ExecutionMode) -> String {
        let nvrtc = nvrtc_version().unwrap_or((0, 0));
        let text = format!(
            "prelude{PRELUDE_VERSION}\u{1f}{source}\u{1f}{}\u{1f}{:?}\u{1f}{mode:?}\u{1f}sm_{}{}\u{1f}nvrtc{}.{}\u{1f}driver{}",
            kernel.entry(),
            kernel.compile_options(),
            self.arch.0,
            self.arch.1,
            nvrtc.0,
            nvrtc.1,
            self.driver_version
        );
        format!(
            "{:016x}-{:016x}",
            fnv1a(text.as_bytes()),
            fnv1a(source.as_bytes())
        )
    }

    fn read_disk(&mut self, key: &str) -> Option<Vec<u8>> {
        let path = self.disk.as_ref()?.join(format!("{key}.cubin"));
        let bytes = std::fs::read(path).ok()?;
        self.stats.disk_hits += 1;
        Some(bytes)
    }

    fn write_disk(&self, key: &str, cubin: &[u8]) {
        let Some(dir) = &self.disk else {
            return;
        };
        let write = |dir: &Path| -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let temporary = dir.join(format!("{key}.{}.tmp", std::process::id()));
            std::fs::write(&temporary, cubin)?;
            std::fs::rename(&temporary, dir.join(format!("{key}.cubin")))
        };
        if let Err(error) = write(dir) {
            tracing::warn!("can't write the kernel cache in {}: {error}", dir.display());
        }
    }

    fn compile(
        &mut self,
        kernel: &CudaKernel,
        mode: ExecutionMode,
    ) -> Result<Vec<u8>, LaunchError> {
        let compilation_error = |log: String| {
            LaunchError::CompilationError(CompilationError {
                kernel: kernel.name().to_string(),
                log,
                backtrace: BackTrace::capture(),
            })
        };
        match kernel.source() {
            KernelSource::Cubin(bytes) => Ok(bytes.to_vec()),
            KernelSource::Ptx(text) => {
                let mut bytes = text.as_bytes().to_vec();
                bytes.push(0);
                Ok(bytes)
            }
            KernelSource::Cuda(source) => {
                let _span = tracing::debug_span!(
                    target: "cubert::compile",
                    "nvrtc",
                    kernel = kernel.name(),
                    ?mode
                )
                .entered();
                let key = self.disk_key(kernel, source, mode);
                if let Some(cubin) = self.read_disk(&key) {
                    tracing::debug!(target: "cubert::compile", "found in the disk cache");
                    return Ok(cubin);
                }
                let options = nvrtc_options(self.arch, mode, &kernel.compile_options());
                let cubin =
                    compile_cuda(kernel.name(), source, &options).map_err(compilation_error)?;
                self.stats.nvrtc_compiles += 1;
                self.write_disk(&key, &cubin);
                Ok(cubin)
            }
        }
    }

    /// The loaded function of `kernel` for `mode`, compiling and loading it on first use,
    /// with its dynamic shared memory limit raised to what the kernel asks.
    ///
    /// # Errors
    /// [`LaunchError::CompilationError`] with the compiler's log, or the driver's error when
    /// the module can't be loaded.
    pub fn function(
        &mut self,
        kernel: &CudaKernel,
        mode: ExecutionMode,
    ) -> Result<CUfunction, LaunchError> {
        // Precompiled code has no mode variants.
        let mode = match kernel.source() {
            KernelSource::Cuda(_) => mode,
            _ => ExecutionMode::Checked,
        };
        let slot = match mode {
            ExecutionMode::Checked => 0,
            ExecutionMode::Validate => 1,
            ExecutionMode::Unchecked => 2,
        };
        if let Some(loaded) = self
            .loaded
            .get_mut(kernel.id_str())
            .and_then(|modes| modes[slot].as_mut())
        {
            self.stats.memory_hits += 1;
            let function = loaded.function;
            let shared = kernel.shared_memory_bytes();
            if shared > loaded.max_dynamic_shared {
                set_dynamic_shared(function, shared)?;
                loaded.max_dynamic_shared = shared;
            }
            return Ok(function);
        }
        let image = self.compile(kernel, mode)?;
        self.context.bind().map_err(driver_launch_error)?;
        // SAFETY: `image` is a cubin or a NUL-terminated PTX string (see `compile`).
        let module = unsafe { driver::module::load_data(&image) }.map_err(|failure| {
            LaunchError::CompilationError(CompilationError {
                kernel: kernel.name().to_string(),
                log: format!(
                    "the driver can't load the compiled module: {}",
                    driver::describe(failure.error)
                ),
                backtrace: BackTrace::capture(),
            })
        })?;
        let entry = CString::new(kernel.entry())
            .map_err(|_| LaunchError::unknown("the entry point contains a NUL byte"))?;
        // SAFETY: `module` was just loaded.
        let Ok(function) = (unsafe { driver::module::function(module, &entry) }) else {
            // SAFETY: unloads the module loaded above, which nothing uses.
            let _ = unsafe { driver::module::unload(module) };
            return Err(LaunchError::CompilationError(CompilationError {
                kernel: kernel.name().to_string(),
                log: format!(
                    "the module has no entry point `{}` (declare it `extern \"C\" __global__`)",
                    kernel.entry()
                ),
                backtrace: BackTrace::capture(),
            }));
        };
        let shared = kernel.shared_memory_bytes();
        if shared > 0 {
            set_dynamic_shared(function, shared)?;
        }
        self.loaded.entry(kernel.id_str().to_string()).or_default()[slot] = Some(Loaded {
            module,
            function,
            max_dynamic_shared: shared,
        });
        Ok(function)
    }
}

fn set_dynamic_shared(function: CUfunction, bytes: usize) -> Result<(), LaunchError> {
    // SAFETY: `function` is a loaded function.
    unsafe { driver::module::set_max_dynamic_shared(function, bytes as i32) }
        .map_err(driver_launch_error)
}

fn driver_launch_error(failure: DriverFailure) -> LaunchError {
    LaunchError::unknown(format!(
        "{} failed: {}",
        failure.operation,
        driver::describe(failure.error)
    ))
}

impl Drop for Compiler {
    fn drop(&mut self) {
        if self.context.bind().is_err() {
            return;
        }
        for loaded in self.loaded.values().flatten().flatten() {
            // SAFETY: each module was loaded once by this compiler and is unloaded once.
            let _ = unsafe { driver::module::unload(loaded.module) };
        }
    }
}
