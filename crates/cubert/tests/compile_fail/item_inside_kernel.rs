// An item (here a nested `fn`) inside a kernel is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn outer(x: &Array<f32>, y: &mut Array<f32>) {
    fn inner() {}
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
