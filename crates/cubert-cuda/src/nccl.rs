//! NCCL, loaded at run time: whether it is there, and its types, operations and errors.
//!
//! cudarc opens NCCL by name on first use and panics if it can't, so [`nccl_status`] checks
//! for the library first (once) and every collective entry point asks it. The names cudarc
//! tries are `libnccl.so`, `libnccl.so.13`, `libnccl.so.12`, ... (see
//! `cudarc::get_lib_name_candidates`), not `libnccl.so.2`, which is the only name the NCCL
//! of pip's `nvidia-nccl` wheels (and of many system installs) has: put a `libnccl.so`
//! symlink to it in a directory on `LD_LIBRARY_PATH`. The error says so.
//!
//! The collective element types map to NCCL's; `Sum` is `ncclSum` and `Mean` is `ncclAvg`
//! (for integers NCCL sums in the element type, then divides rounding toward zero).

use crate::driver;
use cubert_runtime::server::ReduceOperation;
use cubert_runtime::{ElemType, ServerError};
use cudarc::nccl::sys::{self, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use std::sync::OnceLock;

/// The NCCL version (`major.minor.patch`), or why NCCL can't be used.
pub fn nccl_status() -> &'static Result<String, String> {
    static STATUS: OnceLock<Result<String, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        if !driver::nccl::is_present() {
            return Err(
                "NCCL was not found: cubert loads it as libnccl.so (or libnccl.so.13, .12, ...) \
                 from the library path. If your NCCL only has libnccl.so.2 (pip's nvidia-nccl \
                 wheels), link libnccl.so to it in a directory on LD_LIBRARY_PATH"
                    .into(),
            );
        }
        let version = std::panic::catch_unwind(driver::nccl::version);
        match version {
            Ok(Ok(code)) => Ok(format!(
                "{}.{}.{}",
                code / 10_000,
                (code % 10_000) / 100,
                code % 100
            )),
            Ok(Err(failure)) => Err(format!("ncclGetVersion failed: {:?}", failure.result)),
            Err(_) => Err("the NCCL library lacks ncclGetVersion (too old?)".into()),
        }
    })
}

/// Fails with the reason NCCL can't be used, if it can't.
///
/// # Errors
/// [`ServerError::Generic`] explaining what is missing.
pub fn require() -> Result<(), ServerError> {
    nccl_status()
        .as_ref()
        .map(|_| ())
        .map_err(|reason| ServerError::generic(reason.clone()))
}

/// NCCL's element type for `dtype`.
///
/// # Errors
/// [`ServerError::Unsupported`] for the types NCCL lacks (i16, u16, bool).
pub fn data_type(dtype: ElemType) -> Result<ncclDataType_t, ServerError> {
    Ok(match dtype {
        ElemType::F16 => ncclDataType_t::ncclFloat16,
        ElemType::BF16 => ncclDataType_t::ncclBfloat16,
        ElemType::F32 => ncclDataType_t::ncclFloat32,
        ElemType::F64 => ncclDataType_t::ncclFloat64,
        ElemType::I8 => ncclDataType_t::ncclInt8,
        ElemType::I32 => ncclDataType_t::ncclInt32,
        ElemType::I64 => ncclDataType_t::ncclInt64,
        ElemType::U8 => ncclDataType_t::ncclUint8,
        ElemType::U32 => ncclDataType_t::ncclUint32,
        ElemType::U64 => ncclDataType_t::ncclUint64,
        other => {
            return Err(ServerError::unsupported(
                format!("collectives of {other} (NCCL has no such type)"),
                "cuda",
            ));
        }
    })
}

/// NCCL's reduction for `op`.
pub fn reduce_op(op: ReduceOperation) -> ncclRedOp_t {
    match op {
        ReduceOperation::Sum => ncclRedOp_t::ncclSum,
        ReduceOperation::Mean => ncclRedOp_t::ncclAvg,
    }
}

/// NCCL's description of `result`.
pub fn describe(result: ncclResult_t) -> String {
    driver::nccl::describe(result)
}

/// `Ok` for success (and "in progress", which blocking communicators never return), else an
/// error naming `operation`.
///
/// # Errors
/// [`ServerError::Generic`] with NCCL's description.
pub fn check(result: ncclResult_t, operation: &str) -> Result<(), ServerError> {
    match result {
        ncclResult_t::ncclSuccess | ncclResult_t::ncclInProgress => Ok(()),
        failure => Err(ServerError::generic(driver::nccl::failure_message(
            operation, failure,
        ))),
    }
}

/// A new NCCL unique id, as the 128 bytes the rendezvous carries.
///
/// # Errors
/// NCCL's error.
pub fn unique_id() -> Result<Vec<u8>, ServerError> {
    require()?;
    let id = driver::nccl::unique_id().map_err(|failure| {
        ServerError::generic(format!("ncclGetUniqueId: {}", describe(failure.result)))
    })?;
    Ok(id.internal.iter().map(|c| *c as u8).collect())
}

/// The unique id carried in `bytes`.
///
/// # Errors
/// [`ServerError::Generic`] if `bytes` isn't 128 bytes long.
pub fn unique_id_from(bytes: &[u8]) -> Result<sys::ncclUniqueId, ServerError> {
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    if bytes.len() != id.internal.len() {
        return Err(ServerError::generic(format!(
            "an NCCL unique id has 128 bytes, the rendezvous carried {}",
            bytes.len()
        )));
    }
    for (slot, byte) in id.internal.iter_mut().zip(bytes) {
        *slot = *byte as std::ffi::c_char;
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collective_type_maps_to_an_nccl_type() {
        for dtype in cubert_runtime::server::COLLECTIVE_TYPES {
            assert!(data_type(dtype).is_ok(), "{dtype}");
        }
        for dtype in [ElemType::I16, ElemType::U16, ElemType::Bool] {
            let error = data_type(dtype).unwrap_err();
            assert!(matches!(error, ServerError::Unsupported { .. }), "{error}");
        }
        assert_eq!(reduce_op(ReduceOperation::Mean), ncclRedOp_t::ncclAvg);
    }

    #[test]
    fn unique_id_bytes_round_trip_and_wrong_lengths_are_errors() {
        let bytes: Vec<u8> = (0..128).map(|i| i as u8).collect();
        let id = unique_id_from(&bytes).unwrap();
        let back: Vec<u8> = id.internal.iter().map(|c| *c as u8).collect();
        assert_eq!(back, bytes);
        assert!(unique_id_from(&bytes[..64]).is_err());
    }

    #[test]
    fn missing_nccl_is_an_error_not_a_panic() {
        // On a machine without NCCL this is the explanation; with NCCL, its version.
        match nccl_status() {
            Ok(version) => assert!(version.starts_with('2'), "{version}"),
            Err(reason) => assert!(reason.contains("libnccl.so"), "{reason}"),
        }
    }
}
