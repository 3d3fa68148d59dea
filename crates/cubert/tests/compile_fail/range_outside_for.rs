// A range used as a value outside a `for` loop is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn span(x: &Array<f32>, y: &mut Array<f32>) {
    let r = 0..4;
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
