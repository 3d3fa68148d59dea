//! Launching kernels and measuring them.
//!
//! A launch is checked on the caller's thread against the device's limits (cube dim, units
//! per cube, shared memory, cube count, bindings) and the bindings' device, then queued;
//! errors found while running it come back from the next `flush`/`sync`/`read`. With
//! profiling enabled every launch is timed and recorded in the device's logger.

use super::ComputeClient;
use crate::backtrace::BackTrace;
use crate::config::{BoundsCheckMode, ProfileLevel};
use crate::elem::ElemType;
use crate::error::{IoError, LaunchError, ProfileError, ResourceLimitError, ServerError};
use crate::kernel::{CubeCount, ExecutionMode, KernelArguments, KernelMetadata};
use crate::profile::ProfileDuration;
use crate::runtime::Runtime;
use crate::server::{CallerWork, ComputeServer};

impl<R: Runtime> ComputeClient<R> {
    fn validate_launch(
        &self,
        kernel: &<R::Server as ComputeServer>::Kernel,
        count: &CubeCount,
        arguments: &KernelArguments,
    ) -> Result<(), LaunchError> {
        let hardware = &self.properties().hardware;
        let dim = kernel.cube_dim();
        let requested = (dim.x, dim.y, dim.z);
        if dim.x == 0 || dim.y == 0 || dim.z == 0 {
            return Err(LaunchError::unknown(format!(
                "kernel `{}` has an empty cube dim {requested:?}",
                kernel.name()
            )));
        }
        let max = hardware.max_cube_dim;
        if dim.x > max.0 || dim.y > max.1 || dim.z > max.2 {
            return Err(ResourceLimitError::CubeDim {
                requested,
                max,
                backtrace: BackTrace::capture(),
            }
            .into());
        }
        match dim.checked_num_elems() {
            Some(units) if units <= hardware.max_units_per_cube => {}
            units => {
                return Err(ResourceLimitError::Units {
                    requested: units.unwrap_or(u32::MAX),
                    max: hardware.max_units_per_cube,
                    backtrace: BackTrace::capture(),
                }
                .into());
            }
        }
        let shared = kernel.shared_memory_bytes();
        if shared > hardware.max_shared_memory_size {
            return Err(ResourceLimitError::SharedMemory {
                requested: shared,
                max: hardware.max_shared_memory_size,
                backtrace: BackTrace::capture(),
            }
            .into());
        }
        if let CubeCount::Static(x, y, z) = *count {
            let max = hardware.max_cube_count;
            if x > max.0 || y > max.1 || z > max.2 {
                return Err(ResourceLimitError::CubeCount {
                    requested: (x, y, z),
                    max,
                    backtrace: BackTrace::capture(),
                }
                .into());
            }
        }
        if arguments.buffers.len() > hardware.max_bindings as usize {
            return Err(LaunchError::unknown(format!(
                "kernel `{}` binds {} buffers; the device allows {}",
                kernel.name(),
                arguments.buffers.len(),
                hardware.max_bindings
            )));
        }
        let foreign = arguments
            .buffers
            .iter()
            .chain(match count {
                CubeCount::Dynamic(binding) => std::slice::from_ref(binding),
                CubeCount::Static(..) => &[],
            })
            .chain(arguments.tensor_maps.iter().map(|map| &map.binding))
            .find(|binding| binding.device() != self.device_id());
        if let Some(binding) = foreign {
            return Err(LaunchError::IoError(IoError::not_found(format!(
                "a binding of {:?} was passed to a launch on {:?}; move it with `to_client` first",
                binding.device(),
                self.device_id()
            ))));
        }
        if !arguments.tensor_maps.is_empty() && !self.features().tma {
            return Err(LaunchError::unknown(format!(
                "kernel `{}` uses tensor maps, which {} doesn't support",
                kernel.name(),
                self.properties().name
            )));
        }
        Ok(())
    }

