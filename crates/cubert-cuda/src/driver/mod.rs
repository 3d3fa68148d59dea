//! The CUDA driver, loaded at run time: is it there, what its errors mean, and the only
//! place of this crate that calls it.
//!
//! cudarc loads `libcuda` lazily on the first call and panics if the library is missing,
//! so every entry point of this crate first asks [`driver_status`], which checks for the
//! library without loading the bindings, initializes the driver once, and counts devices.
//! The answer says why CUDA can't be used when it can't (no library, no driver, no device).
//!
//! [`DriverFailure`] classifies driver errors: out of memory is a normal `IoError`; a
//! fault of a kernel (illegal address, trap, ...) makes the context unusable ("sticky"), so
//! the server becomes unhealthy and the client must be recreated.
//!
//! **The raw layer.** Like cudarc's own `result` layer, the submodules hold thin, checked
//! wrappers over the raw `sys` calls, one file per CUDA concept ([`memory`], [`copy`],
//! [`stream`], [`event`], [`graph`], [`module`], [`context`], [`device`], [`tensor_map`],
//! [`nvrtc`], [`nccl`]). Each wrapper makes one call (or the pair that sizes and fills a
//! buffer) and returns its result with the operation's name: a [`DriverFailure`] for the
//! driver (`cuMemcpyDtoHAsync failed: ...`), an `NvrtcFailure` or an `NcclFailure` for the
//! libraries. The rest of the crate calls these wrappers and never `sys` directly. A wrapper is `unsafe` only where the caller must
//! uphold something the wrapper can't check (a live handle, memory that outlives an
//! asynchronous copy), as its `# Safety` section says.

use cubert_runtime::backtrace::BackTrace;
use cubert_runtime::{IoError, ServerError};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUresult};
use std::sync::OnceLock;

pub mod context;
pub mod copy;
pub mod device;
pub mod event;
pub mod graph;
pub mod memory;
pub mod module;
pub mod nccl;
pub mod nvrtc;
pub mod stream;
pub mod tensor_map;

/// Whether CUDA can be used, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverStatus {
    /// The driver is loaded and initialized.
    Available {
        /// Number of CUDA devices.
        devices: u32,
        /// Driver version as `major * 1000 + minor * 10`.
        version: i32,
    },
    /// The driver library (`libcuda.so`) was not found.
    LibraryNotFound,
    /// The library loaded but the driver failed to initialize.
    InitFailed(String),
    /// The driver works but there is no CUDA device.
    NoDevice,
}

impl DriverStatus {
    /// Whether at least one device can be used.
    pub fn is_available(&self) -> bool {
        matches!(self, DriverStatus::Available { devices, .. } if *devices > 0)
    }

    /// A sentence saying why CUDA can't be used (or what is there).
    pub fn describe(&self) -> String {
        match self {
            DriverStatus::Available { devices, version } => format!(
                "CUDA driver {}.{} with {devices} device(s)",
                version / 1000,
                (version % 1000) / 10
            ),
            DriverStatus::LibraryNotFound => {
                "no CUDA driver: libcuda.so was not found (install the NVIDIA driver)".into()
            }
            DriverStatus::InitFailed(reason) => {
                format!("the CUDA driver is installed but failed to initialize: {reason}")
            }
            DriverStatus::NoDevice => "the CUDA driver found no CUDA device".into(),
        }
    }
}

/// Loads and initializes the driver once; later calls return the same answer.
pub fn driver_status() -> &'static DriverStatus {
    static STATUS: OnceLock<DriverStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        // SAFETY: only probes whether the shared library can be opened.
        if !unsafe { sys::is_culib_present() } {
            return DriverStatus::LibraryNotFound;
        }
        let probe = std::panic::catch_unwind(|| {
            if let Err(error) = cudarc::driver::result::init() {
                if error.0 == CUresult::CUDA_ERROR_NO_DEVICE {
                    return DriverStatus::NoDevice;
                }
                return DriverStatus::InitFailed(describe(error));
            }
            let version = device::driver_version().unwrap_or(0);
            match cudarc::driver::result::device::get_count() {
                Ok(0) => DriverStatus::NoDevice,
                Ok(count) => DriverStatus::Available {
                    devices: count.max(0) as u32,
                    version,
                },
                Err(error) if error.0 == CUresult::CUDA_ERROR_NO_DEVICE => DriverStatus::NoDevice,
                Err(error) => DriverStatus::InitFailed(describe(error)),
            }
        });
        probe.unwrap_or_else(|_| {
            DriverStatus::InitFailed("a required driver symbol is missing (driver too old?)".into())
        })
    })
}

/// The driver's name and description of an error.
pub fn describe(error: DriverError) -> String {
    let name = error
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    let text = error
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name} ({text})")
}

/// Whether a driver error means the context is corrupted (sticky) and must be recreated.
pub fn is_sticky(error: DriverError) -> bool {
    matches!(
        error.0,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
    )
}

/// A driver error with what was being done when it happened.
#[derive(Clone, Copy, Debug)]
pub struct DriverFailure {
    /// The operation.
    pub operation: &'static str,
    /// The driver's error.
    pub error: DriverError,
}

impl DriverFailure {
    /// A failure of `operation` with the driver's `CUDA_ERROR_INVALID_VALUE`, for arguments
    /// a wrapper refuses before calling the driver.
    pub fn invalid_value(operation: &'static str) -> Self {
        Self {
            operation,
            error: DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
        }
    }

    /// Whether the context is unusable after this error.
    pub fn is_sticky(&self) -> bool {
        is_sticky(self.error)
    }

    /// The error as a runtime error.
    pub fn into_server_error(self) -> ServerError {
        let message = format!("{} failed: {}", self.operation, describe(self.error));
        if self.is_sticky() {
            ServerError::ServerUnhealthy {
                errors: vec![ServerError::generic(format!(
                    "{message}. A device fault is sticky: this client's CUDA context can't be \
                     used any more; drop the client and create a new one"
                ))],
                backtrace: BackTrace::capture(),
            }
        } else {
            ServerError::generic(message)
        }
    }

    /// The error as an I/O error (out of memory keeps its own variant).
    pub fn into_io_error(self, requested: u64) -> IoError {
        if self.error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, _) = memory::info().unwrap_or((0, 0));
            IoError::OutOfMemory {
                requested,
                reserved: 0,
                free: free as u64,
                reason: describe(self.error),
                backtrace: BackTrace::capture(),
            }
        } else {
            IoError::Execution(Box::new(self.into_server_error()))
        }
    }
}

/// Adds the operation's name to a driver result.
pub trait Context<T> {
    /// Names the operation that failed.
    fn during(self, operation: &'static str) -> Result<T, DriverFailure>;
}

impl<T> Context<T> for Result<T, DriverError> {
    fn during(self, operation: &'static str) -> Result<T, DriverFailure> {
        self.map_err(|error| DriverFailure { operation, error })
    }
}

impl Context<()> for CUresult {
    fn during(self, operation: &'static str) -> Result<(), DriverFailure> {
        self.result().during(operation)
    }
}

impl From<DriverFailure> for ServerError {
    fn from(value: DriverFailure) -> Self {
        value.into_server_error()
    }
}
