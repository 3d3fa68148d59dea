//! Whether a kernel's units each touch only their own elements (the CPU's fast path).
//!
//! [`analyse`] reads the kernel's syntax and says yes (with the line width) when every
//! access to an array parameter is at the unit's position: the index is `ABSOLUTE_POS` or
//! a variable bound once, without `mut`, to it; `x.line::<N>(pos)` and `y.set_line(pos, v)`
//! count as accesses to line `pos` of width `N` (for `set_line`, `v` must visibly be a local
//! array of `N` elements); every access of the kernel uses one width. The kernel may not
//! use atomics, shared memory, plane operations or barriers, may not take tensors, and may
//! use an array parameter only through those accesses, `len()` and `is_empty()`.
//!
//! A grid-stride loop, `for i in (ABSOLUTE_POS..end).step_by(CUBE_COUNT * CUBE_DIM)`, binds
//! `i` as a position too: unit `u` visits `u`, `u + T`, `u + 2T`, ... (T units in the grid),
//! which no other unit visits. Its `end` must be made of parameters only (scalars and
//! compile-time values never reassigned, arrays' `len()`, literals, casts, arithmetic,
//! `min`/`max`), so that the CPU can evaluate it before running a cube and let the
//! exclusive body run only grids of at least `end` units, where the loop is the unit's own
//! position once (see `lang::native::exclusive`).
//!
//! An array the kernel only reads (`&Array`) may also be read at any other index (a
//! *gather*: `x[row * cols + c]`, `x.line::<8>(j)`): such an array is *gathered*; its
//! accesses keep their bounds checks in the exclusive body but read plainly, and they take
//! no part in the line width. The CPU then requires it not to overlap any written array
//! at all, so no unit of the launch writes what another reads.
//!
//! The answer is conservative: anything the analysis doesn't recognise makes it say no,
//! and the kernel runs the checked body only. A yes lets the CPU run the body over plain
//! loads and stores (`lang::native::exclusive`), so it must be right: it is what makes
//! those accesses in bounds and free of races once the launch's ranges are checked.

use std::collections::{HashMap, HashSet};
use syn::visit::{self, Visit};
use syn::{Expr, Pat};

/// What the CPU's fast path needs to know of an exclusive kernel.
pub struct Exclusive {
    /// The line width of every array access (1 without lines).
    pub width: u32,
    /// The `end` of every grid-stride loop, in source order.
    pub grid_stride_ends: Vec<Expr>,
    /// The read-only arrays read at indices other than the position (see the module docs).
    pub gathered: HashSet<String>,
}

/// The parameters of a kernel, as the analysis sees them.
pub struct Params<'a> {
    /// Names of the array parameters.
    pub arrays: &'a HashSet<String>,
    /// Names of the array parameters the kernel can't write (`&Array`).
    pub read_only: &'a HashSet<String>,
    /// Every parameter's name.
    pub all: &'a HashSet<String>,
    /// Scalar parameters without `mut` and compile-time values: what a grid-stride loop's
    /// end may name.
    pub fixed: &'a HashSet<String>,
}

/// [`Exclusive`] if `block` is exclusive. See the module docs.
pub fn analyse(block: &syn::Block, params: &Params<'_>, has_tensors: bool) -> Option<Exclusive> {
    if has_tensors {
        return None;
    }
    let mut analysis = Analysis {
        arrays: params.arrays,
        fixed: params.fixed,
        bindings: params.all.iter().map(|name| (name.clone(), 1)).collect(),
        positions: HashSet::new(),
        accesses: Vec::new(),
        lines: HashMap::new(),
        grid_stride_ends: Vec::new(),
        end_names: HashSet::new(),
        refused: false,
    };
    analysis.visit_block(block);
    let unique = |name: &String| analysis.bindings.get(name) == Some(&1);
    let is_position = |index: &Option<String>| match index {
        None => true,
        Some(name) => {
            analysis.positions.contains(name) && unique(name) && !params.all.contains(name)
        }
    };
    // A read-only array with an access that isn't at the position is gathered: all its
    // accesses stay checked. Every other access must be at the position, in one width.
    let mut gathered = HashSet::new();
    for access in &analysis.accesses {
        // A line whose width isn't visible.
        access.width?;
        if !access.at_position(&is_position) {
            if !params.read_only.contains(&access.array) {
                return None;
            }
            gathered.insert(access.array.clone());
        }
    }
    let mut width = None;
    for access in analysis
        .accesses
        .iter()
        .filter(|access| !gathered.contains(&access.array))
    {
        match (width, access.width) {
            (Some(known), Some(this)) if known != this => return None,
            (_, this) => width = this,
        }
    }
    let lines_hold = analysis.lines.keys().all(unique);
    // A grid-stride loop's end names parameters that nothing shadows.
    let ends_hold = analysis.end_names.iter().all(unique);
    (!analysis.refused && lines_hold && ends_hold).then(|| Exclusive {
        width: width.unwrap_or(1),
        grid_stride_ends: analysis.grid_stride_ends,
        gathered,
    })
}