    fn launch_inner(
        &self,
        kernel: <R::Server as ComputeServer>::Kernel,
        count: CubeCount,
        arguments: KernelArguments,
        mode: ExecutionMode,
    ) -> Result<(), LaunchError> {
        let _span = crate::tracing_gate::listened(log::Level::Debug).then(|| {
            tracing::debug_span!(
                target: "cubert::launch",
                "launch",
                kernel = kernel.name(),
                cubes = ?count
            )
            .entered()
        });
        self.validate_launch(&kernel, &count, &arguments)?;
        if count.is_empty() {
            return Ok(());
        }
        let stream = self.stream_id();
        let logger = self.utilities.logger.clone();
        match logger.profile_level() {
            None => {
                self.device.submit_as(CallerWork::Launch, move |server| {
                    let _span = execute_span(&kernel);
                    // SAFETY: `mode` is `Unchecked` only when the caller of
                    // `launch_unchecked` vouched for the kernel's accesses.
                    unsafe { server.launch(kernel, count, arguments, mode, stream) }
                });
            }
            Some(ProfileLevel::ExecutionOnly) => {
                let name = kernel.name().to_string();
                self.device.submit_as(CallerWork::Launch, move |server| {
                    let _span = execute_span(&kernel);
                    // SAFETY: as above.
                    unsafe { server.launch(kernel, count, arguments, mode, stream) }
                });
                logger.register_execution(&name);
            }
            Some(level) => {
                let name = match level {
                    ProfileLevel::Full => format!("{} [{}] {count:?}", kernel.name(), kernel.id()),
                    _ => kernel.name().to_string(),
                };
                let device = self.device.clone();
                let ((), duration) = self
                    .profile(
                        move || {
                            device.submit(move |server| {
                                let _span = execute_span(&kernel);
                                // SAFETY: as above.
                                unsafe { server.launch(kernel, count, arguments, mode, stream) }
                            })
                        },
                        &name,
                    )
                    .map_err(|error| LaunchError::unknown(format!("profiling failed: {error}")))?;
                logger.register_profiled(name, duration);
            }
        }
        Ok(())
    }

    /// Launches `kernel` over `count` cubes with `arguments`, every buffer access
    /// bounds-checked. Returns once the launch is queued.
    ///
    /// `kernel` is the backend's own kind of kernel; kernels written once in the language
    /// (`#[kernel]`) launch through [`Self::launch_language`]. On the CPU, a kernel is a Rust
    /// function run once per cube:
    ///
    /// ```
    /// use cubert_cpu::{CpuKernel, KernelError};
    /// use cubert_runtime::{Bytes, CubeCount, CubeDim, KernelArguments, MetadataBindingInfo};
    /// # let client = cubert_cpu::default_client()?;
    ///
    /// // out[i] = 2 * input[i], one element per unit.
    /// let double = CpuKernel::new("double", CubeDim::new_1d(64), |ctx| {
    ///     let (input, out) = (ctx.buffer::<f32>(0)?, ctx.buffer::<f32>(1)?);
    ///     let len = ctx.info_usize(0)?;
    ///     for unit in ctx.units() {
    ///         let i = unit.absolute_x as usize;
    ///         if i < len {
    ///             out.store(i, 2.0 * input.load(i));
    ///         }
    ///     }
    ///     Ok::<(), KernelError>(())
    /// });
    /// let input = client.create(Bytes::from_elems(vec![1.5f32; 100]))?;
    /// let out = client.empty(100 * 4)?;
    /// let arguments = KernelArguments::new()
    ///     .with_buffers(vec![input.binding(), out.to_binding()])
    ///     .with_info(MetadataBindingInfo::custom(vec![100]));
    /// client.launch(double, CubeCount::new_1d(2), arguments)?; // 2 cubes of 64 units
    /// assert_eq!(client.read_one(out)?.to_elems::<f32>(), vec![3.0; 100]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LaunchError::TooManyResources`] if the launch exceeds a device limit, or
    /// [`LaunchError::IoError`] for a binding of another device. Errors while running it
    /// (an out-of-bounds access, a kernel failure) come back from the next
    /// `flush`/`sync`/`read` on this stream.
    pub fn launch(
        &self,
        kernel: <R::Server as ComputeServer>::Kernel,
        count: CubeCount,
        arguments: KernelArguments,
    ) -> Result<(), LaunchError> {
        self.launch_inner(kernel, count, arguments, ExecutionMode::Checked)
    }

