// A string literal is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn named(x: &Array<f32>, y: &mut Array<f32>) {
    let name = "saxpy";
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
