//! Builds the standard kernels from their kernel-language definitions, for any runtime.
//!
//! [`standard_kernel`] picks the definition of a [`StandardKernel`] (the Rust element types
//! its `ElemType`s name), renames it after the kernel (`add_f32`, as profiles and errors
//! name it), and has the runtime build it (`Runtime::language_kernel`: native code on the
//! CPU, NVRTC on CUDA). Built kernels are cached per runtime and kernel, so a launch
//! builds nothing after the first.

use super::StandardKernel;
use super::elementwise::{
    binary, binary_lines, binary_units, cast, cast_units, copy, fill, fill_units, noop,
};
use super::matmul::{MatmulTiling, matmul_definition};
use super::reduce::{RowSplit, reduce_sum_definition};
use crate::elem::ElemType;
use crate::error::LaunchError;
use crate::kernel::CubeDim;
use crate::kernel::StandardVariant;
use crate::lang::KernelDefinition;
use crate::memory::FastMap;
use crate::runtime::Runtime;
use crate::server::ComputeServer;
use std::any::{Any, TypeId};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Units per cube of the elementwise standard kernels.
pub const ELEMENTWISE_CUBE_DIM: CubeDim = CubeDim::new_1d(256);

/// Calls `$body` with the type `$t` bound to the Rust type of the
/// [`ElemType`](crate::elem::ElemType) `$elem`: `f16`, `f32`, ..., `u64`, `e4m3`, `e5m2`;
/// booleans are `$bool` (`u8` where a kernel moves bytes, `bool` where it converts). How
/// code that knows an element type only at run time calls code generic over it.
///
/// The form `with_elem!(elem, bool_type, fp8_type, T => body)` binds both 8-bit floats to
/// `fp8_type` instead: for arithmetic, which they don't have, where the caller has refused
/// them first and only needs the arm to compile (`u8`).
#[macro_export]
macro_rules! with_elem {
    ($elem:expr, $bool:ty, $t:ident => $body:expr) => {
        $crate::with_elem!(
            $elem,
            $bool,
            $crate::lang::prelude::e4m3,
            $crate::lang::prelude::e5m2,
            $t => $body
        )
    };
    ($elem:expr, $bool:ty, $fp8:ty, $t:ident => $body:expr) => {
        $crate::with_elem!($elem, $bool, $fp8, $fp8, $t => $body)
    };
    ($elem:expr, $bool:ty, $e4m3:ty, $e5m2:ty, $t:ident => $body:expr) => {
        match $elem {
            $crate::elem::ElemType::E4M3 => {
                type $t = $e4m3;
                $body
            }
            $crate::elem::ElemType::E5M2 => {
                type $t = $e5m2;
                $body
            }
            $crate::elem::ElemType::F16 => {
                type $t = $crate::lang::prelude::f16;
                $body
            }
            $crate::elem::ElemType::BF16 => {
                type $t = $crate::lang::prelude::bf16;
                $body
            }
            $crate::elem::ElemType::F32 => {
                type $t = f32;
                $body
            }
            $crate::elem::ElemType::F64 => {
                type $t = f64;
                $body
            }
            $crate::elem::ElemType::I8 => {
                type $t = i8;
                $body
            }
            $crate::elem::ElemType::I16 => {
                type $t = i16;
                $body
            }
            $crate::elem::ElemType::I32 => {
                type $t = i32;
                $body
            }
            $crate::elem::ElemType::I64 => {
                type $t = i64;
                $body
            }
            $crate::elem::ElemType::U8 => {
                type $t = u8;
                $body
            }
            $crate::elem::ElemType::U16 => {
                type $t = u16;
                $body
            }
            $crate::elem::ElemType::U32 => {
                type $t = u32;
                $body
            }
            $crate::elem::ElemType::U64 => {
                type $t = u64;
                $body
            }
            $crate::elem::ElemType::Bool => {
                type $t = $bool;
                $body
            }
        }
    };
}

