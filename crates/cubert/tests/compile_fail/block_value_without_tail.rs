// A block used as a value that doesn't end with an expression is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn tail(x: &Array<f32>, y: &mut Array<f32>) {
    let v = {
        let a = x[ABSOLUTE_POS];
    };
    y[ABSOLUTE_POS] = v;
}

fn main() {}
