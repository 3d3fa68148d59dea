// A `for` range without an end (`0..`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn forever(x: &Array<f32>, y: &mut Array<f32>) {
    for i in 0.. {
        y[i] = x[i];
    }
}

fn main() {}