/// The kernel-language definition and cube dim of `kernel`, or `None` for the kernels
/// whose backends choose among several (reduce-sum: [`reduce_sum_kernel`], matmul:
/// [`matmul_kernel`]).
///
/// # Errors
/// [`LaunchError`] for arithmetic on booleans or 8-bit floats, which no backend defines.
pub fn definition(
    kernel: StandardKernel,
) -> Result<Option<(KernelDefinition, CubeDim)>, LaunchError> {
    let arithmetic = |elem: ElemType| no_arithmetic(kernel, elem).map_or(Ok(()), Err);
    let elementwise = ELEMENTWISE_CUBE_DIM;
    let (definition, cube_dim) = match kernel {
        StandardKernel::Noop => (noop::definition(), CubeDim::new_single()),
        StandardKernel::Fill(elem) => (
            crate::with_elem!(elem, u8, T => fill::definition::<T>()),
            elementwise,
        ),
        StandardKernel::Copy(elem) => (
            crate::with_elem!(elem, u8, T => copy::definition::<T>()),
            elementwise,
        ),
        StandardKernel::Cast { from, to } => (
            crate::with_elem!(from, bool, S => crate::with_elem!(to, bool, D => cast::definition::<S, D>())),
            elementwise,
        ),
        StandardKernel::Add(elem) => {
            arithmetic(elem)?;
            (
                crate::with_elem!(elem, u8, u8, T => binary::definition::<T>(false)),
                elementwise,
            )
        }
        StandardKernel::Mul(elem) => {
            arithmetic(elem)?;
            (
                crate::with_elem!(elem, u8, u8, T => binary::definition::<T>(true)),
                elementwise,
            )
        }
        StandardKernel::ReduceSum(_) | StandardKernel::Matmul(_) => return Ok(None),
    };
    let name = kernel.name();
    Ok(Some((definition.renamed(name.clone(), name), cube_dim)))
}

/// The error for arithmetic `kernel` on `elem` when `elem` has none (booleans, the 8-bit
/// floats; see [`ElemType::has_arithmetic`]), `None` when it has.
pub fn no_arithmetic(kernel: StandardKernel, elem: ElemType) -> Option<LaunchError> {
    if elem.has_arithmetic() {
        return None;
    }
    let what = if elem == ElemType::Bool {
        "booleans".to_string()
    } else {
        format!("the 8-bit float `{elem}` (a storage type: cast it to f16, bf16 or f32 first)")
    };
    Some(LaunchError::unknown(format!(
        "there is no `{kernel}` kernel: arithmetic on {what} is not defined"
    )))
}

/// The definition of `kernel` by lines of 4 elements ([`binary_lines`]), for add and mul
/// of the 4-byte numeric types; `None` for the others. It has the scalar kernel's name and
/// id (`add_f32`): profiles and errors name the operation the caller asked for, and the two
/// compiled kernels still differ where it matters, in the compile caches, whose keys hash
/// the generated source.
pub fn lines_definition(kernel: StandardKernel) -> Option<KernelDefinition> {
    let definition = match kernel {
        StandardKernel::Add(ElemType::F32) => binary_lines::definition::<f32>(false),
        StandardKernel::Add(ElemType::I32) => binary_lines::definition::<i32>(false),
        StandardKernel::Add(ElemType::U32) => binary_lines::definition::<u32>(false),
        StandardKernel::Mul(ElemType::F32) => binary_lines::definition::<f32>(true),
        StandardKernel::Mul(ElemType::I32) => binary_lines::definition::<i32>(true),
        StandardKernel::Mul(ElemType::U32) => binary_lines::definition::<u32>(true),
        _ => return None,
    };
    let name = kernel.name();
    Some(definition.renamed(name.clone(), name))
}

