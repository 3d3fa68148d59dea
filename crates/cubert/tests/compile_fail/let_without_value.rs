// `let x;` without a value is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn late(x: &Array<f32>, y: &mut Array<f32>) {
    let v: f32;
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
