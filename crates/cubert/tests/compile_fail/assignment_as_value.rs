// An assignment used as a value is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn chain(x: &Array<f32>, y: &mut Array<f32>) {
    let mut a = 0.0f32;
    let b = (a = x[ABSOLUTE_POS]);
    y[ABSOLUTE_POS] = a;
}

fn main() {}
