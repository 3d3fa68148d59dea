//! The WGSL functions a generated kernel calls, collected while its body is printed.
//!
//! Each helper is registered once under its name with its source; the generator prints
//! every registered helper before the entry point (WGSL resolves module-scope names in any
//! order). A helper that calls others registers them when it is registered, so the
//! printed module holds exactly what the kernel needs.

use std::collections::BTreeMap;

/// The helper functions (and other module-scope declarations) a kernel needs.
#[derive(Debug, Default)]
pub(super) struct Helpers {
    functions: BTreeMap<String, String>,
}

impl Helpers {
    /// Registers `name`, whose source `source` gives (called only the first time), and
    /// returns the name.
    pub(super) fn add(&mut self, name: &str, source: impl FnOnce() -> String) -> String {
        if !self.functions.contains_key(name) {
            let text = source();
            self.functions.insert(name.to_string(), text);
        }
        name.to_string()
    }

    /// Every registered helper's source, in name order, each followed by a blank line.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        for source in self.functions.values() {
            out.push_str(source.trim_matches('\n'));
            out.push_str("\n\n");
        }
        out
    }
}
