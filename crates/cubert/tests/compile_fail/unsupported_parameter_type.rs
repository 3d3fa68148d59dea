// A parameter of a type that isn't a scalar, an array or a comptime value (a slice) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy(x: &[f32], y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