    /// Launches a kernel of the language: the kernel built for `key` and `cube_dim` on this
    /// device (built from `definition()` by the backend on first use, then cached), over
    /// `count` cubes with `arguments`. This is what a `#[kernel]` function's `launch` calls.
    ///
    /// ```
    /// use cubert_runtime::lang::prelude::*;
    /// use cubert_runtime::{Bytes, CubeCount, CubeDim};
    ///
    /// // `#[cubert::kernel]` with the `cubert` crate.
    /// #[cubert_macros::kernel(crate = cubert_runtime)]
    /// fn scale<F: Float>(factor: F, x: &mut Array<F>) {
    ///     let i = ABSOLUTE_POS;
    ///     if i < x.len() {
    ///         x[i] = factor * x[i];
    ///     }
    /// }
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let client = cubert_cpu::default_client()?;
    ///     let x = client.create(Bytes::from_elems(vec![1.5f32; 100]))?;
    ///     // Built for this device on first use, then cached; launched like any kernel.
    ///     scale::launch::<f32, cubert_cpu::CpuRuntime>(
    ///         &client, CubeCount::new_1d(1), CubeDim::new_1d(128), 2.0, &x,
    ///     )?;
    ///     assert_eq!(client.read_one(x)?.to_elems::<f32>(), vec![3.0; 100]);
    ///     Ok(())
    /// }
    /// ```
    ///
    /// # Errors
    /// The backend's build error (naming the kernel), or the launch's errors as
    /// [`Self::launch`].
    pub fn launch_language(
        &self,
        key: cubert_lang::KernelKey,
        definition: impl FnOnce() -> cubert_lang::KernelDefinition,
        cube_dim: crate::kernel::CubeDim,
        count: CubeCount,
        arguments: KernelArguments,
    ) -> Result<(), LaunchError> {
        let kernel = self.language_kernel(key, definition, cube_dim)?;
        // Always bounds-checked; `[compilation] bounds_check = "validate"` selects the slow
        // checked mode (each finding logged; on the CPU, shared-memory races found too).
        let mode = match self.utilities.check_mode {
            BoundsCheckMode::Validate => ExecutionMode::Validate,
            _ => ExecutionMode::Checked,
        };
        self.launch_inner(kernel, count, arguments, mode)
    }

    /// Launches a kernel of the kernel language as [`Self::launch_language`] does, without
    /// bounds checks (unless `[compilation] bounds_check` asks for them, as for
    /// [`Self::launch_unchecked`]). The macro's `launch_unchecked` calls it.
    ///
    /// # Errors
    /// As [`Self::launch_language`].
    ///
    /// # Safety
    /// With these arguments and this grid, the kernel must access nothing out of bounds
    /// (arrays, shared arrays, lines, fragments, asynchronous copies) and must terminate.
    pub unsafe fn launch_language_unchecked(
        &self,
        key: cubert_lang::KernelKey,
        definition: impl FnOnce() -> cubert_lang::KernelDefinition,
        cube_dim: crate::kernel::CubeDim,
        count: CubeCount,
        arguments: KernelArguments,
    ) -> Result<(), LaunchError> {
        let kernel = self.language_kernel(key, definition, cube_dim)?;
        // SAFETY: the caller guarantees the kernel stays in bounds and terminates.
        unsafe { self.launch_unchecked(kernel, count, arguments) }
    }

    /// The kernel of `key` built for this client and `cube_dim`: from the cache, or built
    /// from `definition` once.
    fn language_kernel(
        &self,
        key: cubert_lang::KernelKey,
        definition: impl FnOnce() -> cubert_lang::KernelDefinition,
        cube_dim: crate::kernel::CubeDim,
    ) -> Result<<R::Server as ComputeServer>::Kernel, LaunchError> {
        self.utilities
            .language_kernels
            .get_or_build(key, cube_dim, || {
                let definition = definition();
                let _span = tracing::info_span!(
                    target: "cubert::compile",
                    "build",
                    kernel = definition.id(),
                    backend = R::name(),
                    cube_dim = ?cube_dim
                )
                .entered();
                self.check_mma_features(&definition)?;
                R::language_kernel(&definition, cube_dim)
            })
    }

