//! The module `#[kernel]` writes in place of the function.
//!
//! For `fn saxpy<F: Float>(a: F, x: &Array<F>, y: &mut Array<F>)` it writes `mod saxpy`
//! with a marker type `Kernel<F>` (its `TypeId` keys client caches), `native` (the body as
//! Rust, run per unit by the CPU backend), `expand` (the body recording IR), `definition`
//! (both, for one specialization) and `launch` (generic over the runtime).

use crate::body::{Context, Mode};
use crate::exclusive;
use crate::signature::{self, ParamKind};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::collections::HashSet;
use syn::ItemFn;

/// Reads the `#[kernel(...)]` arguments: only `crate = path`.
fn crate_path(attr: TokenStream) -> syn::Result<TokenStream> {
    if attr.is_empty() {
        return Ok(quote!(::cubert));
    }
    let mut path = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            let value: syn::Path = meta.value()?.parse()?;
            path = Some(quote!(#value));
            Ok(())
        } else {
            Err(meta.error("`#[kernel]` takes only `crate = path`"))
        }
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(path.unwrap_or_else(|| quote!(::cubert)))
}

/// The whole output for one `#[kernel]` function.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let krate = crate_path(attr)?;
    let lang = quote!(#krate::lang);
    let mut function: ItemFn = syn::parse2(item)?;
    let signature = signature::read(&mut function)?;
    let name = &function.sig.ident;
    let vis = &function.vis;
    let docs: Vec<_> = function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .collect();
    let comptime: HashSet<String> = signature
        .params
        .iter()
        .filter(|param| matches!(param.kind, ParamKind::Comptime(_)))
        .map(|param| param.name.to_string())
        .collect();
    let type_params: HashSet<String> = signature
        .type_params
        .iter()
        .map(ToString::to_string)
        .collect();
    let context = |mode| Context {
        mode,
        lang: lang.clone(),
        comptime: comptime.clone(),
        type_params: type_params.clone(),
        shared_sites: std::cell::Cell::new(0),
        exclusive: false,
    };
    let native_body = context(Mode::Native).block(&function.block)?;
    let array_names: HashSet<String> = signature
        .params
        .iter()
        .filter(|param| matches!(param.kind, ParamKind::Array { .. }))
        .map(|param| param.name.to_string())
        .collect();
    let read_only_names: HashSet<String> = signature
        .params
        .iter()
        .filter(|param| matches!(param.kind, ParamKind::Array { mutable: false, .. }))
        .map(|param| param.name.to_string())
        .collect();
    let param_names: HashSet<String> = signature
        .params
        .iter()
        .map(|param| param.name.to_string())
        .collect();
    let has_tensors = signature
        .params
        .iter()
        .any(|param| matches!(param.kind, ParamKind::Tensor { .. }));
    // Scalars never reassigned and compile-time values: what a grid-stride loop's end may
    // name, so the CPU can evaluate it from the launch's arguments.
    let fixed_names: HashSet<String> = signature
        .params
        .iter()
        .filter(|param| match param.kind {
            ParamKind::Scalar(_) => !param.mutable,
            ParamKind::Comptime(_) => true,
            _ => false,
        })
        .map(|param| param.name.to_string())
        .collect();
    let exclusive = exclusive::analyse(
        &function.block,
        &exclusive::Params {
            arrays: &array_names,
            read_only: &read_only_names,
            all: &param_names,
            fixed: &fixed_names,
        },
        has_tensors,
    );
    let exclusive_body = match exclusive {
        Some(_) => Context {
            exclusive: true,
            ..context(Mode::Native)
        }
        .block(&function.block)?,
        None => TokenStream::new(),
    };
    let expand_body = context(Mode::Expand).block(&function.block)?;
    let is_exclusive = exclusive.is_some();
    // A kernel that isn't exclusive reads its read-only arrays plainly where the launch's
    // buffers allow (`crate::plain_reads`); an exclusive one does in its exclusive body.
    let plainly_read = if is_exclusive {
        HashSet::new()
    } else {
        crate::plain_reads::plainly_read(&function.block, &read_only_names)
    };

    let (impl_generics, _, where_clause) = signature.generics.split_for_impl();
    let mut launch_generics = signature.generics.clone();
    launch_generics
        .params
        .push(syn::parse_quote!(__CubertRuntime: #krate::Runtime));
    let (launch_generics, _, _) = launch_generics.split_for_impl();
    let type_args = &signature.type_params;
    let turbofish = quote!(::<#(#type_args),*>);
    let launch_turbofish = quote!(::<#(#type_args,)* __CubertRuntime>);

    // Parameter handling, in declaration order.
    let mut native_setup = TokenStream::new();
    let mut reading_setup = TokenStream::new();
    let mut reading_params = Vec::new();
    let mut exclusive_setup = TokenStream::new();
    let mut exclusive_params = Vec::new();
    let mut expand_setup = TokenStream::new();
    let mut comptime_params = Vec::new();
    let mut comptime_names = Vec::new();
    let mut launch_params = Vec::new();
    let mut launch_names = Vec::new();
    let mut bindings = Vec::new();
    let mut scalars = Vec::new();
    let (mut slot, mut word, mut tensor) = (0usize, 0usize, 0usize);
    // Tensor metadata follows the scalars in the info words.
    let scalar_count = signature
        .params
        .iter()
        .filter(|param| matches!(param.kind, ParamKind::Scalar(_)))
        .count();
    let mut tensor_args = Vec::new();
    for param in &signature.params {
        let ident = &param.name;
        let mutability = param.mutable.then(|| quote!(mut));
        match &param.kind {
            ParamKind::Array { elem, mutable } => {
                let native_mut = mutable.then(|| quote!(mut));
                native_setup.extend(quote! {
                    let #native_mut #ident = __cubert_args.array::<#elem>(#slot);
                });
                let read_plainly = plainly_read.contains(&ident.to_string());
                // SAFETY (of the generated block): `native_reading` runs only for launches
                // `plain_reads_allowed` accepted, which checks this array's alignment and that
                // no written array overlaps it; the kernel never writes it (`&Array`, no
                // atomic targets it: `crate::plain_reads`).
                reading_setup.extend(if read_plainly {
                    quote! {
                        let #ident = unsafe { __cubert_args.gathered_array::<#elem>(#slot) };
                    }
                } else {
                    quote! {
                        let #native_mut #ident = __cubert_args.array::<#elem>(#slot);
                    }
                });
                reading_params.push(quote! {
                    #lang::native::ExclusiveParam {
                        slot: #slot,
                        elem_size: ::core::mem::size_of::<#elem>(),
                        written: #mutable,
                        gathered: #read_plainly,
                    }
                });
                let gathered = exclusive
                    .as_ref()
                    .is_some_and(|exclusive| exclusive.gathered.contains(&ident.to_string()));
                exclusive_setup.extend(if gathered {
                    quote! {
                        let #ident = unsafe { __cubert_args.gathered_array::<#elem>(#slot) };
                    }
                } else {
                    quote! {
                        let #native_mut #ident = unsafe { __cubert_args.exclusive_array::<#elem>(#slot) };
                    }
                });
                exclusive_params.push(quote! {
                    #lang::native::ExclusiveParam {
                        slot: #slot,
                        elem_size: ::core::mem::size_of::<#elem>(),
                        written: #mutable,
                        gathered: #gathered,
                    }
                });
                expand_setup.extend(quote! {
                    let #ident = #lang::expand::ArrayVal::<#elem>::param(#mutable);
                });
                launch_params.push(quote!(#ident: &#krate::Handle));
                launch_names.push(quote!(#ident));
                bindings.push(quote!(#ident.clone().binding()));
                slot += 1;
            }
            ParamKind::Tensor { elem, mutable } => {
                let native_mut = mutable.then(|| quote!(mut));
                let setup = quote! {
                    let #native_mut #ident = #lang::native::Tensor::<#elem>::param(
                        __cubert_args, #slot, #tensor, #scalar_count,
                    );
                };
                native_setup.extend(setup.clone());
                reading_setup.extend(setup);
                reading_params.push(quote! {
                    #lang::native::ExclusiveParam {
                        slot: #slot,
                        elem_size: ::core::mem::size_of::<#elem>(),
                        written: #mutable,
                        gathered: false,
                    }
                });
                expand_setup.extend(quote! {
                    let #ident = #lang::expand::TensorVal::<#elem>::param(#mutable);
                });
                launch_params.push(quote!(#ident: &#krate::TensorArg<'_>));
                launch_names.push(quote!(#ident));
                bindings.push(quote!(#ident.handle.clone().binding()));
                tensor_args.push(ident.clone());
                slot += 1;
                tensor += 1;
            }
            ParamKind::Scalar(ty) => {
                let read = quote! {
                    let #mutability #ident: #ty = __cubert_args.scalar::<#ty>(#word);
                };
                native_setup.extend(read.clone());
                reading_setup.extend(read.clone());
                exclusive_setup.extend(read);
                // A `mut` parameter becomes a variable the body can assign.
                let label = ident.to_string();
                expand_setup.extend(if param.mutable {
                    quote! {
                        let mut #ident = #lang::expand::bind(
                            #lang::expand::scalar_param::<#ty>(),
                            #label,
                        );
                    }
                } else {
                    quote! { let #ident = #lang::expand::scalar_param::<#ty>(); }
                });
                launch_params.push(quote!(#ident: #ty));
                launch_names.push(quote!(#ident));
                scalars.push(quote!(<#ty as #lang::Scalar>::to_bits(#ident)));
                word += 1;
            }
            ParamKind::Comptime(ty) => {
                comptime_params.push(quote!(#ident: #ty));
                comptime_names.push(ident.clone());
                launch_params.push(quote!(#ident: #ty));
                launch_names.push(quote!(#ident));
            }
        }
    }
    let comptime_bits: Vec<_> = signature
        .params
        .iter()
        .filter_map(|param| match &param.kind {
            ParamKind::Comptime(ty) => {
                let ident = &param.name;
                Some(quote!(<#ty as #lang::Scalar>::to_bits(#ident)))
            }
            _ => None,
        })
        .collect();
    let label = name.to_string();
    let launch_doc = format!(
        "Launches `{label}` on `client`: `cube_count` cubes of `cube_dim` units, with the \
         kernel's arguments in order (arrays as handles).\n\n# Errors\nA `LaunchError` naming \
         the kernel if the backend can't build it (its code generator rejects the IR, the \
         compile fails) or the launch is refused (cube dim, cube count, bindings)."
    );
    let launch_unchecked_doc = format!(
        "Launches `{label}` as [`launch`] does, without bounds checks (unless \
         `[compilation] bounds_check` asks for them): the fastest code, for callers that have \
         checked the arguments.\n\n# Errors\nAs [`launch`].\n\n# Safety\nWith these \
         arguments and this grid, every access the kernel makes (arrays, shared arrays, \
         lines, fragments, copies) must be in bounds, and the kernel must terminate."
    );
    let marker = format_ident!("Kernel");
    // Kernels whose units touch only their own elements also get a body over plain
    // accesses, run where the launch's ranges allow (`crate::exclusive`).
    let (exclusive_fn, exclusive_branch) = match exclusive {
        Some(exclusive::Exclusive {
            width,
            grid_stride_ends,
            ..
        }) => {
            let native = context(Mode::Native);
            let ends = grid_stride_ends
                .iter()
                .map(|end| native.expr(end))
                .collect::<syn::Result<Vec<_>>>()?;
            let count = ends.len();
            (
                quote! {
                    /// The end of every grid-stride loop, from the parameters alone (the
                    /// analysis allowed nothing else there).
                    #[inline(always)]
                    fn grid_stride_ends #impl_generics (
                        __cubert_args: &#lang::native::Args<'_>,
                        #(#comptime_params),*
                    ) -> [u32; #count] #where_clause {
                        #native_setup
                        [#(#ends),*]
                    }

                    /// The body over plain accesses: runs one unit of a cube run that
                    /// `exclusive_cubes` accepted (the macro proved every array access is at
                    /// the unit's own line).
                    #[inline(always)]
                    #[allow(clippy::undocumented_unsafe_blocks)]
                    fn native_exclusive #impl_generics (
                        __cubert_unit: &#lang::native::ExclusiveUnit,
                        __cubert_args: &#lang::native::Args<'_>,
                        #(#comptime_params),*
                    ) #where_clause {
                        #exclusive_setup
                        #exclusive_body
                    }
                },
                quote! {
                    else if let ::core::option::Option::Some(run) = #lang::native::exclusive_cubes(
                        first, cubes, args, #width, &[#(#exclusive_params),*],
                        &grid_stride_ends #turbofish (args, #(#comptime_names),*),
                    ) {
                        run.run(first, args, #width, |unit, args| {
                            native_exclusive #turbofish (unit, args, #(#comptime_names),*)
                        });
                        // Units past the shortest array or a grid-stride loop's end.
                        run.run_tail(first, args, |unit, args| {
                            native #turbofish (unit, args, #(#comptime_names),*)
                        });
                    }
                },
            )
        }
        None => (TokenStream::new(), TokenStream::new()),
    };
    // Kernels with arrays read plainly also get a body over those (`crate::plain_reads`),
    // run where the launch's buffers allow: a loop of cubes with either body.
    let cube_loop = |body: &syn::Ident, cooperative: bool| {
        let run = if cooperative {
            quote!(run_cube_cooperative)
        } else {
            quote!(run_cube)
        };
        quote! {
            for step in 0..cubes {
                cube.cube_pos.0 = first.cube_pos.0.wrapping_add(step);
                #lang::native::#run(&cube, args, |unit| {
                    #body #turbofish (unit, args, #(#comptime_names),*)
                });
            }
        }
    };
    let native_ident = format_ident!("native");
    let reading_ident = format_ident!("native_reading");
    let (reading_fn, cooperative_loop, checked_loop) = if plainly_read.is_empty() {
        (
            TokenStream::new(),
            cube_loop(&native_ident, true),
            cube_loop(&native_ident, false),
        )
    } else {
        let (plain_cooperative, cooperative) = (
            cube_loop(&reading_ident, true),
            cube_loop(&native_ident, true),
        );
        let (plain_checked, checked) = (
            cube_loop(&reading_ident, false),
            cube_loop(&native_ident, false),
        );
        let allowed = quote! {
            #lang::native::plain_reads_allowed(args, &[#(#reading_params),*])
        };
        (
            quote! {
                /// The body with the read-only arrays read plainly: runs one unit of a launch
                /// `plain_reads_allowed` accepted (no array the kernel writes overlaps them).
                #[inline]
                #[allow(clippy::undocumented_unsafe_blocks)]
                fn native_reading #impl_generics (
                    __cubert_unit: &#lang::native::Unit,
                    __cubert_args: &#lang::native::Args<'_>,
                    #(#comptime_params),*
                ) #where_clause {
                    #reading_setup
                    #native_body
                }

                /// The cubes `first ..= first + cubes - 1` of a launch `plain_reads_allowed`
                /// accepted, the body written into the loop over the units, compiled for
                /// AVX2 and FMA: 8 floats per vector instruction, `mul_add` one instruction
                /// (the baseline x86-64 body has 4 and a library call).
                ///
                /// # Safety
                /// The CPU must have AVX2 and FMA.
                #[cfg(target_arch = "x86_64")]
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::undocumented_unsafe_blocks)]
                unsafe fn native_reading_avx2 #impl_generics (
                    first: &#lang::native::Unit,
                    cubes: u32,
                    args: &#lang::native::Args<'_>,
                    #(#comptime_params),*
                ) #where_clause {
                    let mut cube = *first;
                    for step in 0..cubes {
                        cube.cube_pos.0 = first.cube_pos.0.wrapping_add(step);
                        #lang::native::run_cube_by_unit(&cube, args, |__cubert_unit| {
                            let __cubert_args = args;
                            #reading_setup
                            #native_body
                        });
                    }
                }
            },
            quote!(if #allowed { #plain_cooperative } else { #cooperative }),
            quote! {
                if #allowed {
                    #[cfg(target_arch = "x86_64")]
                    if ::std::arch::is_x86_feature_detected!("avx2")
                        && ::std::arch::is_x86_feature_detected!("fma")
                    {
                        // SAFETY: the CPU has AVX2 and FMA (detected above).
                        unsafe { native_reading_avx2 #turbofish (first, cubes, args, #(#comptime_names),*) };
                        return;
                    }
                    #plain_checked
                } else {
                    #checked
                }
            },
        )
    };
    // The signature's types as the user wrote them, resolved in the user's scope: an
    // `Array` or `Float` not imported is the error rustc would give for a plain function,
    // and the imports the signature needs count as used.
    let signature_types: Vec<_> = function
        .sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            syn::FnArg::Typed(typed) => Some(typed.ty.clone()),
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    let phantom = quote!(::core::marker::PhantomData<fn() -> (#(#type_args,)*)>);

    Ok(quote! {
        #(#docs)*
        #[allow(non_snake_case)]
        #vis mod #name {
            #![allow(
                unused_imports,
                unused_mut,
                unused_variables,
                unused_parens,
                unused_braces,
                unreachable_code,
                clippy::all
            )]
            use super::*;

            /// The kernel's signature as written (never called; see `signature_types`).
            #[allow(dead_code, clippy::all)]
            fn signature #impl_generics (#(_: #signature_types),*) #where_clause {}

            /// Whether the CPU runs this kernel's exclusive fast path where a launch's ranges
            /// allow it: the macro proved each unit touches only its own elements (reading
            /// its read-only arrays anywhere).
            pub const IS_EXCLUSIVE: bool = #is_exclusive;

            /// The kernel's marker type: its `TypeId` (with the generic types) keys caches.
            pub struct #marker #impl_generics (#phantom) #where_clause;

            /// The body as native Rust: runs one unit.
            #[inline]
            fn native #impl_generics (
                __cubert_unit: &#lang::native::Unit,
                __cubert_args: &#lang::native::Args<'_>,
                #(#comptime_params),*
            ) #where_clause {
                #native_setup
                #native_body
            }

            #exclusive_fn

            #reading_fn

            /// The body as an expansion: records the IR.
            fn expand #impl_generics (#(#comptime_params),*) #where_clause {
                #expand_setup
                #expand_body
            }

            /// The kernel specialized for these generic types and compile-time values.
            pub fn definition #impl_generics (#(#comptime_params),*)
                -> #lang::KernelDefinition #where_clause
            {
                let types: ::std::vec::Vec<&str> =
                    ::std::vec![#(::std::any::type_name::<#type_args>()),*];
                let comptime: ::std::vec::Vec<::std::string::String> =
                    ::std::vec![#(::std::format!("{:?}", #comptime_names)),*];
                let id = ::std::format!("{}<{}>({})", #label, types.join(","), comptime.join(","));
                let ir = #lang::expand::record(#label, || expand #turbofish (#(#comptime_names),*));
                // Units that cooperate (shared memory, barriers, plane operations) run as
                // coroutines; the others one after the other.
                let cooperative = ir.as_ref().is_ok_and(|kernel| kernel.is_cooperative());
                let native: #lang::NativeKernel = ::std::sync::Arc::new(
                    move |first: &#lang::native::Unit, cubes: u32, args: &#lang::native::Args<'_>| {
                        let mut cube = *first;
                        if cooperative {
                            #cooperative_loop
                        } #exclusive_branch else {
                            #checked_loop
                        }
                    },
                );
                #lang::KernelDefinition::new(#label, id, ir, native)
            }

            #[doc = #launch_doc]
            #[allow(clippy::too_many_arguments)]
            pub fn launch #launch_generics (
                client: &#krate::ComputeClient<__CubertRuntime>,
                cube_count: #krate::CubeCount,
                cube_dim: #krate::CubeDim,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #krate::LaunchError>
            #where_clause
            {
                launch_in_mode #launch_turbofish (client, cube_count, cube_dim, false, #(#launch_names),*)
            }

            #[doc = #launch_unchecked_doc]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn launch_unchecked #launch_generics (
                client: &#krate::ComputeClient<__CubertRuntime>,
                cube_count: #krate::CubeCount,
                cube_dim: #krate::CubeDim,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #krate::LaunchError>
            #where_clause
            {
                launch_in_mode #launch_turbofish (client, cube_count, cube_dim, true, #(#launch_names),*)
            }

            /// `launch` (checked) or `launch_unchecked` (`unchecked`): private, so that only
            /// `launch_unchecked`, whose caller takes on its safety contract, passes `true`.
            #[allow(clippy::too_many_arguments)]
            fn launch_in_mode #launch_generics (
                client: &#krate::ComputeClient<__CubertRuntime>,
                cube_count: #krate::CubeCount,
                cube_dim: #krate::CubeDim,
                unchecked: bool,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #krate::LaunchError>
            #where_clause
            {
                let key = #lang::KernelKey::new::<#marker #turbofish>(::std::vec![#(#comptime_bits),*]);
                let mut arguments = #krate::KernelArguments::new()
                    #(.with_buffer(#bindings))*
                    #(.with_scalar(#scalars))*;
                for word in #krate::TensorArg::metadata(#scalar_count, &[#(#tensor_args),*])? {
                    arguments = arguments.with_scalar(word);
                }
                let definition = || definition #turbofish (#(#comptime_names),*);
                if unchecked {
                    // SAFETY: only `launch_unchecked` gets here, whose caller guarantees
                    // that the kernel accesses nothing out of bounds and terminates.
                    unsafe {
                        client.launch_language_unchecked(key, definition, cube_dim, cube_count, arguments)
                    }
                } else {
                    client.launch_language(key, definition, cube_dim, cube_count, arguments)
                }
            }
        }
    })
}
