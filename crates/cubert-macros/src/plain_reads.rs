//! Which read-only arrays a kernel that isn't exclusive may read plainly.
//!
//! Every `&Array` parameter may, except one that is the target of an atomic (an atomic
//! writes, whatever the parameter's type says). The CPU then checks, per launch, that no
//! array the kernel writes overlaps them (`lang::native::plain_reads_allowed`) before it
//! runs the body over plain loads of them.

use crate::body::ATOMIC_OPS;
use std::collections::HashSet;
use syn::visit::{self, Visit};

/// The names in `read_only` that `block` never passes to an atomic.
pub fn plainly_read(block: &syn::Block, read_only: &HashSet<String>) -> HashSet<String> {
    let mut targets = AtomicTargets::default();
    targets.visit_block(block);
    read_only
        .iter()
        .filter(|name| !targets.names.contains(*name))
        .cloned()
        .collect()
}

/// The first argument of every atomic call.
#[derive(Default)]
struct AtomicTargets {
    names: HashSet<String>,
}

impl Visit<'_> for AtomicTargets {
    fn visit_expr_call(&mut self, call: &syn::ExprCall) {
        if let syn::Expr::Path(path) = &*call.func
            && let Some(function) = path.path.get_ident()
            && ATOMIC_OPS.iter().any(|(name, _)| function == name)
            && let Some(first) = call.args.first()
        {
            // Any name in the first argument counts: a target behind parentheses too.
            let mut names = Names::default();
            names.visit_expr(first);
            self.names.extend(names.names);
        }
        visit::visit_expr_call(self, call);
    }
}

/// Every single-segment path in an expression.
#[derive(Default)]
struct Names {
    names: HashSet<String>,
}

impl Visit<'_> for Names {
    fn visit_path(&mut self, path: &syn::Path) {
        if let Some(ident) = path.get_ident() {
            self.names.insert(ident.to_string());
        }
        visit::visit_path(self, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_plainly(body: &str, read_only: &[&str]) -> Vec<String> {
        let block: syn::Block = syn::parse_str(body).unwrap();
        let read_only = read_only.iter().map(ToString::to_string).collect();
        let mut names: Vec<_> = plainly_read(&block, &read_only).into_iter().collect();
        names.sort();
        names
    }

    #[test]
    fn read_only_arrays_are_read_plainly() {
        assert_eq!(
            read_plainly("{ out[0] = a[1] + b[2]; }", &["a", "b"]),
            ["a", "b"]
        );
    }

    #[test]
    fn atomic_target_is_not_read_plainly() {
        assert_eq!(
            read_plainly(
                "{ if x > 0 { let old = atomic_add((counts), 0u32, 1u32); } out[0] = a[0]; }",
                &["a", "counts"]
            ),
            ["a"]
        );
    }
}
