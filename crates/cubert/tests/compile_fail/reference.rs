// Taking a reference (`&x[i]`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy(x: &Array<f32>, y: &mut Array<f32>) {
    let r = &x[ABSOLUTE_POS];
    y[ABSOLUTE_POS] = r;
}

fn main() {}
