//! The error types of the runtime.
//!
//! Every fallible call of the client returns one of these:
//! - [`IoError`] for memory and transfers (`create`, `empty`, `write`, `copy`, views). A
//!   request that can never succeed ([`IoError::BufferTooBig`], [`IoError::InvalidArgument`])
//!   is told apart from one the device can't serve now ([`IoError::OutOfMemory`]);
//! - [`LaunchError`] for a launch refused on the caller's thread (a device limit, a buffer
//!   too small for the call, a kernel that doesn't build);
//! - [`ServerError`] for what queued work found on the device, returned by the next
//!   `flush`, `sync` or read of the stream (an out-of-bounds access, a failed kernel, memory
//!   that ran out), and for the errors of reads;
//! - [`ProfileError`] for profiling.
//!
//! Match on the variant to react to one kind of failure; `Display` gives a message that says
//! what went wrong and what to do.
//!
//! ```
//! use cubert_runtime::{IoError, LaunchError, ops};
//! # let client = cubert_cpu::default_client()?;
//!
//! let small = client.empty(16)?;
//! match ops::fill(&client, &small, 1000, 0.0f32) {
//!     Err(LaunchError::IoError(IoError::InvalidArgument { reason, .. })) => {
//!         assert!(reason.contains("`out` holds 16 bytes"), "{reason}");
//!     }
//!     other => panic!("expected the fill to be refused, got {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! All errors are `Clone` and serializable with serde; the captured backtrace is skipped when
//! serializing.

use crate::backtrace::BackTrace;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// A human-readable reason attached to an error, cheap to clone.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Reason {
    text: Option<Arc<str>>,
}

