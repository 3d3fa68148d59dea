//! A kernel's body in its two forms: native Rust and the expansion that records IR.
//!
//! One walk over the parsed body checks every construct against the language and writes
//! it out for the [`Mode`] asked for. Operations become calls of the function of the same
//! name in `lang::native` or `lang::expand` (`a + b` is `add(a, b)`), so the two forms
//! differ only where Rust's control flow can't be recorded as it runs: in the expansion,
//! `if`, `for`, `while`, `loop`, `&&` and `||` become calls that take closures, and `break`,
//! `continue` and `return` become recorded instructions.

use crate::exclusive;
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use std::cell::Cell;
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Lit, Pat, Stmt, Type, UnOp};

/// Which form to write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Rust the CPU runs.
    Native,
    /// Rust that records the IR.
    Expand,
}

/// What the walk needs to know about the kernel.
pub struct Context {
    pub mode: Mode,
    /// The path of the `lang` module (`::cubert::lang`).
    pub lang: TokenStream,
    /// Names of `#[comptime]` parameters.
    pub comptime: HashSet<String>,
    /// Names of the generic type parameters.
    pub type_params: HashSet<String>,
    /// The next shared-memory declaration site (numbered in source order, the same in
    /// both forms).
    pub shared_sites: Cell<usize>,
    /// Writing the exclusive body (CPU fast path): grid-stride loops run their first
    /// iteration only, which is all they run on the grids that body is used for.
    pub exclusive: bool,
}

const SCALAR_TYPES: [&str; 15] = [
    "e4m3", "e5m2", "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32",
    "u64", "bool",
];

const BUILTINS: [(&str, &str, &str); 22] = [
    ("ABSOLUTE_POS", "absolute_pos", "AbsolutePos"),
    ("ABSOLUTE_POS_X", "absolute_pos_x", "AbsolutePosX"),
    ("ABSOLUTE_POS_Y", "absolute_pos_y", "AbsolutePosY"),
    ("ABSOLUTE_POS_Z", "absolute_pos_z", "AbsolutePosZ"),
    ("UNIT_POS", "unit_pos", "UnitPos"),
    ("UNIT_POS_X", "unit_pos_x", "UnitPosX"),
    ("UNIT_POS_Y", "unit_pos_y", "UnitPosY"),
    ("UNIT_POS_Z", "unit_pos_z", "UnitPosZ"),
    ("CUBE_POS", "cube_pos", "CubePos"),
    ("CUBE_POS_X", "cube_pos_x", "CubePosX"),
    ("CUBE_POS_Y", "cube_pos_y", "CubePosY"),
    ("CUBE_POS_Z", "cube_pos_z", "CubePosZ"),
    ("CUBE_DIM", "cube_dim", "CubeDim"),
    ("CUBE_DIM_X", "cube_dim_x", "CubeDimX"),
    ("CUBE_DIM_Y", "cube_dim_y", "CubeDimY"),
    ("CUBE_DIM_Z", "cube_dim_z", "CubeDimZ"),
    ("CUBE_COUNT", "cube_count", "CubeCount"),
    ("CUBE_COUNT_X", "cube_count_x", "CubeCountX"),
    ("CUBE_COUNT_Y", "cube_count_y", "CubeCountY"),
    ("CUBE_COUNT_Z", "cube_count_z", "CubeCountZ"),
    ("PLANE_DIM", "plane_dim", "PlaneDim"),
    ("UNIT_POS_PLANE", "unit_pos_plane", "UnitPosPlane"),
];

/// Plane operations: `(name, arguments)`. Natively each also takes the running unit.
const PLANE_OPS: [(&str, usize); 7] = [
    ("plane_sum", 1),
    ("plane_min", 1),
    ("plane_max", 1),
    ("plane_all", 1),
    ("plane_any", 1),
    ("plane_shuffle", 2),
    ("plane_broadcast", 2),
];

/// Atomic operations: `(name, arguments)`; the first argument is an array variable.
pub(crate) const ATOMIC_OPS: [(&str, usize); 5] = [
    ("atomic_add", 3),
    ("atomic_max", 3),
    ("atomic_min", 3),
    ("atomic_exchange", 3),
    ("atomic_compare_exchange", 4),
];

/// Methods a kernel may call on a value.
const METHODS: [&str; 26] = [
    "len", "is_empty", "rank", "shape", "stride", "sqrt", "exp", "ln", "log2", "log10", "sin",
    "cos", "tan", "tanh", "erf", "floor", "ceil", "round", "trunc", "recip", "abs", "powf",
    "mul_add", "min", "max", "is_nan",
];

const SUPPORTED: &str = "kernels support `let`, `if`/`else`, `for` over `a..b`, `a..=b` and \
     `(a..b).step_by(s)`, `while`, `loop`, `break`, `continue`, `return`, arithmetic, \
     comparisons, `&&`, `||`, bit operations, `as` casts, indexing, `select(c, a, b)`, \
     `T::new(x)` and the float methods, local arrays `[v; N]`, lines `x.line::<N>(i)` and \
     `y.set_line(i, v)`, shared arrays \
     `SharedMemory::<T>::new(len)`, `sync_cube()`, the plane operations (`plane_sum`, \
     `plane_min`, `plane_max`, `plane_all`, `plane_any`, `plane_shuffle`, `plane_broadcast`, \
     `plane_mma(&mut acc, a, b)`, `plane_load_a(&tile, start, stride)`, \
     `plane_load_b(&tile, start, stride)`), asynchronous copies \
     (`copy_line_async::<N>(&mut tile, i, x, j, valid)`, `commit_async_copies()`, \
     `wait_async_copies(n)`), the plane group's multiply-accumulate \
     (`plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, stride, n, k)`, \
     `plane_group_mma_async(..)` with the same arguments, `plane_group_mma_wait(n)`), \
     the atomics (`atomic_add`, `atomic_max`, `atomic_min`, `atomic_exchange`, \
     `atomic_compare_exchange`), and the builtins (`ABSOLUTE_POS`, `UNIT_POS`, `CUBE_POS`, \
     `CUBE_DIM`, `CUBE_COUNT`, with `_X`/`_Y`/`_Z`, `PLANE_DIM`, `UNIT_POS_PLANE`)";

