// A lifetime parameter on a kernel is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy<'a>(x: &'a Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