    /// Refuses a kernel whose tensor-core operations the device lacks
    /// (`Features::plane_mma`, `Features::plane_mma_fp8`) before any backend tries to
    /// build it.
    fn check_mma_features(
        &self,
        definition: &cubert_lang::KernelDefinition,
    ) -> Result<(), LaunchError> {
        // A failed expansion is reported by the build with its own message, and a kernel
        // past the device's shared memory by the launch's resource check (the same error
        // on every backend, whatever its tensor cores).
        let Ok(ir) = definition.ir() else {
            return Ok(());
        };
        if ir.shared_memory_bytes() > self.properties().hardware.max_shared_memory_size {
            return Ok(());
        }
        let features = self.features();
        if ir.uses_plane_group_mma() && !features.plane_group_mma {
            return Err(LaunchError::unsupported(format!(
                "kernel `{}`: plane_group_mma needs the plane-group tensor-core operation \
                 (wgmma, compute capability 9.0) the {} device lacks \
                 (Features::plane_group_mma is false)",
                definition.id(),
                R::name()
            )));
        }
        for elem in ir.mma_inputs() {
            let fp8 = matches!(elem, ElemType::E4M3 | ElemType::E5M2);
            let (supported, feature) = if fp8 {
                (features.plane_mma_fp8, "plane_mma_fp8")
            } else {
                (features.plane_mma, "plane_mma")
            };
            if !supported {
                return Err(LaunchError::unsupported(format!(
                    "kernel `{}`: plane_mma on {elem} fragments needs tensor cores the {} \
                     device lacks (Features::{feature} is false)",
                    definition.id(),
                    R::name()
                )));
            }
        }
        Ok(())
    }

    /// Launches `kernel` without bounds checks (unless `[compilation] bounds_check` asks for
    /// them).
    ///
    /// # Errors
    /// As [`Self::launch`].
    ///
    /// # Safety
    /// The kernel must not access memory out of bounds and must terminate.
    pub unsafe fn launch_unchecked(
        &self,
        kernel: <R::Server as ComputeServer>::Kernel,
        count: CubeCount,
        arguments: KernelArguments,
    ) -> Result<(), LaunchError> {
        let mode = match self.utilities.check_mode {
            BoundsCheckMode::Enforce => ExecutionMode::Checked,
            BoundsCheckMode::Validate => ExecutionMode::Validate,
            BoundsCheckMode::Auto => ExecutionMode::Unchecked,
        };
        self.launch_inner(kernel, count, arguments, mode)
    }

    /// Runs `work` and measures the device time of what it queues on this stream (device
    /// events where the backend has them). Nothing else runs on the device meanwhile.
    /// Profiles nest.
    ///
    /// ```
    /// # use cubert_runtime::{Bytes, ElemType, ops};
    /// # let client = cubert_cpu::default_client()?;
    /// let data = client.create(Bytes::from_elems(vec![1.0f32; 4096]))?;
    /// let out = client.empty(4096 * 4)?;
    /// let (launched, duration) = client.profile(
    ///     || ops::add(&client, &data, &data, &out, 4096, ElemType::F32),
    ///     "add",
    /// )?;
    /// launched?; // the closure's own result
    /// let ticks = duration.resolve_blocking()?; // waits for the device's timing
    /// assert!(ticks.end() >= ticks.start());
    /// assert_eq!(client.read_one(out)?.to_elems::<f32>(), vec![2.0; 4096]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ProfileError`] if timing can't start or end, or `work` panicked.
    pub fn profile<O>(
        &self,
        work: impl FnOnce() -> O,
        name: &str,
    ) -> Result<(O, ProfileDuration), ProfileError> {
        let stream = self.stream_id();
        let device = self.device.clone();
        let outcome =
            self.device
                .exclusive(move || -> Result<(O, ProfileDuration), ProfileError> {
                    let token = device
                        .submit_blocking(move |server| server.start_profile(stream))
                        .map_err(ServerError::from)??;
                    // End the profile even if `work` panics, so the server forgets the token.
                    let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
                    let duration = device
                        .submit_blocking(move |server| server.end_profile(stream, token))
                        .map_err(ServerError::from)?;
                    match output {
                        Ok(output) => Ok((output, duration?)),
                        Err(payload) => std::panic::resume_unwind(payload),
                    }
                });
        match outcome {
            Ok(result) => result,
            Err(error) => Err(ProfileError::Unknown {
                reason: format!("profiling `{name}` failed: {error}"),
                backtrace: BackTrace::capture(),
            }),
        }
    }
}

/// The span of a launch on the device's runner (where the backend queues or, on the CPU,
/// runs it), next to the caller's `launch` span.
fn execute_span<K: KernelMetadata>(kernel: &K) -> Option<tracing::span::EnteredSpan> {
    crate::tracing_gate::listened(log::Level::Trace).then(|| {
        tracing::trace_span!(target: "cubert::launch", "execute", kernel = kernel.name()).entered()
    })
}
