//! cuBLAS on cubert handles, loaded at run time like the driver, NVRTC and NCCL.
//!
//! [`Cublas`] owns a cuBLAS handle made in a device's context. Its matrix products take
//! cubert handles (row-major, as [`cubert_runtime::ops::matmul`]) and run on the client's
//! stream through [`crate::interop::with_device_buffers`], so they are ordered with the
//! client's other work like a launch. Row-major `C = A × B` is column-major `Cᵀ = Bᵀ × Aᵀ`:
//! cuBLAS gets the operands swapped, no transposes.
//!
//! - [`Cublas::sgemm`]: f32 (`cublasSgemm`; the default math mode, so no TF32: every
//!   product is an f32 FMA, as in cubert's f32 matmul);
//! - [`Cublas::gemm_bf16`]: bf16 inputs and output, f32 accumulation (`cublasGemmEx`,
//!   `CUBLAS_COMPUTE_32F`, tensor cores);
//! - [`Cublas::gemm_tf32`]: f32 inputs and output multiplied as TF32 on tensor cores, f32
//!   accumulation (`cublasGemmEx`, `CUBLAS_COMPUTE_32F_FAST_TF32`).
//!
//! cudarc opens `libcublas.so` (or `.so.13`, `.so.12`, ...); pip's `nvidia-cublas` wheels
//! (torch's) have only `libcublas.so.N` in `site-packages/nvidia/cublas/lib`: put that
//! directory on `LD_LIBRARY_PATH`. [`cublas_status`] says whether it was found.

use crate::interop::with_device_buffers;
use crate::runtime::CudaRuntime;
use cubert_runtime::{ComputeClient, ElemType, Handle, ServerError, ops};
use cudarc::cublas::sys::{
    self, cublasComputeType_t, cublasGemmAlgo_t, cublasHandle_t, cublasOperation_t, cublasStatus_t,
    cudaDataType_t, libraryPropertyType_t,
};
use std::ffi::{CStr, c_int, c_void};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The cuBLAS version (`major.minor.patch`), or why cuBLAS can't be used.
pub fn cublas_status() -> &'static Result<String, String> {
    static STATUS: OnceLock<Result<String, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        // SAFETY: only probes whether one of the library names can be opened.
        let present =
            std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
        if !present {
            return Err("cuBLAS was not found: cubert loads it as libcublas.so (or \
                        libcublas.so.13, .12, ...) from the library path; pip's nvidia-cublas \
                        wheels have it in site-packages/nvidia/cublas/lib"
                .into());
        }
        let property = |kind| {
            let mut value: c_int = 0;
            // SAFETY: `value` is a valid out-pointer; the library is present.
            let status = unsafe { sys::cublasGetProperty(kind, &mut value) };
            (status == cublasStatus_t::CUBLAS_STATUS_SUCCESS).then_some(value)
        };
        let version = std::panic::catch_unwind(|| {
            [
                libraryPropertyType_t::MAJOR_VERSION,
                libraryPropertyType_t::MINOR_VERSION,
                libraryPropertyType_t::PATCH_LEVEL,
            ]
            .map(property)
        });
        match version {
            Ok([Some(major), Some(minor), Some(patch)]) => Ok(format!("{major}.{minor}.{patch}")),
            _ => Err("the cuBLAS library found has no usable cublasGetProperty".into()),
        }
    })
}

