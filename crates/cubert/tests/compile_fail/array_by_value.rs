// An `Array` parameter taken by value is rejected (take it by reference).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy(x: Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