/// One access to an array parameter.
struct Access {
    /// The array.
    array: String,
    /// The index: `None` for `ABSOLUTE_POS` itself, the name of a variable, or `Some("")`
    /// for any other expression.
    index: Option<String>,
    /// The line width (`None`: not visible).
    width: Option<u32>,
}

impl Access {
    fn at_position(&self, is_position: &impl Fn(&Option<String>) -> bool) -> bool {
        !matches!(&self.index, Some(name) if name.is_empty()) && is_position(&self.index)
    }
}

/// The loop variable and end of `for i in (ABSOLUTE_POS..end).step_by(CUBE_COUNT *
/// CUBE_DIM)` (either order of the product, parentheses allowed; `i` without `mut`).
pub fn grid_stride_loop(for_loop: &syn::ExprForLoop) -> Option<(&syn::Ident, &Expr)> {
    let Pat::Ident(var) = &*for_loop.pat else {
        return None;
    };
    if var.mutability.is_some() || var.by_ref.is_some() || var.subpat.is_some() {
        return None;
    }
    let Expr::MethodCall(call) = strip(&for_loop.expr) else {
        return None;
    };
    if call.method != "step_by" || call.args.len() != 1 {
        return None;
    }
    let Expr::Range(range) = strip(&call.receiver) else {
        return None;
    };
    let half_open = matches!(range.limits, syn::RangeLimits::HalfOpen(_));
    let starts_at_position = range
        .start
        .as_deref()
        .is_some_and(|start| is_path(start, "ABSOLUTE_POS"));
    let grid_units = match strip(&call.args[0]) {
        Expr::Binary(product) if matches!(product.op, syn::BinOp::Mul(_)) => {
            (is_path(&product.left, "CUBE_COUNT") && is_path(&product.right, "CUBE_DIM"))
                || (is_path(&product.left, "CUBE_DIM") && is_path(&product.right, "CUBE_COUNT"))
        }
        _ => false,
    };
    match (&range.end, half_open && starts_at_position && grid_units) {
        (Some(end), true) => Some((&var.ident, end)),
        _ => None,
    }
}

fn is_path(expr: &Expr, name: &str) -> bool {
    matches!(strip(expr), Expr::Path(path) if path.path.is_ident(name))
}

struct Analysis<'a> {
    arrays: &'a HashSet<String>,
    /// Names a grid-stride loop's end may use.
    fixed: &'a HashSet<String>,
    /// How many times each name is bound (parameters count once).
    bindings: HashMap<String, u32>,
    /// Names bound by `let name = ABSOLUTE_POS;`.
    positions: HashSet<String>,
    /// Every access to an array parameter, in source order.
    accesses: Vec<Access>,
    /// Local arrays of a known length: `let v = x.line::<N>(pos)`, `[e; N]`, or another.
    lines: HashMap<String, u32>,
    /// The ends of the grid-stride loops met so far.
    grid_stride_ends: Vec<Expr>,
    /// The parameters those ends name.
    end_names: HashSet<String>,
    refused: bool,
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(paren) => strip(&paren.expr),
        Expr::Group(group) => strip(&group.expr),
        other => other,
    }
}

fn ident(expr: &Expr) -> Option<String> {
    match strip(expr) {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident().map(ToString::to_string),
        _ => None,
    }
}

fn int_literal(expr: &Expr) -> Option<u32> {
    match strip(expr) {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(int),
            ..
        }) => int.base10_parse().ok(),
        _ => None,
    }
}

