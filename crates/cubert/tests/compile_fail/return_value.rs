// `return value` is rejected: a kernel returns nothing.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn early(x: &Array<f32>, y: &mut Array<f32>) {
    if ABSOLUTE_POS >= x.len() {
        return 0;
    }
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
