// A tensor taken by value.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: Tensor<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = 1.0;
}

fn main() {}
