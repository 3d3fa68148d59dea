// A closure inside a kernel is rejected at the closure.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn double(x: &Array<f32>, y: &mut Array<f32>) {
    let f = |v: f32| v * 2.0;
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