/// The definition of `kernel` for a grid of a unit per element along x, with no loop
/// ([`fill_units`], [`cast_units`], [`binary_units`]); `None` for the others (copy goes
/// through the driver, reduce-sum and matmul have their own grids). Named as the standard
/// kernel, like [`lines_definition`].
///
/// # Errors
/// [`LaunchError`] for arithmetic on booleans or 8-bit floats, as [`definition`].
pub fn units_definition(kernel: StandardKernel) -> Result<Option<KernelDefinition>, LaunchError> {
    let arithmetic = |elem: ElemType| no_arithmetic(kernel, elem).map_or(Ok(()), Err);
    let definition = match kernel {
        StandardKernel::Fill(elem) => {
            crate::with_elem!(elem, u8, T => fill_units::definition::<T>())
        }
        StandardKernel::Cast { from, to } => crate::with_elem!(
            from, bool, S => crate::with_elem!(to, bool, D => cast_units::definition::<S, D>())
        ),
        StandardKernel::Add(elem) | StandardKernel::Mul(elem) => {
            arithmetic(elem)?;
            let multiply = matches!(kernel, StandardKernel::Mul(_));
            crate::with_elem!(elem, u8, u8, T => binary_units::definition::<T>(multiply))
        }
        _ => return Ok(None),
    };
    let name = kernel.name();
    Ok(Some(definition.renamed(name.clone(), name)))
}

/// The kernel of [`units_definition`] built for runtime `R`, once per process.
///
/// # Errors
/// As [`units_definition`], or the runtime's build error.
pub fn units_kernel<R: Runtime>(
    kernel: StandardKernel,
) -> Result<Option<<R::Server as ComputeServer>::Kernel>, LaunchError> {
    built::<R>(kernel, UNITS, || {
        Ok(units_definition(kernel)?.map(|definition| (definition, ELEMENTWISE_CUBE_DIM)))
    })
}

/// The variant key of the units kernels ([`units_kernel`]).
const UNITS: &str = "units";

/// Built kernels by runtime and standard kernel, then by variant (`""` for the standard
/// kernel; a few per kernel, so a lookup compares them and allocates no key).
type BuiltKernels = FastMap<(TypeId, StandardKernel), Vec<(String, Box<dyn Any + Send>)>>;

/// The variant key of the lines kernels ([`lines_kernel`]).
const LINES: &str = "lines";

/// The kernel of [`lines_definition`] built for runtime `R`, once per process.
///
/// # Errors
/// The runtime's build error (`Runtime::language_kernel`).
pub fn lines_kernel<R: Runtime>(
    kernel: StandardKernel,
) -> Result<Option<<R::Server as ComputeServer>::Kernel>, LaunchError> {
    built::<R>(kernel, LINES, || {
        Ok(lines_definition(kernel).map(|definition| (definition, ELEMENTWISE_CUBE_DIM)))
    })
}

/// `kernel` built for runtime `R` from its kernel-language definition, once per process;
/// `None` for reduce-sum and matmul (see [`definition`]).
///
/// # Errors
/// As [`definition`], or the runtime's build error (`Runtime::language_kernel`).
pub fn standard_kernel<R: Runtime>(
    kernel: StandardKernel,
) -> Result<Option<<R::Server as ComputeServer>::Kernel>, LaunchError> {
    built::<R>(kernel, "", || definition(kernel))
}

/// [`standard_kernel`], with a missing kernel (reduce-sum and matmul, which each backend
/// builds from its own table) as an error naming the backend: what
/// `Runtime::standard_kernel` does for the elementwise kernels.
///
/// # Errors
/// As [`standard_kernel`], and [`LaunchError`] for a kernel the language doesn't define.
pub fn built_standard_kernel<R: Runtime>(
    kernel: StandardKernel,
) -> Result<<R::Server as ComputeServer>::Kernel, LaunchError> {
    standard_kernel::<R>(kernel)?.ok_or_else(|| {
        LaunchError::unknown(format!(
            "the {} backend has no `{kernel}` kernel",
            R::name()
        ))
    })
}

