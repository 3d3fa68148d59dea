// A path such as `u32::MAX` is rejected (constants aren't in the language yet).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn fill(y: &mut Array<u32>) {
    y[ABSOLUTE_POS] = u32::MAX;
}

fn main() {}
