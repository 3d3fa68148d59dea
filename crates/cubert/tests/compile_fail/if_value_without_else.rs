// An `if` used as a value without an `else` is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn clamp(x: &Array<f32>, y: &mut Array<f32>) {
    let v = if x[ABSOLUTE_POS] > 0.0 {
        x[ABSOLUTE_POS]
    };
    y[ABSOLUTE_POS] = v;
}

fn main() {}
