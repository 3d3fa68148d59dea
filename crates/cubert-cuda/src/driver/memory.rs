//! Memory: device allocations (`cuMemAlloc`), the virtual memory management calls that
//! back paged pools (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`,
//! `cuMemUnmap`), and pinned host memory (`cuMemHostAlloc`).
//!
//! Every call works in the context current on the calling thread; without one the driver
//! returns an error (`CUDA_ERROR_INVALID_CONTEXT`), never undefined behaviour. Freeing is
//! `unsafe`: the driver can't know whether queued work or live host references still use
//! the memory.

use super::{Context as _, DriverFailure};
use cudarc::driver::sys::{self, CUdeviceptr, CUmemAccessDesc, CUmemAllocationProp};
use std::ffi::c_void;

/// Allocates `bytes` of device memory (`cuMemAlloc`).
///
/// # Errors
/// The driver's error (`CUDA_ERROR_OUT_OF_MEMORY` when the device is full).
pub fn alloc(bytes: usize) -> Result<CUdeviceptr, DriverFailure> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out pointer; the driver checks the size and the context.
    unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) }.during("cuMemAlloc")?;
    Ok(ptr)
}

/// Frees device memory from [`alloc`] (`cuMemFree`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `ptr` came from [`alloc`] in the current context and is freed once; no queued work
/// uses it any more.
pub unsafe fn free(ptr: CUdeviceptr) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemFree_v2(ptr) }.during("cuMemFree")
}

/// Free and total memory of the current context's device, in bytes (`cuMemGetInfo`).
///
/// # Errors
/// The driver's error.
pub fn info() -> Result<(usize, usize), DriverFailure> {
    cudarc::driver::result::mem_get_info().during("cuMemGetInfo")
}

/// The minimum granularity of mapped allocations with properties `prop`
/// (`cuMemGetAllocationGranularity`).
///
/// # Errors
/// The driver's error (for instance when the device has no virtual memory management).
pub fn allocation_granularity(prop: &CUmemAllocationProp) -> Result<usize, DriverFailure> {
    let mut granularity = 0usize;
    // SAFETY: valid out pointer and property struct, both alive for the call.
    unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    }
    .during("cuMemGetAllocationGranularity")?;
    Ok(granularity)
}

/// Reserves `size` bytes of device address space anywhere (`cuMemAddressReserve`).
///
/// # Errors
/// The driver's error.
pub fn address_reserve(size: usize) -> Result<CUdeviceptr, DriverFailure> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out pointer; no fixed address requested, default alignment.
    unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) }.during("cuMemAddressReserve")?;
    Ok(ptr)
}

/// Gives back address space from [`address_reserve`] (`cuMemAddressFree`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `ptr` and `size` are a reservation of [`address_reserve`], freed once, with nothing
/// mapped in it any more.
pub unsafe fn address_free(ptr: CUdeviceptr, size: usize) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemAddressFree(ptr, size) }.during("cuMemAddressFree")
}

/// Creates `size` bytes of physical memory with properties `prop` (`cuMemCreate`).
///
/// # Errors
/// The driver's error (`CUDA_ERROR_OUT_OF_MEMORY` when the device is full).
pub fn create(
    size: usize,
    prop: &CUmemAllocationProp,
) -> Result<sys::CUmemGenericAllocationHandle, DriverFailure> {
    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: valid out pointer and property struct; the driver checks the size against
    // the granularity.
    unsafe { sys::cuMemCreate(&mut handle, size, prop, 0) }.during("cuMemCreate")?;
    Ok(handle)
}

/// Releases physical memory from [`create`] (`cuMemRelease`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `handle` came from [`create`] and is released once, unmapped everywhere.
pub unsafe fn release(handle: sys::CUmemGenericAllocationHandle) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemRelease(handle) }.during("cuMemRelease")
}

/// Maps all `size` bytes of `handle` at `ptr` (`cuMemMap`).
///
/// # Errors
/// The driver's error (it checks that `ptr..ptr + size` lies in a reservation and is free).
pub fn map(
    ptr: CUdeviceptr,
    size: usize,
    handle: sys::CUmemGenericAllocationHandle,
) -> Result<(), DriverFailure> {
    // SAFETY: plain values; the driver validates the range and the handle.
    unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) }.during("cuMemMap")
}

