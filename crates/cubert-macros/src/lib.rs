//! The `#[kernel]` attribute of cubert's kernel language.
//!
//! `#[kernel]` on a function writes it out as a module of the same name with `definition`
//! and `launch` functions, and the body twice: once as native Rust for the CPU, once as an
//! expansion that records the kernel's IR for code generators. The body is checked against
//! the language first; an unsupported construct is a compile error at its span that says
//! what is supported.
//!
//! Modules: `signature` (the parameters and what they become), `body` (statements and
//! expressions in both forms), `exclusive` (whether units touch only their own elements:
//! the CPU's fast path), `plain_reads` (which read-only arrays the other kernels may read
//! without atomics), `output` (the generated module).

mod body;
mod exclusive;
mod output;
mod plain_reads;
mod signature;

use proc_macro::TokenStream;

/// Makes a function a kernel of cubert's kernel language; see the `cubert::lang` docs.
///
/// `#[kernel(crate = path)]` names the crate the generated code refers to (default
/// `::cubert`; it must provide `lang`, `Runtime`, `ComputeClient`, `CubeCount`, `CubeDim`,
/// `KernelArguments`, `Handle` and `LaunchError` at its root).
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match output::expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
