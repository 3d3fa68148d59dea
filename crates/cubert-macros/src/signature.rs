//! A kernel's signature: its generic parameters and what each parameter becomes.

use syn::spanned::Spanned;
use syn::{FnArg, GenericParam, Ident, ItemFn, Pat, ReturnType, Type};

/// What a kernel parameter is.
pub enum ParamKind {
    /// `&Array<T>` (read-only) or `&mut Array<T>`.
    Array { elem: Type, mutable: bool },
    /// `&Tensor<T>` or `&mut Tensor<T>`: an array with a shape and strides.
    Tensor { elem: Type, mutable: bool },
    /// A scalar passed at launch.
    Scalar(Type),
    /// `#[comptime] name: T`: specializes the kernel.
    Comptime(Type),
}

/// One parameter.
pub struct Param {
    pub name: Ident,
    pub mutable: bool,
    pub kind: ParamKind,
}

/// The parts of the signature the generated code needs.
pub struct Signature {
    pub generics: syn::Generics,
    /// The names of the generic type parameters, in order.
    pub type_params: Vec<Ident>,
    pub params: Vec<Param>,
}

const SIGNATURE_HELP: &str = "a kernel's parameters are scalars (`a: F`, `n: u32`), arrays \
     (`x: &Array<F>`, `y: &mut Array<F>`), tensors (`t: &Tensor<F>`, `&mut Tensor<F>`) and \
     compile-time values (`#[comptime] block: u32`)";

/// Reads and checks the signature of `function`.
pub fn read(function: &mut ItemFn) -> syn::Result<Signature> {
    let sig = &mut function.sig;
    if let Some(token) = &sig.asyncness {
        return Err(syn::Error::new(token.span, "a kernel can't be `async`"));
    }
    if let Some(token) = &sig.unsafety {
        return Err(syn::Error::new(token.span, "a kernel can't be `unsafe`"));
    }
    if let Some(token) = &sig.constness {
        return Err(syn::Error::new(token.span, "a kernel can't be `const`"));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        return Err(syn::Error::new(
            ty.span(),
            "a kernel returns nothing: it writes its results to `&mut Array` parameters",
        ));
    }
    let mut type_params = Vec::new();
    for param in &sig.generics.params {
        match param {
            GenericParam::Type(ty) => type_params.push(ty.ident.clone()),
            GenericParam::Lifetime(lifetime) => {
                return Err(syn::Error::new(
                    lifetime.span(),
                    "a kernel has no lifetime parameters",
                ));
            }
            GenericParam::Const(constant) => {
                return Err(syn::Error::new(
                    constant.span(),
                    "use a `#[comptime]` parameter instead of a const generic",
                ));
            }
        }
    }
    let mut params = Vec::new();
    for input in &mut sig.inputs {
        let FnArg::Typed(typed) = input else {
            return Err(syn::Error::new(input.span(), "a kernel takes no `self`"));
        };
        let comptime = take_comptime(&mut typed.attrs)?;
        let (name, mutable) = match &*typed.pat {
            Pat::Ident(ident) if ident.by_ref.is_none() && ident.subpat.is_none() => {
                (ident.ident.clone(), ident.mutability.is_some())
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "a kernel parameter is a plain name (`x`, `mut x`)",
                ));
            }
        };
        let kind = if comptime {
            ParamKind::Comptime((*typed.ty).clone())
        } else {
            classify(&typed.ty)?
        };
        params.push(Param {
            name,
            mutable,
            kind,
        });
    }
    Ok(Signature {
        generics: sig.generics.clone(),
        type_params,
        params,
    })
}

fn take_comptime(attrs: &mut Vec<syn::Attribute>) -> syn::Result<bool> {
    let mut comptime = false;
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        if attr.path().is_ident("comptime") {
            comptime = true;
        } else {
            return Err(syn::Error::new(
                attr.span(),
                "the only attribute a kernel parameter takes is `#[comptime]`",
            ));
        }
    }
    attrs.append(&mut kept);
    Ok(comptime)
}

fn classify(ty: &Type) -> syn::Result<ParamKind> {
    match ty {
        Type::Reference(reference) => {
            let mutable = reference.mutability.is_some();
            if let Some(elem) = generic_elem(&reference.elem, "Array") {
                return Ok(ParamKind::Array { elem, mutable });
            }
            if let Some(elem) = generic_elem(&reference.elem, "Tensor") {
                return Ok(ParamKind::Tensor { elem, mutable });
            }
            Err(syn::Error::new(ty.span(), SIGNATURE_HELP))
        }
        Type::Path(path) if path.qself.is_none() && path.path.segments.len() == 1 => {
            if generic_elem(ty, "Array").is_some() || generic_elem(ty, "Tensor").is_some() {
                return Err(syn::Error::new(
                    ty.span(),
                    "take an array by reference: `&Array<T>` or `&mut Array<T>` (a tensor: \
                     `&Tensor<T>`)",
                ));
            }
            Ok(ParamKind::Scalar(ty.clone()))
        }
        _ => Err(syn::Error::new(ty.span(), SIGNATURE_HELP)),
    }
}

/// `T` if `ty` is `{name}<T>` (`Array<T>`, `Tensor<T>`).
fn generic_elem(ty: &Type, name: &str) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let segment = path.path.segments.last()?;
    if segment.ident != name {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(elem) if args.args.len() == 1 => Some(elem.clone()),
        _ => None,
    }
}