impl Reason {
    /// The reason as text.
    pub fn as_str(&self) -> &str {
        self.text.as_deref().unwrap_or("no reason provided")
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl From<&str> for Reason {
    fn from(value: &str) -> Self {
        Self {
            text: Some(Arc::from(value)),
        }
    }
}

impl From<String> for Reason {
    fn from(value: String) -> Self {
        Self {
            text: Some(Arc::from(value)),
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Reason::from(String::deserialize(deserializer)?))
    }
}

/// A kernel that could not be compiled.
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
#[error("kernel `{kernel}` failed to compile:\n{log}")]
pub struct CompilationError {
    /// Name of the kernel.
    pub kernel: String,
    /// The compiler's log.
    pub log: String,
    /// Where the error was created.
    #[serde(skip)]
    pub backtrace: BackTrace,
}

/// An error during profiling.
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum ProfileError {
    /// An unknown error happened during profiling.
    #[error("profiling failed: {reason}")]
    Unknown {
        /// What went wrong.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The profiling token was never started on this server, or was already ended.
    #[error("no profile is registered for this token (it was never started or already ended)")]
    NotRegistered {
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A launch error happened while profiling.
    #[error("a launch failed while profiling: {0}")]
    Launch(#[from] LaunchError),
    /// An execution error happened while profiling.
    #[error("execution failed while profiling: {0}")]
    Server(#[from] Box<ServerError>),
}

/// Kernel launch errors, returned by the launch itself (before anything is queued).
///
/// ```
/// use cubert_runtime::{IoError, LaunchError, ops};
/// # let client = cubert_cpu::default_client()?;
///
/// let four = client.empty(4 * 4)?;
/// let error = ops::fill(&client, &four, 5, 1.0f32).unwrap_err(); // 5 f32 in 16 bytes
/// assert!(matches!(error, LaunchError::IoError(IoError::InvalidArgument { .. })));
/// assert!(error.to_string().contains("ops::fill"), "{error}");
/// ops::fill(&client, &four, 4, 1.0f32)?; // the client keeps working
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum LaunchError {
    /// The kernel can't be compiled.
    #[error("{0}")]
    CompilationError(#[from] CompilationError),
    /// The device ran out of memory while launching.
    #[error("out of memory during launch: {reason}")]
    OutOfMemory {
        /// What could not be allocated.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The launch asks for more than the device offers.
    #[error("{0}")]
    TooManyResources(#[from] ResourceLimitError),
    /// The kernel uses something this device can't run (`f64` on a wgpu adapter without
    /// 64-bit floats, a plane operation without planes); the device's [`Features`] say so
    /// beforehand.
    ///
    /// [`Features`]: crate::properties::Features
    #[error("unsupported on this device: {reason}")]
    Unsupported {
        /// What the kernel uses and why the device can't run it.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// Any other launch failure.
    #[error("launch failed: {reason}")]
    Unknown {
        /// What went wrong.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A binding of the launch could not be resolved.
    #[error("launch failed on a buffer: {0}")]
    IoError(#[from] IoError),
}

/// A launch exceeds one of the device's limits.
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum ResourceLimitError {
    /// Shared memory exceeds the maximum.
    #[error(
        "too much shared memory: {requested} bytes requested, the device allows {max} bytes per cube"
    )]
    SharedMemory {
        /// Bytes requested.
        requested: usize,
        /// Bytes allowed.
        max: usize,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// Units per cube exceed the maximum.
    #[error("too many units per cube: {requested} requested, the device allows {max}")]
    Units {
        /// Units requested.
        requested: u32,
        /// Units allowed.
        max: u32,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A cube dimension exceeds the maximum.
    #[error("cube dim {requested:?} exceeds the device's maximum {max:?}")]
    CubeDim {
        /// Cube dim requested.
        requested: (u32, u32, u32),
        /// Maximum per axis.
        max: (u32, u32, u32),
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The cube count exceeds the maximum.
    #[error("cube count {requested:?} exceeds the device's maximum {max:?}")]
    CubeCount {
        /// Cube count requested.
        requested: (u32, u32, u32),
        /// Maximum per axis.
        max: (u32, u32, u32),
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
}

/// An error that happened while executing queued work, returned by the next
/// `flush`/`sync`/`read` on the stream.
///
/// ```
/// use cubert_runtime::lang::prelude::*;
/// use cubert_runtime::{CubeCount, CubeDim, ServerError};
///
/// #[cubert_macros::kernel(crate = cubert_runtime)]
/// fn off_by_one(out: &mut Array<u32>) {
///     out[ABSOLUTE_POS + 1] = 1; // the last unit writes past the end
/// }
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let client = cubert_cpu::default_client()?;
///     let out = client.empty(4 * 4)?;
///     // The launch is queued: nothing is known yet.
///     off_by_one::launch::<cubert_cpu::CpuRuntime>(
///         &client, CubeCount::new_1d(1), CubeDim::new_1d(4), &out,
///     )?;
///     match client.sync() {
///         Err(ServerError::OutOfBounds { kernel, accesses, .. }) => {
///             assert!(kernel.contains("off_by_one"), "{kernel}");
///             assert_eq!(accesses, 1);
///         }
///         other => panic!("expected an out-of-bounds error, got {other:?}"),
///     }
///     client.sync()?; // reported once; the client keeps working
///     Ok(())
/// }
/// ```
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum ServerError {
    /// A generic runtime error.
    #[error("{reason}")]
    Generic {
        /// What went wrong.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A launch failed.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// Profiling failed.
    #[error("{0}")]
    Profile(#[from] ProfileError),
    /// A memory or transfer operation failed.
    #[error("{0}")]
    Io(#[from] IoError),
    /// The device is in a state it cannot recover from (a sticky device fault, such as a
    /// kernel's illegal memory access). Every later call of the client returns it. On CUDA the
    /// fault poisons the process's GPU state: restart the process to use the GPU again.
    #[error("the device is unhealthy and must be recreated: {errors:?}")]
    ServerUnhealthy {
        /// The errors that made it unhealthy.
        errors: Vec<Self>,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A checked kernel accessed memory out of bounds; the accesses wrote nothing.
    #[error("kernel `{kernel}` made {accesses} out-of-bounds access(es); first: {first}")]
    OutOfBounds {
        /// Name of the kernel.
        kernel: String,
        /// Number of out-of-bounds accesses.
        accesses: u64,
        /// Description of the first one.
        first: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A kernel's units raced on shared memory: two units touched one element between
    /// barriers, at least one of them writing (found by the CPU's validate mode).
    #[error("kernel `{kernel}`: {races} data race(s) on shared memory; first: {first}")]
    DataRace {
        /// Name of the kernel.
        kernel: String,
        /// Number of racing accesses.
        races: u64,
        /// Description of the first one: the units, the element, the source line.
        first: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// A kernel reported failure or panicked while running.
    #[error("kernel `{kernel}` failed: {reason}")]
    KernelFailed {
        /// Name of the kernel.
        kernel: String,
        /// What went wrong.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The operation is not supported by this backend.
    #[error("`{operation}` is not supported by the {backend} backend")]
    Unsupported {
        /// The operation.
        operation: String,
        /// The backend's name.
        backend: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
}

/// Error of a memory or transfer operation (`create`, `read`, `write`, `empty`).
#[derive(Clone, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum IoError {
    /// The buffer can never fit on this device, whatever is freed.
    #[error(
        "can't allocate a buffer of {size} bytes: the largest possible allocation on this device is {max} bytes"
    )]
    BufferTooBig {
        /// Bytes requested.
        size: u64,
        /// Largest allocation the device allows.
        max: u64,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The device has no room now (after releasing cached memory and retrying once); freeing
    /// handles may make the request succeed later.
    #[error(
        "out of memory: {requested} bytes requested, {reserved} bytes reserved, {free} bytes free on the device ({reason})"
    )]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Bytes the runtime holds from the device.
        reserved: u64,
        /// Bytes the device reports free (or the limit minus what is reserved).
        free: u64,
        /// What the allocator said.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The strides are not supported for this copy on this backend.
    #[error("the provided strides are not supported for this operation")]
    UnsupportedStrides {
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The memory of a handle was not found.
    #[error("couldn't find the memory of that handle: {reason}")]
    NotFound {
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
        /// Why the handle is invalid.
        reason: Reason,
    },
    /// The handle could not be freed because it is in use.
    #[error("couldn't free the handle, since it is currently in use")]
    FreeError {
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// An argument is invalid (zero size, shape and data length disagree, strides that do
    /// not fit the buffer...).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong and what to do.
        reason: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// Any other failure.
    #[error("io operation failed: {description}")]
    Unknown {
        /// Details of the error.
        description: String,
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The operation is not supported on this backend.
    #[error("the io operation is not supported on this backend")]
    UnsupportedIoOperation {
        /// Where the error was created.
        #[serde(skip)]
        backtrace: BackTrace,
    },
    /// The operation failed because of an execution error.
    #[error("{0}")]
    Execution(#[from] Box<ServerError>),
}

impl IoError {
    /// An [`IoError::InvalidArgument`] with the given reason.
    pub fn invalid(reason: impl Into<String>) -> Self {
        IoError::InvalidArgument {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        }
    }

    /// An [`IoError::NotFound`] with the given reason.
    pub fn not_found(reason: impl Into<Reason>) -> Self {
        IoError::NotFound {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        }
    }
}

impl ServerError {
    /// A [`ServerError::Generic`] with the given reason.
    pub fn generic(reason: impl Into<String>) -> Self {
        ServerError::Generic {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        }
    }

    /// A [`ServerError::Unsupported`] for `operation` on `backend`.
    pub fn unsupported(operation: impl Into<String>, backend: impl Into<String>) -> Self {
        ServerError::Unsupported {
            operation: operation.into(),
            backend: backend.into(),
            backtrace: BackTrace::capture(),
        }
    }

    /// A [`ServerError::Unsupported`] for `operation` on the server type `S`, named by its
    /// type name without the module path (`CpuServer`).
    pub fn unsupported_by<S: ?Sized>(operation: impl Into<String>) -> Self {
        let full = std::any::type_name::<S>();
        // The name without its path; a generic type keeps its parameters.
        let base = full.split('<').next().unwrap_or(full);
        let start = base.rfind("::").map_or(0, |index| index + 2);
        Self::unsupported(operation, full.get(start..).unwrap_or(full))
    }
}

impl LaunchError {
    /// A [`LaunchError::Unknown`] with the given reason.
    pub fn unknown(reason: impl Into<String>) -> Self {
        LaunchError::Unknown {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        }
    }

    /// A [`LaunchError::Unsupported`] with the given reason.
    pub fn unsupported(reason: impl Into<String>) -> Self {
        LaunchError::Unsupported {
            reason: reason.into(),
            backtrace: BackTrace::capture(),
        }
    }
}

impl From<ServerError> for IoError {
    fn from(value: ServerError) -> Self {
        match value {
            ServerError::Io(io) => io,
            other => IoError::Execution(Box::new(other)),
        }
    }
}

impl From<ServerError> for ProfileError {
    fn from(value: ServerError) -> Self {
        ProfileError::Server(Box::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_by_names_the_server_type_without_its_path() {
        struct ExampleServer;
        let error = ServerError::unsupported_by::<ExampleServer>("graph capture");
        assert_eq!(
            error.to_string(),
            "`graph capture` is not supported by the ExampleServer backend"
        );
    }

    #[test]
    fn errors_round_trip_through_json_without_backtrace() {
        let error = ServerError::Io(IoError::BufferTooBig {
            size: 10,
            max: 5,
            backtrace: BackTrace::capture(),
        });
        let text = serde_json::to_string(&error).unwrap();
        let back: ServerError = serde_json::from_str(&text).unwrap();
        assert!(matches!(
            back,
            ServerError::Io(IoError::BufferTooBig {
                size: 10,
                max: 5,
                ..
            })
        ));
        assert!(!text.contains("backtrace"));
    }

    #[test]
    fn out_of_memory_message_names_sizes() {
        let error = IoError::OutOfMemory {
            requested: 4096,
            reserved: 1024,
            free: 0,
            reason: "limit reached".into(),
            backtrace: BackTrace::none(),
        };
        let text = error.to_string();
        assert!(
            text.contains("4096") && text.contains("limit reached"),
            "{text}"
        );
    }
}
