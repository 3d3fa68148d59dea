// Calling a Rust function that isn't a kernel intrinsic is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

fn helper(v: f32) -> f32 {
    v * 2.0
}

#[cubert::kernel]
fn double(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = helper(x[ABSOLUTE_POS]);
}

fn main() {}