/// The width `N` of `x.line::<N>(..)`.
fn turbofish_width(call: &syn::ExprMethodCall) -> Option<u32> {
    let turbofish = call.turbofish.as_ref()?;
    match turbofish.args.first()? {
        syn::GenericArgument::Const(expr) => int_literal(expr),
        syn::GenericArgument::Type(syn::Type::Verbatim(tokens)) => tokens.to_string().parse().ok(),
        _ => None,
    }
}

impl Analysis<'_> {
    fn is_array(&self, expr: &Expr) -> bool {
        ident(expr).is_some_and(|name| self.arrays.contains(&name))
    }

    /// Records an access of width `width` to `array` at index `index`.
    fn access(&mut self, array: &Expr, index: &Expr, width: Option<u32>) {
        let Some(array) = ident(array) else {
            self.refused = true;
            return;
        };
        let index = match strip(index) {
            Expr::Path(path) if path.path.is_ident("ABSOLUTE_POS") => None,
            other => Some(ident(other).unwrap_or_default()),
        };
        self.accesses.push(Access {
            array,
            index,
            width,
        });
    }

    /// Whether `end` is made of fixed parameters only (recording the names it uses).
    fn parameters_only(&mut self, end: &Expr) -> bool {
        match strip(end) {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(_),
                ..
            }) => true,
            Expr::Path(_) => match ident(end) {
                Some(name) if self.fixed.contains(&name) => {
                    self.end_names.insert(name);
                    true
                }
                _ => false,
            },
            Expr::Cast(cast) => self.parameters_only(&cast.expr),
            Expr::Binary(binary) => {
                self.parameters_only(&binary.left) && self.parameters_only(&binary.right)
            }
            Expr::MethodCall(call) => match (call.method.to_string().as_str(), call.args.first()) {
                ("len", None) => self.is_array(&call.receiver),
                ("min" | "max", Some(other)) if call.args.len() == 1 => {
                    self.parameters_only(&call.receiver) && self.parameters_only(other)
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The length of a local array expression, if visible.
    fn local_array_len(&self, expr: &Expr) -> Option<u32> {
        match strip(expr) {
            Expr::MethodCall(call) if call.method == "line" && self.is_array(&call.receiver) => {
                turbofish_width(call)
            }
            Expr::Repeat(repeat) => int_literal(&repeat.len),
            other => ident(other).and_then(|name| self.lines.get(&name).copied()),
        }
    }
}

impl<'ast> Visit<'ast> for Analysis<'_> {
    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let (Pat::Ident(pat), Some(init)) = (strip_type(&local.pat), &local.init) {
            let name = pat.ident.to_string();
            let plain = pat.by_ref.is_none() && pat.subpat.is_none();
            if plain
                && pat.mutability.is_none()
                && matches!(strip(&init.expr), Expr::Path(path) if path.path.is_ident("ABSOLUTE_POS"))
            {
                self.positions.insert(name.clone());
            }
            if plain && let Some(len) = self.local_array_len(&init.expr) {
                self.lines.insert(name, len);
            }
        }
        visit::visit_local(self, local);
    }

    fn visit_expr_for_loop(&mut self, for_loop: &'ast syn::ExprForLoop) {
        if let Some((var, end)) = grid_stride_loop(for_loop) {
            if self.parameters_only(end) {
                self.grid_stride_ends.push(end.clone());
                self.positions.insert(var.to_string());
            } else {
                self.refused = true;
            }
        }
        visit::visit_expr_for_loop(self, for_loop);
    }

    fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
        *self.bindings.entry(pat.ident.to_string()).or_insert(0) += 1;
        visit::visit_pat_ident(self, pat);
    }

    fn visit_expr_index(&mut self, index: &'ast syn::ExprIndex) {
        if self.is_array(&index.expr) {
            self.access(&index.expr, &index.index, Some(1));
            self.visit_expr(&index.index);
        } else {
            visit::visit_expr_index(self, index);
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if !self.is_array(&call.receiver) {
            visit::visit_expr_method_call(self, call);
            return;
        }
        let method = call.method.to_string();
        match (method.as_str(), call.args.first()) {
            ("len" | "is_empty", None) => {}
            ("line", Some(index)) => self.access(&call.receiver, index, turbofish_width(call)),
            ("set_line", Some(index)) => {
                let width = call
                    .args
                    .get(1)
                    .and_then(|value| self.local_array_len(value));
                self.access(&call.receiver, index, width);
            }
            _ => self.refused = true,
        }
        for arg in &call.args {
            self.visit_expr(arg);
        }
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Expr::Path(path) = strip(&call.func) {
            let cooperates = path.path.segments.iter().any(|segment| {
                let name = segment.ident.to_string();
                name.starts_with("atomic_")
                    || name.starts_with("plane_")
                    || name == "sync_cube"
                    || name == "SharedMemory"
            });
            if cooperates {
                self.refused = true;
            }
        }
        visit::visit_expr_call(self, call);
    }

    fn visit_expr_path(&mut self, path: &'ast syn::ExprPath) {
        // An array parameter used other than through the accesses above.
        if path
            .path
            .get_ident()
            .is_some_and(|name| self.arrays.contains(&name.to_string()))
        {
            self.refused = true;
        }
        visit::visit_expr_path(self, path);
    }

    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {
        self.refused = true;
    }

    fn visit_macro(&mut self, _: &'ast syn::Macro) {
        self.refused = true;
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {
        self.refused = true;
    }
}

fn strip_type(pat: &Pat) -> &Pat {
    match pat {
        Pat::Type(typed) => &typed.pat,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysed(body: &str, arrays: &[&str]) -> Option<Exclusive> {
        let block: syn::Block = syn::parse_str(body).unwrap();
        let arrays: HashSet<String> = arrays.iter().map(ToString::to_string).collect();
        let mut all = arrays.clone();
        all.extend(["n".to_string(), "m".to_string()]);
        let fixed = HashSet::from(["n".to_string()]);
        // `out` is the written array of every test body.
        let read_only: HashSet<String> = arrays.iter().filter(|a| *a != "out").cloned().collect();
        let params = Params {
            arrays: &arrays,
            read_only: &read_only,
            all: &all,
            fixed: &fixed,
        };
        analyse(&block, &params, false)
    }

    fn width(body: &str, arrays: &[&str]) -> Option<u32> {
        analysed(body, arrays).map(|exclusive| exclusive.width)
    }

    #[test]
    fn grid_stride_loops_over_parameter_ends_are_exclusive() {
        let add = "{ for i in (ABSOLUTE_POS..n.min(out.len())).step_by(CUBE_COUNT * CUBE_DIM) \
                   { out[i] = a[i] + b[i]; } }";
        let exclusive = analysed(add, &["a", "b", "out"]).unwrap();
        assert_eq!(exclusive.width, 1);
        assert_eq!(exclusive.grid_stride_ends.len(), 1);
        let swapped = "{ for i in (ABSOLUTE_POS..(n as u64 + 1) as u32).step_by(CUBE_DIM * \
                       CUBE_COUNT) { out[i] = a[i]; } }";
        assert_eq!(width(swapped, &["a", "out"]), Some(1));
    }

    #[test]
    fn other_strides_starts_and_ends_are_not() {
        let stride = "{ for i in (ABSOLUTE_POS..n).step_by(CUBE_DIM) { out[i] = a[i]; } }";
        assert_eq!(width(stride, &["a", "out"]), None);
        let start = "{ for i in (UNIT_POS..n).step_by(CUBE_COUNT * CUBE_DIM) { out[i] = 0; } }";
        assert_eq!(width(start, &["out"]), None);
        let inclusive =
            "{ for i in (ABSOLUTE_POS..=n).step_by(CUBE_COUNT * CUBE_DIM) { out[i] = 0; } }";
        assert_eq!(width(inclusive, &["out"]), None);
        // `m` is a `mut` parameter: it could change before the loop.
        let mutable =
            "{ for i in (ABSOLUTE_POS..m).step_by(CUBE_COUNT * CUBE_DIM) { out[i] = 0; } }";
        assert_eq!(width(mutable, &["out"]), None);
        let local = "{ let e = 4u32; for i in (ABSOLUTE_POS..e).step_by(CUBE_COUNT * CUBE_DIM) \
                     { out[i] = 0; } }";
        assert_eq!(width(local, &["out"]), None);
        let shadowed = "{ let n = 9u32; for i in (ABSOLUTE_POS..n).step_by(CUBE_COUNT * \
                        CUBE_DIM) { out[i] = 0; } }";
        assert_eq!(width(shadowed, &["out"]), None);
        let builtin = "{ for i in (ABSOLUTE_POS..CUBE_DIM).step_by(CUBE_COUNT * CUBE_DIM) \
                       { out[i] = 0; } }";
        assert_eq!(width(builtin, &["out"]), None);
        let element = "{ for i in (ABSOLUTE_POS..a[0]).step_by(CUBE_COUNT * CUBE_DIM) \
                       { out[i] = 0; } }";
        assert_eq!(width(element, &["a", "out"]), None);
    }

    #[test]
    fn elementwise_bodies_are_exclusive() {
        let add = "{ let i = ABSOLUTE_POS; if i < out.len() { out[i] = a[i] + b[i]; } }";
        assert_eq!(width(add, &["a", "b", "out"]), Some(1));
        let direct = "{ if ABSOLUTE_POS < n { out[ABSOLUTE_POS] = a[ABSOLUTE_POS] * 2.0; } }";
        assert_eq!(width(direct, &["a", "out"]), Some(1));
        let lines = "{ let i = ABSOLUTE_POS; let x = a.line::<4>(i); let mut z = x; \
                     for k in 0..4u32 { z[k] = x[k] + 1.0; } out.set_line(i, z); }";
        assert_eq!(width(lines, &["a", "out"]), Some(4));
        let repeat = "{ let i = ABSOLUTE_POS; let mut z = [0.0f32; 2]; out.set_line(i, z); }";
        assert_eq!(width(repeat, &["out"]), Some(2));
    }

    #[test]
    fn read_only_arrays_read_anywhere_are_gathered() {
        let neighbour = "{ let i = ABSOLUTE_POS; out[i] = a[i + 1] + b[i]; }";
        let exclusive = analysed(neighbour, &["a", "b", "out"]).unwrap();
        assert_eq!(exclusive.gathered, HashSet::from(["a".to_string()]));
        let rows = "{ for row in (ABSOLUTE_POS..n).step_by(CUBE_COUNT * CUBE_DIM) { \
                    let mut s = 0u32; for c in 0..4u32 { let v = a.line::<8>(row * 4 + c); \
                    s += v[0]; } out[row] = s; } }";
        let exclusive = analysed(rows, &["a", "out"]).unwrap();
        assert_eq!(exclusive.gathered, HashSet::from(["a".to_string()]));
        // The gathered array's line width doesn't count; the written array's does.
        assert_eq!(exclusive.width, 1);
        let literal = "{ out[ABSOLUTE_POS] = a[0]; }";
        assert_eq!(width(literal, &["a", "out"]), Some(1));
    }

    #[test]
    fn other_indices_widths_and_cooperation_are_not() {
        let neighbour = "{ let i = ABSOLUTE_POS; out[i + 1] = a[i]; }";
        assert_eq!(width(neighbour, &["a", "out"]), None);
        let mutable = "{ let mut i = ABSOLUTE_POS; i += 1; out[i] = a[i]; }";
        assert_eq!(width(mutable, &["a", "out"]), None);
        let shadowed = "{ let i = ABSOLUTE_POS; let i = 0u32; out[i] = a[i]; }";
        assert_eq!(width(shadowed, &["a", "out"]), None);
        let param = "{ out[n] = a[n]; }";
        assert_eq!(width(param, &["a", "out"]), None);
        let mixed = "{ let i = ABSOLUTE_POS; let x = out.line::<4>(i); out[i] = x[0]; }";
        assert_eq!(width(mixed, &["out"]), None);
        let unknown = "{ let i = ABSOLUTE_POS; out.set_line(i, make()); }";
        assert_eq!(width(unknown, &["out"]), None);
        let atomic = "{ let i = ABSOLUTE_POS; atomic_add(out, 0u32, a[i]); }";
        assert_eq!(width(atomic, &["a", "out"]), None);
        let shared = "{ let s = SharedMemory::<f32>::new(4); out[ABSOLUTE_POS] = 0.0; }";
        assert_eq!(width(shared, &["out"]), None);
        let plane = "{ out[ABSOLUTE_POS] = plane_sum(a[ABSOLUTE_POS]); }";
        assert_eq!(width(plane, &["a", "out"]), None);
        let loop_var = "{ for i in 0..4u32 { out[i] = a[i]; } }";
        assert_eq!(width(loop_var, &["a", "out"]), None);
    }
}
