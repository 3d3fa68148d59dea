//! Modules and kernels: loading compiled code (`cuModuleLoadData`), finding and tuning its
//! functions, and launching them (`cuLaunchKernel`).

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{self, CUfunction, CUmodule, CUstream};
use std::ffi::{CStr, c_void};

/// Loads a module from `image` into the current context (`cuModuleLoadData`).
///
/// # Errors
/// The driver's error (an image it can't load, or for another architecture).
///
/// # Safety
/// `image` is a cubin or fatbin, or PTX text ending with a NUL byte: the driver reads it
/// by its own format, not by the slice's length.
pub unsafe fn load_data(image: &[u8]) -> Result<CUmodule, DriverFailure> {
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: valid out pointer; the caller vouches that `image` is self-delimiting.
    unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) }
        .during("cuModuleLoadData")?;
    Ok(module)
}

/// The function `name` of `module` (`cuModuleGetFunction`).
///
/// # Errors
/// The driver's error (`CUDA_ERROR_NOT_FOUND` when the module has no such function).
///
/// # Safety
/// `module` is a live module.
pub unsafe fn function(module: CUmodule, name: &CStr) -> Result<CUfunction, DriverFailure> {
    let mut function: CUfunction = std::ptr::null_mut();
    // SAFETY: valid out pointer and C string; the caller vouches for `module`.
    unsafe { sys::cuModuleGetFunction(&mut function, module, name.as_ptr()) }
        .during("cuModuleGetFunction")?;
    Ok(function)
}

/// Unloads `module` (`cuModuleUnload`); its functions can't be used after.
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `module` came from [`load_data`], is unloaded once, and no queued work runs its code.
pub unsafe fn unload(module: CUmodule) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuModuleUnload(module) }.during("cuModuleUnload")
}

/// Lets `function` use up to `bytes` of dynamic shared memory per block
/// (`cuFuncSetAttribute`, `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
///
/// # Errors
/// The driver's error (more than the device allows).
///
/// # Safety
/// `function` belongs to a live module.
pub unsafe fn set_max_dynamic_shared(
    function: CUfunction,
    bytes: i32,
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe {
        sys::cuFuncSetAttribute(
            function,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes,
        )
    }
    .during("cuFuncSetAttribute")
}

/// Queues `function` on `stream` with `grid` blocks of `block` threads, `shared_bytes` of
/// dynamic shared memory, and the kernel parameters `params` (`cuLaunchKernel`; the
/// driver copies the parameters before returning).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `function` belongs to a live module of the current context and `stream` is live;
/// `params` holds one pointer per kernel parameter, each to a value of that parameter's
/// size and layout; every device address the kernel reaches stays allocated until it
/// completes.
pub unsafe fn launch(
    function: CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: CUstream,
    params: &mut [*mut c_void],
) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract; no `extra` array.
    unsafe {
        sys::cuLaunchKernel(
            function,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            shared_bytes,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .during("cuLaunchKernel")
}