/// Variant `variant` of the reduce-sum of `elem`, split among units as `split` (the
/// backend's table says which split each of its variants is), built for runtime `R` once
/// per process. Named after the kernel (`reduce_sum_f32`) for the default variant, after
/// the kernel and the variant (`reduce_sum_f32/b256v4`) for the others.
///
/// # Errors
/// As [`reduce_sum_definition`], or the runtime's build error.
pub fn reduce_sum_kernel<R: Runtime>(
    elem: ElemType,
    variant: &str,
    split: RowSplit,
) -> Result<<R::Server as ComputeServer>::Kernel, LaunchError> {
    built_variant::<R>(StandardKernel::ReduceSum(elem), variant, |name| {
        reduce_sum_definition(elem, split, name)
    })
}

/// Variant `variant` of the matmul of `elem`, tiled as `tiling` (the backend's table says
/// which tiling each of its variants is), built for runtime `R` once per process. Named
/// after the kernel (`matmul_f32`) for the default variant, after the kernel and the
/// variant (`matmul_f32/b64x64k8t4x4`) for the others.
///
/// # Errors
/// As [`matmul_definition`], or the runtime's build error.
pub fn matmul_kernel<R: Runtime>(
    elem: ElemType,
    variant: &str,
    tiling: MatmulTiling,
) -> Result<<R::Server as ComputeServer>::Kernel, LaunchError> {
    built_variant::<R>(StandardKernel::Matmul(elem), variant, |name| {
        matmul_definition(elem, tiling, name)
    })
}

/// Variant `variant` of `kernel`, defined by `define` from its name (the kernel's for the
/// default variant, `kernel/variant` for the others), built for `R` once per process.
fn built_variant<R: Runtime>(
    kernel: StandardKernel,
    variant: &str,
    define: impl FnOnce(&str) -> Result<(KernelDefinition, CubeDim), LaunchError>,
) -> Result<<R::Server as ComputeServer>::Kernel, LaunchError> {
    let built = built::<R>(kernel, variant, || {
        let name = if variant == StandardVariant::DEFAULT {
            kernel.name()
        } else {
            format!("{kernel}/{variant}")
        };
        define(&name).map(Some)
    })?;
    built.ok_or_else(|| LaunchError::unknown(format!("`{kernel}` has no kernel")))
}

/// The kernel `define` describes, built for `R` once per process and cached under
/// (`R`, `kernel`, `variant`).
fn built<R: Runtime>(
    kernel: StandardKernel,
    variant: &str,
    define: impl FnOnce() -> Result<Option<(KernelDefinition, CubeDim)>, LaunchError>,
) -> Result<Option<<R::Server as ComputeServer>::Kernel>, LaunchError> {
    static BUILT: OnceLock<Mutex<BuiltKernels>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(FastMap::default()));
    let key = (TypeId::of::<R>(), kernel);
    let lock = || built.lock().unwrap_or_else(PoisonError::into_inner);
    let found = lock().get(&key).and_then(|variants| {
        variants
            .iter()
            .find(|(name, _)| name == variant)
            .and_then(|(_, kernel)| kernel.downcast_ref::<<R::Server as ComputeServer>::Kernel>())
            .cloned()
    });
    if let Some(found) = found {
        return Ok(Some(found));
    }
    let Some((definition, cube_dim)) = define()? else {
        return Ok(None);
    };
    // Built outside the lock: an NVRTC compile takes a while; two threads building the
    // same kernel at once build it twice (the first one built is kept).
    let compiled = R::language_kernel(&definition, cube_dim)?;
    let mut built = lock();
    let variants = built.entry(key).or_default();
    if !variants.iter().any(|(name, _)| name == variant) {
        variants.push((variant.to_string(), Box::new(compiled.clone())));
    }
    drop(built);
    Ok(Some(compiled))
}