/// Sets the access of the mapped range `ptr..ptr + size` for each device `access` names
/// (`cuMemSetAccess`); other devices' access is left as it was.
///
/// # Errors
/// The driver's error (it checks that the range is mapped and that each device may access
/// this one's memory).
pub fn set_access(
    ptr: CUdeviceptr,
    size: usize,
    access: &[CUmemAccessDesc],
) -> Result<(), DriverFailure> {
    // SAFETY: `access` holds `access.len()` live descriptors; the driver validates the range.
    unsafe { sys::cuMemSetAccess(ptr, size, access.as_ptr(), access.len()) }
        .during("cuMemSetAccess")
}

/// Unmaps `ptr..ptr + size` (`cuMemUnmap`).
///
/// # Errors
/// The driver's error (also when nothing is mapped there).
///
/// # Safety
/// No queued work uses the range any more.
pub unsafe fn unmap(ptr: CUdeviceptr, size: usize) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemUnmap(ptr, size) }.during("cuMemUnmap")
}

/// Allocates `size` bytes of page-locked host memory with `flags`
/// (`CU_MEMHOSTALLOC_*`) (`cuMemHostAlloc`).
///
/// # Errors
/// The driver's error.
pub fn host_alloc(size: usize, flags: u32) -> Result<*mut c_void, DriverFailure> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out pointer; the driver checks the size and flags.
    unsafe { sys::cuMemHostAlloc(&mut ptr, size, flags) }.during("cuMemHostAlloc")?;
    Ok(ptr)
}

/// Frees page-locked host memory from [`host_alloc`] (`cuMemFreeHost`).
///
/// # Errors
/// The driver's error.
///
/// # Safety
/// `ptr` came from [`host_alloc`] and is freed once; nothing (host reference, queued copy
/// or kernel) uses it any more.
pub unsafe fn host_free(ptr: *mut c_void) -> Result<(), DriverFailure> {
    // SAFETY: the caller upholds this function's contract.
    unsafe { sys::cuMemFreeHost(ptr) }.during("cuMemFreeHost")
}

/// The device address of mapped page-locked host memory (`cuMemHostGetDevicePointer`).
///
/// # Errors
/// The driver's error (also when `host` isn't mapped pinned memory: the driver only looks
/// the address up).
pub fn host_device_pointer(host: *mut c_void) -> Result<CUdeviceptr, DriverFailure> {
    let mut device: CUdeviceptr = 0;
    // SAFETY: valid out pointer; the driver looks `host` up without dereferencing it.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }
        .during("cuMemHostGetDevicePointer")?;
    Ok(device)
}

/// What the driver knows about a device address (`cuPointerGetAttribute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// Whether the address is device memory (or managed memory), not host memory.
    pub is_device: bool,
    /// The ordinal of the device the memory belongs to.
    pub device: i32,
    /// The allocation the address lies in, `(start, size)`, where the driver reports it.
    pub range: Option<(CUdeviceptr, u64)>,
}

fn pointer_attribute<T: Default>(
    ptr: CUdeviceptr,
    attribute: sys::CUpointer_attribute,
) -> Result<T, DriverFailure> {
    let mut value = T::default();
    // SAFETY: `value` is a writable `T` of the type the attribute returns (the callers pair
    // each attribute with its C type); the driver checks the address.
    unsafe { sys::cuPointerGetAttribute((&raw mut value).cast::<c_void>(), attribute, ptr) }
        .during("cuPointerGetAttribute")?;
    Ok(value)
}

/// The driver's view of `ptr`: memory type, device, and the allocation around it.
///
/// # Errors
/// The driver's error: `CUDA_ERROR_INVALID_VALUE` for an address the driver doesn't know
/// (host memory it never saw, a freed or made-up address).
pub fn pointer_info(ptr: CUdeviceptr) -> Result<PointerInfo, DriverFailure> {
    use sys::CUpointer_attribute::*;
    let memory_type: u32 = pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE)?;
    let device: i32 = pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)?;
    let start: Result<CUdeviceptr, _> =
        pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
    let size: Result<usize, _> = pointer_attribute(ptr, CU_POINTER_ATTRIBUTE_RANGE_SIZE);
    Ok(PointerInfo {
        is_device: memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
            || memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32,
        device,
        range: start
            .ok()
            .zip(size.ok())
            .map(|(start, size)| (start, size as u64)),
    })
}
