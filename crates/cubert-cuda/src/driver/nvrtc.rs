//! NVRTC, the run-time CUDA C++ compiler: whether it is there, its version, and programs
//! compiled to cubins.
//!
//! [`Program`] owns an `nvrtcProgram` and destroys it when dropped, so every call on it is
//! safe.

use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};
use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;

/// An NVRTC error with the operation that returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvrtcFailure {
    /// The operation.
    pub operation: &'static str,
    /// NVRTC's result.
    pub result: nvrtcResult,
}

impl std::fmt::Display for NvrtcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {:?}", self.operation, self.result)
    }
}

fn check(result: nvrtcResult, operation: &'static str) -> Result<(), NvrtcFailure> {
    match result {
        nvrtcResult::NVRTC_SUCCESS => Ok(()),
        result => Err(NvrtcFailure { operation, result }),
    }
}

/// Whether the NVRTC library (`libnvrtc.so`) can be opened, without loading it for good.
pub fn is_present() -> bool {
    // SAFETY: only probes whether the shared library can be opened.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's version as (major, minor) (`nvrtcVersion`). Ask [`is_present`] first: cudarc
/// panics when the library is missing.
///
/// # Errors
/// NVRTC's error.
pub fn version() -> Result<(i32, i32), NvrtcFailure> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out pointers.
    let result = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    check(result, "nvrtcVersion")?;
    Ok((major, minor))
}

/// An NVRTC program, destroyed when dropped. It borrows its source and name for its whole
/// life, as NVRTC may refer to them.
pub struct Program<'a> {
    program: nvrtcProgram,
    _source: PhantomData<&'a CStr>,
}

impl<'a> Program<'a> {
    /// A program compiling `source`, named `name` in diagnostics, without headers
    /// (`nvrtcCreateProgram`).
    ///
    /// # Errors
    /// NVRTC's error.
    pub fn new(source: &'a CStr, name: &'a CStr) -> Result<Self, NvrtcFailure> {
        let mut program: nvrtcProgram = std::ptr::null_mut();
        // SAFETY: valid out pointer and C strings, alive as long as the program; no
        // headers (null arrays of zero entries).
        let result = unsafe {
            sys::nvrtcCreateProgram(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        check(result, "nvrtcCreateProgram")?;
        Ok(Self {
            program,
            _source: PhantomData,
        })
    }

    /// Compiles the program with `options` (`nvrtcCompileProgram`); the log says why it
    /// failed.
    ///
    /// # Errors
    /// NVRTC's error (`NVRTC_ERROR_COMPILATION` for errors in the source).
    pub fn compile(&mut self, options: &[CString]) -> Result<(), NvrtcFailure> {
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let count = i32::try_from(pointers.len()).map_err(|_| NvrtcFailure {
            operation: "nvrtcCompileProgram",
            result: nvrtcResult::NVRTC_ERROR_INVALID_INPUT,
        })?;
        // SAFETY: the program is live; `pointers` holds `count` valid C strings, alive for
        // the call.
        let result = unsafe { sys::nvrtcCompileProgram(self.program, count, pointers.as_ptr()) };
        check(result, "nvrtcCompileProgram")
    }

    /// The compilation log (`nvrtcGetProgramLog`), empty if NVRTC can't give it.
    pub fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: the program is live; valid out pointer.
        if unsafe { sys::nvrtcGetProgramLogSize(self.program, &mut size) }
            != nvrtcResult::NVRTC_SUCCESS
        {
            return String::new();
        }
        let mut log = vec![0 as c_char; size.max(1)];
        // SAFETY: the buffer holds the `size` bytes NVRTC writes.
        if unsafe { sys::nvrtcGetProgramLog(self.program, log.as_mut_ptr()) }
            != nvrtcResult::NVRTC_SUCCESS
        {
            return String::new();
        }
        let bytes: Vec<u8> = log
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The compiled cubin (`nvrtcGetCUBINSize`, `nvrtcGetCUBIN`); empty when NVRTC made
    /// none (PTX for a virtual architecture).
    ///
    /// # Errors
    /// NVRTC's error.
    pub fn cubin(&self) -> Result<Vec<u8>, NvrtcFailure> {
        let mut size = 0usize;
        // SAFETY: the program is live; valid out pointer.
        let result = unsafe { sys::nvrtcGetCUBINSize(self.program, &mut size) };
        check(result, "nvrtcGetCUBINSize")?;
        if size == 0 {
            return Ok(Vec::new());
        }
        let mut cubin = vec![0 as c_char; size];
        // SAFETY: the program is live; the buffer holds the `size` bytes NVRTC writes.
        let result = unsafe { sys::nvrtcGetCUBIN(self.program, cubin.as_mut_ptr()) };
        check(result, "nvrtcGetCUBIN")?;
        Ok(cubin.into_iter().map(|c| c as u8).collect())
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: destroys the program created by `new`, once.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.program) };
    }
}
