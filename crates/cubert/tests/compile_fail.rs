//! Compile-fail tests of `#[cubert::kernel]`: every construct the kernel language rejects
//! must stay a compile error from the macro itself, with the message saying what is
//! supported and the span on the offending construct (not a follow-on rustc type error).
//!
//! One file per rejected construct in `tests/compile_fail/`, each next to the `.stderr` it
//! must produce. Each case allows `unused_imports`: on an error the macro writes only the
//! error, which leaves the prelude import unused, and that warning isn't what is pinned.
//! After an intended change to a message, regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p cubert --test compile_fail` and read the diff.

#[test]
fn kernel_rejects_unsupported_constructs() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