/// `Ok` for success, else an error naming `operation` with cuBLAS's description.
fn check(status: cublasStatus_t, operation: &str) -> Result<(), ServerError> {
    if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: cuBLAS returns a static string for any status.
    let text = unsafe { sys::cublasGetStatusString(status) };
    let text = if text.is_null() {
        format!("{status:?}")
    } else {
        // SAFETY: a NUL-terminated static string (checked non-null).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(ServerError::generic(format!("{operation}: {text}")))
}

/// A cuBLAS handle of one device. See the module docs.
pub struct Cublas {
    handle: Mutex<cublasHandle_t>,
    client: ComputeClient<CudaRuntime>,
}

// SAFETY: the handle is used only inside `with_device_buffers`, on the device's runner
// with its context bound, one call at a time (behind the mutex).
unsafe impl Send for Cublas {}
// SAFETY: as above; every use locks the mutex.
unsafe impl Sync for Cublas {}

impl Cublas {
    /// A cuBLAS handle in the context of `client`'s device; its products run on the stream
    /// of the client they are given.
    ///
    /// # Errors
    /// [`ServerError::Unsupported`] when cuBLAS isn't found (the reason says where it is
    /// looked for), or cuBLAS's error.
    pub fn new(client: &ComputeClient<CudaRuntime>) -> Result<Self, ServerError> {
        if let Err(reason) = cublas_status() {
            return Err(ServerError::unsupported(
                format!("cuBLAS ({reason})"),
                "cuda",
            ));
        }
        let handle = with_device_buffers(client, &[], |_, _| {
            let mut handle: cublasHandle_t = std::ptr::null_mut();
            // SAFETY: `handle` is a valid out-pointer; the device's context is bound.
            let status = unsafe { sys::cublasCreate_v2(&mut handle) };
            check(status, "cublasCreate").map(|()| handle as usize)
        })??;
        Ok(Self {
            handle: Mutex::new(handle as cublasHandle_t),
            client: client.clone(),
        })
    }

    /// Checks `m`, `k`, `n` and the handles' sizes for a product of `elem`, and returns
    /// the dimensions as cuBLAS takes them.
    fn dimensions(
        lhs: &Handle,
        rhs: &Handle,
        out: &Handle,
        (m, k, n): (usize, usize, usize),
        elem: ElemType,
    ) -> Result<[c_int; 3], ServerError> {
        ops::check_matmul(lhs, rhs, out, (m, k, n), elem)
            .map_err(|error| ServerError::generic(error.to_string()))?;
        let int = |value: usize| {
            c_int::try_from(value)
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| {
                    ServerError::from(cubert_runtime::IoError::invalid(format!(
                        "cuBLAS takes dimensions from 1 to {}, not {value}",
                        c_int::MAX
                    )))
                })
        };
        Ok([int(m)?, int(k)?, int(n)?])
    }

    /// `out = lhs × rhs` in f32 (row-major `lhs` m×k, `rhs` k×n, `out` m×n), on `client`'s
    /// stream (`cublasSgemm`).
    ///
    /// # Errors
    /// Handles that don't hold the shapes, dimensions over `i32::MAX`, a client of another
    /// device, or cuBLAS's error.
    pub fn sgemm(
        &self,
        client: &ComputeClient<CudaRuntime>,
        (lhs, rhs, out): (&Handle, &Handle, &Handle),
        (m, k, n): (usize, usize, usize),
    ) -> Result<(), ServerError> {
        let [m, k, n] = Self::dimensions(lhs, rhs, out, (m, k, n), ElemType::F32)?;
        self.product(client, (lhs, rhs, out), move |handle, [a, b, c]| {
            let (alpha, beta) = (1.0f32, 0.0f32);
            // SAFETY: `a`, `b`, `c` hold m×k, k×n and m×n f32 (checked above) on this
            // handle's device; the handle's stream is set; the scalars live for the call.
            let status = unsafe {
                sys::cublasSgemm_v2(
                    handle,
                    cublasOperation_t::CUBLAS_OP_N,
                    cublasOperation_t::CUBLAS_OP_N,
                    n,
                    m,
                    k,
                    &alpha,
                    b as *const f32,
                    n,
                    a as *const f32,
                    k,
                    &beta,
                    c as *mut f32,
                    n,
                )
            };
            check(status, "cublasSgemm")
        })
    }

    /// `out = lhs × rhs` in bf16 with f32 accumulation (`cublasGemmEx`), shapes as
    /// [`Self::sgemm`].
    ///
    /// # Errors
    /// As [`Self::sgemm`].
    pub fn gemm_bf16(
        &self,
        client: &ComputeClient<CudaRuntime>,
        handles: (&Handle, &Handle, &Handle),
        dims: (usize, usize, usize),
    ) -> Result<(), ServerError> {
        self.gemm_ex(client, handles, dims, ElemType::BF16)
    }

    /// `out = lhs × rhs` for f32 operands multiplied as TF32 on tensor cores, with f32
    /// accumulation (`cublasGemmEx`, `CUBLAS_COMPUTE_32F_FAST_TF32`), shapes as
    /// [`Self::sgemm`].
    ///
    /// # Errors
    /// As [`Self::sgemm`].
    pub fn gemm_tf32(
        &self,
        client: &ComputeClient<CudaRuntime>,
        handles: (&Handle, &Handle, &Handle),
        dims: (usize, usize, usize),
    ) -> Result<(), ServerError> {
        self.gemm_ex(client, handles, dims, ElemType::F32)
    }

    /// `cublasGemmEx` on operands of `elem` with f32 compute: bf16, or f32 as TF32.
    fn gemm_ex(
        &self,
        client: &ComputeClient<CudaRuntime>,
        (lhs, rhs, out): (&Handle, &Handle, &Handle),
        (m, k, n): (usize, usize, usize),
        elem: ElemType,
    ) -> Result<(), ServerError> {
        let [m, k, n] = Self::dimensions(lhs, rhs, out, (m, k, n), elem)?;
        let (data, compute) = if elem == ElemType::F32 {
            (
                cudaDataType_t::CUDA_R_32F,
                cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            )
        } else {
            (
                cudaDataType_t::CUDA_R_16BF,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
            )
        };
        self.product(client, (lhs, rhs, out), move |handle, [a, b, c]| {
            let (alpha, beta) = (1.0f32, 0.0f32);
            // SAFETY: as in `sgemm`, for operands of `data` (checked to hold the shapes
            // as `elem`); f32 scalars for f32 compute.
            let status = unsafe {
                sys::cublasGemmEx(
                    handle,
                    cublasOperation_t::CUBLAS_OP_N,
                    cublasOperation_t::CUBLAS_OP_N,
                    n,
                    m,
                    k,
                    (&alpha as *const f32).cast::<c_void>(),
                    b as *const c_void,
                    data,
                    n,
                    a as *const c_void,
                    data,
                    k,
                    (&beta as *const f32).cast::<c_void>(),
                    c as *mut c_void,
                    data,
                    n,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                )
            };
            check(status, "cublasGemmEx")
        })
    }

    /// Runs `call(handle, [lhs, rhs, out] addresses)` on `client`'s stream.
    fn product(
        &self,
        client: &ComputeClient<CudaRuntime>,
        (lhs, rhs, out): (&Handle, &Handle, &Handle),
        call: impl FnOnce(cublasHandle_t, [u64; 3]) -> Result<(), ServerError> + Send + 'static,
    ) -> Result<(), ServerError> {
        if client.device_id() != self.client.device_id() {
            return Err(cubert_runtime::IoError::not_found(format!(
                "this cuBLAS handle belongs to {:?}, not to {:?}",
                self.client.device_id(),
                client.device_id()
            ))
            .into());
        }
        let guard = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
        let handle = *guard as usize;
        with_device_buffers(client, &[lhs, rhs, out], move |buffers, stream| {
            let handle = handle as cublasHandle_t;
            // SAFETY: a live handle of this device (its context is bound) and a live
            // stream of the same context.
            let status = unsafe { sys::cublasSetStream_v2(handle, stream.cast()) };
            check(status, "cublasSetStream")?;
            call(handle, [buffers[0].ptr, buffers[1].ptr, buffers[2].ptr])
        })?
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        let handle = *self
            .handle
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) as usize;
        // Destroyed in the device's context, after the work queued before (the runner).
        let _ = with_device_buffers(&self.client, &[], move |_, _| {
            // SAFETY: the handle was created by `new` and is destroyed once, here.
            unsafe { sys::cublasDestroy_v2(handle as cublasHandle_t) }
        });
    }
}