fn unsupported(span: Span, what: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!("{what} isn't supported in a kernel: {SUPPORTED}"),
    )
}

impl Context {
    fn module(&self) -> TokenStream {
        let lang = &self.lang;
        match self.mode {
            Mode::Native => quote!(#lang::native),
            Mode::Expand => quote!(#lang::expand),
        }
    }

    /// The statements of `block`, without braces.
    pub fn block(&self, block: &Block) -> syn::Result<TokenStream> {
        let mut out = TokenStream::new();
        for stmt in &block.stmts {
            if self.mode == Mode::Expand {
                // The statement's Rust line, for generators to note next to its code
                // (`line!()` at the statement's span gives the user's line).
                let m = self.module();
                out.extend(quote_spanned!(stmt.span()=>
                    #m::source_line(::core::file!(), ::core::line!());
                ));
            }
            out.extend(self.stmt(stmt)?);
        }
        Ok(out)
    }

    fn stmt(&self, stmt: &Stmt) -> syn::Result<TokenStream> {
        match stmt {
            Stmt::Local(local) => self.local(local),
            Stmt::Expr(expr, _) => {
                let tokens = self.statement_expr(expr)?;
                Ok(quote!(#tokens;))
            }
            Stmt::Item(item) => Err(unsupported(
                item.span(),
                "an item (`fn`, `struct`, `use`, ...)",
            )),
            Stmt::Macro(mac) => Err(unsupported(mac.span(), "a macro call")),
        }
    }

    fn local(&self, local: &syn::Local) -> syn::Result<TokenStream> {
        let m = self.module();
        let (pat, ty) = match &local.pat {
            Pat::Type(typed) => (&*typed.pat, Some(&*typed.ty)),
            pat => (pat, None),
        };
        let Pat::Ident(ident) = pat else {
            return Err(unsupported(pat.span(), "this pattern (use a plain name)"));
        };
        if ident.by_ref.is_some() || ident.subpat.is_some() {
            return Err(unsupported(pat.span(), "this pattern (use a plain name)"));
        }
        let Some(init) = &local.init else {
            return Err(syn::Error::new(
                local.span(),
                "a kernel variable needs a value where it is declared (`let x = ...;`)",
            ));
        };
        if let Some((_, diverge)) = &init.diverge {
            return Err(unsupported(diverge.span(), "`let ... else`"));
        }
        let name = &ident.ident;
        let mutability = &ident.mutability;
        let value = self.expr(&init.expr)?;
        if let Some(ty) = ty {
            self.check_scalar_type(ty)?;
        }
        Ok(match (self.mode, ty) {
            (Mode::Native, Some(ty)) => quote!(let #mutability #name: #ty = #m::bind(#value);),
            (Mode::Native, None) => quote!(let #mutability #name = #m::bind(#value);),
            (Mode::Expand, Some(ty)) => {
                let label = name.to_string();
                let lang = &self.lang;
                quote!(let #mutability #name: #lang::expand::Val<#ty> = #m::bind(#value, #label);)
            }
            (Mode::Expand, None) => {
                let label = name.to_string();
                quote!(let #mutability #name = #m::bind(#value, #label);)
            }
        })
    }

    fn check_scalar_type(&self, ty: &Type) -> syn::Result<()> {
        if let Type::Path(path) = ty
            && path.qself.is_none()
            && let Some(ident) = path.path.get_ident()
        {
            let name = ident.to_string();
            if SCALAR_TYPES.contains(&name.as_str()) || self.type_params.contains(&name) {
                return Ok(());
            }
        }
        Err(syn::Error::new(
            ty.span(),
            "a kernel variable's type is a scalar type (`f32`, `u32`, `bool`, ...) or a \
             generic element type (`F`)",
        ))
    }

    /// An expression in statement position (control flow, assignments).
    fn statement_expr(&self, expr: &Expr) -> syn::Result<TokenStream> {
        let m = self.module();
        match expr {
            Expr::If(expr_if) => self.if_statement(expr_if),
            Expr::ForLoop(for_loop) => self.for_loop(for_loop),
            Expr::While(while_loop) => {
                if let Some(label) = &while_loop.label {
                    return Err(unsupported(label.span(), "a loop label"));
                }
                let cond = self.expr(&while_loop.cond)?;
                let body = self.block(&while_loop.body)?;
                Ok(match self.mode {
                    Mode::Native => quote!(while #cond { #body }),
                    Mode::Expand => quote!(#m::while_loop(|| #cond, || { #body })),
                })
            }
            Expr::Loop(expr_loop) => {
                if let Some(label) = &expr_loop.label {
                    return Err(unsupported(label.span(), "a loop label"));
                }
                let body = self.block(&expr_loop.body)?;
                Ok(match self.mode {
                    Mode::Native => quote!(loop { #body }),
                    Mode::Expand => quote!(#m::loop_(|| { #body })),
                })
            }
            Expr::Break(expr_break) => {
                if expr_break.label.is_some() || expr_break.expr.is_some() {
                    return Err(unsupported(
                        expr_break.span(),
                        "`break` with a label or a value",
                    ));
                }
                Ok(match self.mode {
                    Mode::Native => quote!(break),
                    Mode::Expand => quote!(#m::break_()),
                })
            }
            Expr::Continue(expr_continue) => {
                if expr_continue.label.is_some() {
                    return Err(unsupported(expr_continue.span(), "`continue` with a label"));
                }
                Ok(match self.mode {
                    Mode::Native => quote!(continue),
                    Mode::Expand => quote!(#m::continue_()),
                })
            }
            Expr::Return(expr_return) => {
                if let Some(value) = &expr_return.expr {
                    return Err(syn::Error::new(
                        value.span(),
                        "a kernel returns nothing: `return;` ends the unit's work",
                    ));
                }
                Ok(match self.mode {
                    Mode::Native => quote!(return),
                    Mode::Expand => quote!(#m::return_()),
                })
            }
            Expr::Assign(assign) => self.assign(&assign.left, None, &assign.right),
            Expr::Binary(binary) if compound_op(&binary.op).is_some() => {
                self.assign(&binary.left, compound_op(&binary.op), &binary.right)
            }
            Expr::Block(block) if block.label.is_none() => {
                let body = self.block(&block.block)?;
                Ok(quote!({ #body }))
            }
            other => self.expr(other),
        }
    }

    fn if_statement(&self, expr_if: &syn::ExprIf) -> syn::Result<TokenStream> {
        let m = self.module();
        let then = self.block(&expr_if.then_branch)?;
        let otherwise = match &expr_if.else_branch {
            None => TokenStream::new(),
            Some((_, branch)) => self.statement_expr(branch)?,
        };
        if self.mode == Mode::Native || self.is_comptime(&expr_if.cond) {
            // A compile-time condition is decided while expanding: one branch is recorded.
            let cond = self.comptime_or_expr(&expr_if.cond)?;
            return Ok(quote!(if #cond { #then } else { #otherwise }));
        }
        let cond = self.expr(&expr_if.cond)?;
        Ok(quote!(#m::if_else(#cond, || { #then }, || { #otherwise })))
    }

    /// The condition as plain Rust if it only reads compile-time values, else as usual.
    fn comptime_or_expr(&self, cond: &Expr) -> syn::Result<TokenStream> {
        if self.mode == Mode::Expand && self.is_comptime(cond) {
            Ok(quote!(#cond))
        } else {
            self.expr(cond)
        }
    }

    /// Whether `expr` only reads `#[comptime]` parameters and literals (so the expansion
    /// can evaluate it as Rust).
    fn is_comptime(&self, expr: &Expr) -> bool {
        match expr {
            // A compile-time parameter, or a Rust constant (a SCREAMING_CASE name that isn't
            // a builtin).
            Expr::Path(path) => path.path.get_ident().is_some_and(|ident| {
                let name = ident.to_string();
                self.comptime.contains(&name) || is_rust_constant(&name)
            }),
            Expr::Lit(_) => true,
            Expr::Paren(paren) => self.is_comptime(&paren.expr),
            Expr::Unary(unary) => self.is_comptime(&unary.expr),
            Expr::Binary(binary) => {
                compound_op(&binary.op).is_none()
                    && self.is_comptime(&binary.left)
                    && self.is_comptime(&binary.right)
            }
            _ => false,
        }
    }

    fn for_loop(&self, for_loop: &syn::ExprForLoop) -> syn::Result<TokenStream> {
        let m = self.module();
        if let Some(label) = &for_loop.label {
            return Err(unsupported(label.span(), "a loop label"));
        }
        let Pat::Ident(var) = &*for_loop.pat else {
            return Err(unsupported(
                for_loop.pat.span(),
                "this loop pattern (use a plain name)",
            ));
        };
        let var = &var.ident;
        let (range, step) = match &*for_loop.expr {
            Expr::MethodCall(call) if call.method == "step_by" && call.args.len() == 1 => {
                (strip_parens(&call.receiver), Some(&call.args[0]))
            }
            other => (other, None),
        };
        let Expr::Range(range) = range else {
            return Err(unsupported(
                for_loop.expr.span(),
                "a `for` loop over anything but a range",
            ));
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return Err(syn::Error::new(
                range.span(),
                "a kernel's range has a start and an end (`a..b`)",
            ));
        };
        let inclusive = matches!(range.limits, syn::RangeLimits::Closed(_));
        let start = self.expr(start)?;
        let end = self.expr(end)?;
        let unit_step = step.is_none() && !inclusive;
        let step = match step {
            Some(step) => self.expr(step)?,
            None => quote!(#m::lit_int(1)),
        };
        let body = self.block(&for_loop.body)?;
        if self.exclusive
            && self.mode == Mode::Native
            && exclusive::grid_stride_loop(for_loop).is_some()
        {
            // The exclusive body runs only units below the loop's end, on grids of at least
            // that many units (`exclusive_cubes` checked both): the unit's own position is
            // the loop's one value. A `for` over it keeps `break` and `continue` meaning
            // what they meant.
            return Ok(quote! {
                for #var in ::core::iter::once(#start) { #body }
            });
        }
        Ok(match self.mode {
            // `a..b` counts the simplest way, so the compiler sees a counted loop (and
            // unrolls or vectorizes it).
            Mode::Native if unit_step => {
                quote!(for #var in #m::range_by_one(#start, #end) { #body })
            }
            Mode::Native => {
                quote!(for #var in #m::range(#start, #end, #step, #inclusive) { #body })
            }
            Mode::Expand => {
                quote!(#m::range_loop(#start, #end, #step, #inclusive, |#var| { #body }))
            }
        })
    }

    fn assign(&self, target: &Expr, op: Option<&str>, value: &Expr) -> syn::Result<TokenStream> {
        let m = self.module();
        let value = self.expr(value)?;
        match strip_parens(target) {
            Expr::Index(index) => {
                let array = self.array_place(&index.expr)?;
                let position = self.expr(&index.index)?;
                let array_mut = match self.mode {
                    Mode::Native => quote!(&mut #array),
                    Mode::Expand => quote!(&#array),
                };
                let value = match op {
                    None => value,
                    Some(op) => {
                        let op = syn::Ident::new(op, target.span());
                        let span = target.span();
                        let m = respanned(m.clone(), span);
                        quote_spanned!(span=> #m::#op(#m::load(&#array, __cubert_index), #value))
                    }
                };
                // Spanned at the target, so a checked launch reports the store's source line.
                let span = target.span();
                let m = respanned(m, span);
                let store =
                    quote_spanned!(span=> #m::store(#array_mut, __cubert_index, __cubert_value));
                Ok(quote!({
                    let __cubert_index = #position;
                    let __cubert_value = #value;
                    #store
                }))
            }
            Expr::Path(path) if path.path.get_ident().is_some() => {
                let name = path.path.get_ident();
                if let Some(name) = name
                    && (self.comptime.contains(&name.to_string())
                        || BUILTINS.iter().any(|(builtin, ..)| name == builtin))
                {
                    return Err(syn::Error::new(
                        name.span(),
                        "compile-time parameters and builtins can't be assigned",
                    ));
                }
                let value = match op {
                    None => value,
                    Some(op) => {
                        let op = syn::Ident::new(op, target.span());
                        quote!(#m::#op(#name, #value))
                    }
                };
                Ok(match self.mode {
                    Mode::Native => quote!(#name = #value),
                    Mode::Expand => quote!(#m::assign(&#name, #value)),
                })
            }
            other => Err(unsupported(
                other.span(),
                "assigning to this (assign to a variable or an array element)",
            )),
        }
    }

    /// An array being indexed: a variable.
    fn array_place(&self, expr: &Expr) -> syn::Result<TokenStream> {
        match strip_parens(expr) {
            Expr::Path(path) if path.path.get_ident().is_some() => Ok(quote!(#path)),
            other => Err(unsupported(
                other.span(),
                "indexing this (index an array variable: `x[i]`)",
            )),
        }
    }

    /// An expression that produces a value.
    pub fn expr(&self, expr: &Expr) -> syn::Result<TokenStream> {
        let m = self.module();
        let lang = &self.lang;
        let span = expr.span();
        match expr {
            Expr::Lit(lit) => self.literal(&lit.lit),
            Expr::Path(path) => {
                let Some(ident) = path.path.get_ident() else {
                    return Err(unsupported(
                        span,
                        "a path (constants like `u32::MAX` aren't in the language yet)",
                    ));
                };
                let name = ident.to_string();
                if let Some((_, method, variant)) =
                    BUILTINS.iter().find(|(builtin, ..)| *builtin == name)
                {
                    let method = syn::Ident::new(method, span);
                    let variant = syn::Ident::new(variant, span);
                    return Ok(match self.mode {
                        Mode::Native => quote_spanned!(span=> __cubert_unit.#method()),
                        Mode::Expand => {
                            quote_spanned!(span=> #m::builtin(#lang::ir::Builtin::#variant))
                        }
                    });
                }
                if self.comptime.contains(&name) || is_rust_constant(&name) {
                    return Ok(quote_spanned!(span=> #m::constant(#ident)));
                }
                Ok(quote!(#ident))
            }
            Expr::Paren(paren) => {
                let inner = self.expr(&paren.expr)?;
                Ok(quote!((#inner)))
            }
            Expr::Binary(binary) => self.binary(binary),
            Expr::Unary(unary) => {
                let operand = self.expr(&unary.expr)?;
                match unary.op {
                    UnOp::Neg(_) => Ok(quote_spanned!(span=> #m::neg(#operand))),
                    UnOp::Not(_) => Ok(quote_spanned!(span=> #m::not(#operand))),
                    _ => Err(unsupported(span, "dereferencing")),
                }
            }
            Expr::Index(index) => {
                let array = self.array_place(&index.expr)?;
                let position = self.expr(&index.index)?;
                // The whole call carries the user's span: a checked launch reports its line.
                let m = respanned(m, span);
                Ok(quote_spanned!(span=> #m::load(&#array, #position)))
            }
            Expr::Cast(cast) => {
                self.check_scalar_type(&cast.ty)?;
                let value = self.expr(&cast.expr)?;
                let ty = &cast.ty;
                Ok(quote_spanned!(span=> #m::cast::<#ty, _>(#value)))
            }
            Expr::Call(call) => self.call(call),
            Expr::MethodCall(call) => self.method_call(call),
            Expr::If(expr_if) => self.if_value(expr_if),
            Expr::Block(block) if block.label.is_none() => {
                let (init, last) = split_tail(&block.block)?;
                let mut body = TokenStream::new();
                for stmt in init {
                    body.extend(self.stmt(stmt)?);
                }
                let last = self.expr(last)?;
                Ok(quote!({ #body #last }))
            }
            Expr::Repeat(repeat) => {
                let value = self.expr(&repeat.expr)?;
                let len = &repeat.len;
                Ok(quote_spanned!(span=> #m::local_array::<_, { #len }>(#value)))
            }
            Expr::Closure(_) => Err(unsupported(span, "a closure")),
            Expr::Reference(_) => Err(unsupported(span, "a reference")),
            Expr::Match(_) => Err(unsupported(span, "`match` (use `if`/`else`)")),
            Expr::Macro(_) => Err(unsupported(span, "a macro call")),
            Expr::Array(_) => Err(unsupported(
                span,
                "an array literal (use a local array `[v; N]`)",
            )),
            Expr::Range(_) => Err(unsupported(span, "a range outside a `for` loop")),
            Expr::Assign(_) => Err(unsupported(span, "an assignment used as a value")),
            _ => Err(unsupported(span, "this expression")),
        }
    }

    fn literal(&self, lit: &Lit) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = lit.span();
        match lit {
            Lit::Int(int) => {
                let digits: i128 = int.base10_parse()?;
                let suffix = int.suffix();
                if suffix.is_empty() {
                    Ok(quote_spanned!(span=> #m::lit_int(#digits)))
                } else {
                    let ty = syn::Ident::new(suffix, span);
                    Ok(quote_spanned!(span=> #m::lit_int::<#ty>(#digits)))
                }
            }
            Lit::Float(float) => {
                let value: f64 = float.base10_parse()?;
                let suffix = float.suffix();
                if suffix.is_empty() {
                    Ok(quote_spanned!(span=> #m::lit_float(#value)))
                } else {
                    let ty = syn::Ident::new(suffix, span);
                    Ok(quote_spanned!(span=> #m::lit_float::<#ty>(#value)))
                }
            }
            Lit::Bool(value) => {
                let value = value.value;
                Ok(quote_spanned!(span=> #m::lit_bool(#value)))
            }
            _ => Err(unsupported(span, "this literal")),
        }
    }

    fn binary(&self, binary: &syn::ExprBinary) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = binary.span();
        let left = self.expr(&binary.left)?;
        let right = self.expr(&binary.right)?;
        let name = match binary.op {
            BinOp::Add(_) => "add",
            BinOp::Sub(_) => "sub",
            BinOp::Mul(_) => "mul",
            BinOp::Div(_) => "div",
            BinOp::Rem(_) => "rem",
            BinOp::BitAnd(_) => "bitand",
            BinOp::BitOr(_) => "bitor",
            BinOp::BitXor(_) => "bitxor",
            BinOp::Shl(_) => "shl",
            BinOp::Shr(_) => "shr",
            BinOp::Eq(_) => "eq",
            BinOp::Ne(_) => "ne",
            BinOp::Lt(_) => "lt",
            BinOp::Le(_) => "le",
            BinOp::Gt(_) => "gt",
            BinOp::Ge(_) => "ge",
            BinOp::And(_) => {
                return Ok(match self.mode {
                    Mode::Native => quote!((#left && #right)),
                    Mode::Expand => quote_spanned!(span=> #m::and(#left, || #right)),
                });
            }
            BinOp::Or(_) => {
                return Ok(match self.mode {
                    Mode::Native => quote!((#left || #right)),
                    Mode::Expand => quote_spanned!(span=> #m::or(#left, || #right)),
                });
            }
            _ => {
                return Err(syn::Error::new(
                    span,
                    "an assignment is a statement in a kernel, not a value",
                ));
            }
        };
        let name = syn::Ident::new(name, binary.op.span());
        Ok(quote_spanned!(span=> #m::#name(#left, #right)))
    }

    fn call(&self, call: &syn::ExprCall) -> syn::Result<TokenStream> {
        let m = self.module();
        let lang = &self.lang;
        let span = call.span();
        let Expr::Path(path) = &*call.func else {
            return Err(unsupported(span, "calling this"));
        };
        let segments: Vec<_> = path.path.segments.iter().collect();
        if path.qself.is_none()
            && let Some(cooperative) = self.cooperative_call(call, &segments)?
        {
            return Ok(cooperative);
        }
        let is_new = segments.len() == 2 && segments[1].ident == "new";
        let mut args = Vec::new();
        for arg in &call.args {
            if is_new {
                // `F::new(x)` takes a plain f64 in both forms: a literal or a compile-time
                // value, evaluated as Rust.
                if !self.is_comptime(arg) {
                    return Err(syn::Error::new(
                        arg.span(),
                        "`F::new` takes a literal or a compile-time value; convert a runtime \
                         value with `as`",
                    ));
                }
                args.push(quote!((#arg) as f64));
            } else {
                args.push(self.expr(arg)?);
            }
        }
        if path.qself.is_none()
            && segments.len() == 1
            && segments[0].ident == "select"
            && args.len() == 3
        {
            return Ok(quote_spanned!(span=> #m::select(#(#args),*)));
        }
        if path.qself.is_none() && segments.len() == 2 && segments[0].arguments.is_empty() {
            let ty = &segments[0].ident;
            let function = &segments[1].ident;
            let type_name = ty.to_string();
            let is_type =
                SCALAR_TYPES.contains(&type_name.as_str()) || self.type_params.contains(&type_name);
            let allowed = function == "new" || METHODS.iter().any(|method| function == method);
            if is_type && allowed {
                return Ok(match (self.mode, function.to_string().as_str()) {
                    (Mode::Native, "new") => {
                        quote_spanned!(span=> #m::float_new::<#ty>(#(#args),*))
                    }
                    (Mode::Native, "abs" | "min" | "max") => {
                        quote_spanned!(span=> #m::#function::<#ty>(#(#args),*))
                    }
                    (Mode::Native, _) => {
                        quote_spanned!(span=> <#ty as #lang::Float>::#function(#(#args),*))
                    }
                    (Mode::Expand, _) => {
                        quote_spanned!(span=> <#lang::expand::Val<#ty>>::#function(#(#args),*))
                    }
                });
            }
        }
        Err(unsupported(
            span,
            "calling an arbitrary function (a kernel can call `select`, `T::new` and the \
             float methods)",
        ))
    }

    /// `sync_cube()`, a plane operation, an atomic or `SharedMemory::<T>::new(len)`, or
    /// `None` for another call.
    fn cooperative_call(
        &self,
        call: &syn::ExprCall,
        segments: &[&syn::PathSegment],
    ) -> syn::Result<Option<TokenStream>> {
        let m = self.module();
        let span = call.span();
        let arity = |expected: usize, name: &str| {
            if call.args.len() == expected {
                Ok(())
            } else {
                Err(syn::Error::new(
                    span,
                    format!("`{name}` takes {expected} argument(s)"),
                ))
            }
        };
        if segments.len() == 2
            && segments[0].ident == "SharedMemory"
            && segments[1].ident == "new"
            && segments[1].arguments.is_empty()
        {
            let syn::PathArguments::AngleBracketed(generics) = &segments[0].arguments else {
                return Err(syn::Error::new(
                    segments[0].span(),
                    "name the element type: `SharedMemory::<T>::new(len)`",
                ));
            };
            let elem = match generics.args.first() {
                Some(syn::GenericArgument::Type(ty)) if generics.args.len() == 1 => ty,
                _ => {
                    return Err(syn::Error::new(
                        generics.span(),
                        "`SharedMemory` takes one element type: `SharedMemory::<T>::new(len)`",
                    ));
                }
            };
            self.check_scalar_type(elem)?;
            arity(1, "SharedMemory::new")?;
            let len = &call.args[0];
            if !self.is_comptime(len) {
                return Err(syn::Error::new(
                    len.span(),
                    "a shared array's length is a literal or a compile-time value",
                ));
            }
            let site = self.shared_sites.get();
            self.shared_sites.set(site + 1);
            return Ok(Some(match self.mode {
                Mode::Native => quote_spanned!(span=>
                    #m::shared_array::<#elem>(__cubert_args, #site, (#len) as u32)),
                Mode::Expand => quote_spanned!(span=>
                    #m::shared_array::<#elem>(#site, (#len) as u32)),
            }));
        }
        if segments.len() == 1 && segments[0].ident == "copy_line_async" {
            arity(5, "copy_line_async")?;
            return self.copy_line_async(call, &segments[0].arguments).map(Some);
        }
        if segments.len() != 1 || !segments[0].arguments.is_empty() {
            return Ok(None);
        }
        let function = &segments[0].ident;
        let name = function.to_string();
        if name == "commit_async_copies" {
            arity(0, &name)?;
            return Ok(Some(quote_spanned!(span=> #m::commit_async_copies())));
        }
        if name == "wait_async_copies" {
            arity(1, &name)?;
            let pending = &call.args[0];
            if !self.is_comptime(pending) {
                return Err(syn::Error::new(
                    pending.span(),
                    "`wait_async_copies` takes the number of groups that may stay in flight as \
                     a literal or a compile-time value: `wait_async_copies(1)`",
                ));
            }
            return Ok(Some(
                quote_spanned!(span=> #m::wait_async_copies((#pending) as u32)),
            ));
        }
        if name == "plane_load_a" || name == "plane_load_b" {
            arity(3, &name)?;
            let tile = self.shared_argument(&call.args[0], &name)?;
            let start = self.expr(&call.args[1])?;
            let stride = self.expr(&call.args[2])?;
            return Ok(Some(match self.mode {
                Mode::Native => {
                    quote_spanned!(span=> #m::#function(__cubert_unit, &#tile, #start, #stride))
                }
                Mode::Expand => quote_spanned!(span=> #m::#function(&#tile, #start, #stride)),
            }));
        }
        if name == "sync_cube" {
            arity(0, &name)?;
            return Ok(Some(quote_spanned!(span=> #m::sync_cube())));
        }
        if name == "plane_group_mma" || name == "plane_group_mma_async" {
            arity(8, &name)?;
            return self
                .plane_group_mma(call, name == "plane_group_mma_async")
                .map(Some);
        }
        if name == "plane_group_mma_wait" {
            arity(1, &name)?;
            let pending = &call.args[0];
            if !self.is_comptime(pending) {
                return Err(syn::Error::new(
                    pending.span(),
                    "`plane_group_mma_wait` takes the number of multiplies that may stay in \
                     flight as a literal or a compile-time value: `plane_group_mma_wait(1)`",
                ));
            }
            return Ok(Some(
                quote_spanned!(span=> #m::plane_group_mma_wait((#pending) as u32)),
            ));
        }
        if name == "plane_mma" {
            arity(3, &name)?;
            return self.plane_mma(call).map(Some);
        }
        if let Some(&(_, expected)) = PLANE_OPS.iter().find(|(op, _)| *op == name) {
            arity(expected, &name)?;
            let args = call
                .args
                .iter()
                .map(|arg| self.expr(arg))
                .collect::<syn::Result<Vec<_>>>()?;
            return Ok(Some(match self.mode {
                Mode::Native => quote_spanned!(span=> #m::#function(__cubert_unit, #(#args),*)),
                Mode::Expand => quote_spanned!(span=> #m::#function(#(#args),*)),
            }));
        }
        if let Some(&(_, expected)) = ATOMIC_OPS.iter().find(|(op, _)| *op == name) {
            arity(expected, &name)?;
            let array = match strip_parens(&call.args[0]) {
                Expr::Path(path) if path.path.get_ident().is_some() => quote!(#path),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        format!(
                            "an atomic's first argument is an array variable: `{name}(y, i, v)`"
                        ),
                    ));
                }
            };
            let args = call
                .args
                .iter()
                .skip(1)
                .map(|arg| self.expr(arg))
                .collect::<syn::Result<Vec<_>>>()?;
            return Ok(Some(
                quote_spanned!(span=> #m::#function(&#array, #(#args),*)),
            ));
        }
        Ok(None)
    }

    /// `plane_mma(&mut acc, a, b)`: the accumulator is a local array variable taken
    /// `&mut`, updated in place; `a` and `b` are local arrays.
    fn plane_mma(&self, call: &syn::ExprCall) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = call.span();
        let wrong = |expr: &Expr| {
            syn::Error::new(
                expr.span(),
                "`plane_mma`'s first argument is the accumulator, a local array variable taken \
                 `&mut`: `plane_mma(&mut acc, a, b)`",
            )
        };
        let acc = match strip_parens(&call.args[0]) {
            Expr::Reference(reference) if reference.mutability.is_some() => {
                match strip_parens(&reference.expr) {
                    Expr::Path(path) if path.path.get_ident().is_some() => quote!(#path),
                    other => return Err(wrong(other)),
                }
            }
            other => return Err(wrong(other)),
        };
        let a = self.expr(&call.args[1])?;
        let b = self.expr(&call.args[2])?;
        Ok(match self.mode {
            Mode::Native => {
                quote_spanned!(span=> #m::plane_mma(__cubert_unit, &mut #acc, #a, #b))
            }
            Mode::Expand => quote_spanned!(span=> #m::plane_mma(&#acc, #a, #b)),
        })
    }

    /// `plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, b_panel_stride, n, k)`
    /// (and `plane_group_mma_async`, the same arguments): the accumulator is a local array
    /// variable taken `&mut`, the tiles shared arrays, N and K compile-time values.
    fn plane_group_mma(
        &self,
        call: &syn::ExprCall,
        asynchronous: bool,
    ) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = call.span();
        let form = "`plane_group_mma(&mut acc, &a_tile, a_start, &b_tile, b_start, \
                    b_panel_stride, n, k)`";
        let acc = match strip_parens(&call.args[0]) {
            Expr::Reference(reference) if reference.mutability.is_some() => {
                match strip_parens(&reference.expr) {
                    Expr::Path(path) if path.path.get_ident().is_some() => quote!(#path),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            format!("the accumulator is a local array variable: {form}"),
                        ));
                    }
                }
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    format!("the first argument is the accumulator taken `&mut`: {form}"),
                ));
            }
        };
        let a = self.shared_argument(&call.args[1], "plane_group_mma")?;
        let a_start = self.expr(&call.args[2])?;
        let b = self.shared_argument(&call.args[3], "plane_group_mma")?;
        let b_start = self.expr(&call.args[4])?;
        let stride = self.expr(&call.args[5])?;
        let (n, k) = (&call.args[6], &call.args[7]);
        for value in [n, k] {
            if !self.is_comptime(value) {
                return Err(syn::Error::new(
                    value.span(),
                    format!("N and K are literals or compile-time values: {form}"),
                ));
            }
        }
        Ok(match self.mode {
            Mode::Native => quote_spanned!(span=>
                #m::plane_group_mma(__cubert_unit, &mut #acc, &#a, #a_start, &#b, #b_start,
                    #stride, (#n) as u32, (#k) as u32, #asynchronous)),
            Mode::Expand => quote_spanned!(span=>
                #m::plane_group_mma(&#acc, &#a, #a_start, &#b, #b_start, #stride,
                    (#n) as u32, (#k) as u32, #asynchronous)),
        })
    }

    /// A shared array argument: its variable, taken by reference (`&tile`, `&mut tile`)
    /// or not.
    fn shared_argument(&self, expr: &Expr, function: &str) -> syn::Result<TokenStream> {
        let inner = match strip_parens(expr) {
            Expr::Reference(reference) => strip_parens(&reference.expr),
            other => other,
        };
        match inner {
            Expr::Path(path) if path.path.get_ident().is_some() => Ok(quote!(#path)),
            other => Err(syn::Error::new(
                other.span(),
                format!("`{function}`'s first argument is a shared array variable: `&tile`"),
            )),
        }
    }

    /// `copy_line_async::<N>(&mut tile, shared_line, x, line, valid)`.
    fn copy_line_async(
        &self,
        call: &syn::ExprCall,
        arguments: &syn::PathArguments,
    ) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = call.span();
        let width = match arguments {
            syn::PathArguments::AngleBracketed(generics) if generics.args.len() == 1 => {
                match &generics.args[0] {
                    syn::GenericArgument::Const(expr) => quote!(#expr),
                    syn::GenericArgument::Type(ty) => quote!(#ty),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "a copy's width is a literal or a constant: \
                             `copy_line_async::<8>(&mut tile, i, x, j, valid)`",
                        ));
                    }
                }
            }
            _ => {
                return Err(syn::Error::new(
                    span,
                    "name the line's width: `copy_line_async::<8>(&mut tile, i, x, j, valid)` \
                     (1, 2, 4, 8 or 16 elements)",
                ));
            }
        };
        let tile = self.shared_argument(&call.args[0], "copy_line_async")?;
        let shared_line = self.expr(&call.args[1])?;
        let array = self.array_place(&call.args[2])?;
        let line = self.expr(&call.args[3])?;
        let valid = self.expr(&call.args[4])?;
        Ok(match self.mode {
            Mode::Native => quote_spanned!(span=>
                #m::copy_line_async::<_, _, { #width }>(&#tile, #shared_line, &#array, #line, #valid)),
            Mode::Expand => quote_spanned!(span=>
                #m::copy_line_async(&#tile, #shared_line, &#array, #line, #valid, (#width) as u32)),
        })
    }

    /// `x.line::<N>(i)` (a local array of `N` elements) and `y.set_line(i, v)`.
    fn line_call(&self, call: &syn::ExprMethodCall) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = call.span();
        let array = self.array_place(&call.receiver)?;
        if call.method == "line" {
            let width = match call
                .turbofish
                .as_ref()
                .map(|t| t.args.iter().collect::<Vec<_>>())
            {
                Some(args) if args.len() == 1 => match args[0] {
                    syn::GenericArgument::Const(expr) => quote!(#expr),
                    syn::GenericArgument::Type(ty) => quote!(#ty),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "a line's width is a literal or a constant: `x.line::<4>(i)`",
                        ));
                    }
                },
                _ => {
                    return Err(syn::Error::new(
                        span,
                        "name the line's width: `x.line::<4>(i)` (1, 2, 4 or 8)",
                    ));
                }
            };
            if call.args.len() != 1 {
                return Err(syn::Error::new(
                    span,
                    "`line` takes the line index: `x.line::<4>(i)`",
                ));
            }
            let index = self.expr(&call.args[0])?;
            return Ok(match self.mode {
                Mode::Native => {
                    quote_spanned!(span=> #m::load_line::<_, { #width }>(&#array, #index))
                }
                Mode::Expand => {
                    quote_spanned!(span=> #m::load_line(&#array, #index, (#width) as u32))
                }
            });
        }
        if call.turbofish.is_some() || call.args.len() != 2 {
            return Err(syn::Error::new(
                span,
                "`set_line` takes the line index and a local array: `y.set_line(i, v)`",
            ));
        }
        let index = self.expr(&call.args[0])?;
        let value = self.array_place(&call.args[1])?;
        Ok(match self.mode {
            Mode::Native => quote_spanned!(span=> #m::store_line(&mut #array, #index, &#value)),
            Mode::Expand => quote_spanned!(span=> #m::store_line(&#array, #index, &#value)),
        })
    }

    fn method_call(&self, call: &syn::ExprMethodCall) -> syn::Result<TokenStream> {
        let m = self.module();
        let span = call.span();
        let method = &call.method;
        if method == "line" || method == "set_line" {
            return self.line_call(call);
        }
        if let Some(turbofish) = &call.turbofish {
            return Err(syn::Error::new(
                turbofish.span(),
                format!("`{method}` takes no generic arguments (only `x.line::<N>(i)` names one)"),
            ));
        }
        if !METHODS.iter().any(|name| method == name) {
            return Err(unsupported(
                method.span(),
                &format!(
                    "the method `{method}` (kernels can call {})",
                    METHODS.join(", ")
                ),
            ));
        }
        let receiver = self.expr(&call.receiver)?;
        let mut args = Vec::new();
        for arg in &call.args {
            args.push(self.expr(arg)?);
        }
        let name = method.to_string();
        Ok(match (self.mode, name.as_str()) {
            (_, "len" | "is_empty" | "rank") => quote_spanned!(span=> #m::#method(&#receiver)),
            (_, "shape" | "stride") => quote_spanned!(span=> #m::#method(&#receiver, #(#args),*)),
            (Mode::Native, "abs" | "min" | "max") => {
                quote_spanned!(span=> #m::#method(#receiver #(, #args)*))
            }
            _ => quote_spanned!(span=> #receiver.#method(#(#args),*)),
        })
    }

    fn if_value(&self, expr_if: &syn::ExprIf) -> syn::Result<TokenStream> {
        let m = self.module();
        let Some((_, otherwise)) = &expr_if.else_branch else {
            return Err(syn::Error::new(
                expr_if.span(),
                "an `if` used as a value needs an `else`",
            ));
        };
        let then = self.expr(&Expr::Block(syn::ExprBlock {
            attrs: Vec::new(),
            label: None,
            block: expr_if.then_branch.clone(),
        }))?;
        let otherwise = self.expr(otherwise)?;
        if self.mode == Mode::Native || self.is_comptime(&expr_if.cond) {
            let cond = self.comptime_or_expr(&expr_if.cond)?;
            return Ok(quote!(if #cond { #then } else { #otherwise }));
        }
        let cond = self.expr(&expr_if.cond)?;
        Ok(quote!(#m::if_value(#cond, || #then, || #otherwise)))
    }
}

/// `tokens` with every span set to `span` (groups included), so a call built from them is
/// located at the user's code: `#[track_caller]` then reports that line.
fn respanned(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let proc_macro2::TokenTree::Group(group) = &tree {
                let mut inner =
                    proc_macro2::Group::new(group.delimiter(), respanned(group.stream(), span));
                inner.set_span(span);
                tree = proc_macro2::TokenTree::Group(inner);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// Whether `name` is a Rust constant a kernel may read as a compile-time value: a
/// SCREAMING_CASE name that isn't a builtin (`const TILE: u32 = 64;`).
fn is_rust_constant(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !BUILTINS.iter().any(|(builtin, ..)| *builtin == name)
}

/// The function name of a compound assignment's operation (`+=` is `add`).
fn compound_op(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::AddAssign(_) => "add",
        BinOp::SubAssign(_) => "sub",
        BinOp::MulAssign(_) => "mul",
        BinOp::DivAssign(_) => "div",
        BinOp::RemAssign(_) => "rem",
        BinOp::BitAndAssign(_) => "bitand",
        BinOp::BitOrAssign(_) => "bitor",
        BinOp::BitXorAssign(_) => "bitxor",
        BinOp::ShlAssign(_) => "shl",
        BinOp::ShrAssign(_) => "shr",
        _ => return None,
    })
}

fn strip_parens(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(paren) => strip_parens(&paren.expr),
        other => other,
    }
}

/// The statements of a block used as a value, and its tail expression.
fn split_tail(block: &Block) -> syn::Result<(&[Stmt], &Expr)> {
    match block.stmts.split_last() {
        Some((Stmt::Expr(last, None), init)) => Ok((init, last)),
        _ => Err(syn::Error::new(
            block.span(),
            "a block used as a value ends with an expression",
        )),
    }
}
