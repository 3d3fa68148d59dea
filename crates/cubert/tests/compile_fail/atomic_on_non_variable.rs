// An atomic whose first argument isn't an array variable.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<i32>, y: &mut Array<i32>) {
    let old = atomic_add(y[0], 0u32, x[ABSOLUTE_POS]);
}

fn main() {}
