// A loop label is rejected at the label.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn spin(x: &Array<f32>, y: &mut Array<f32>) {
    'outer: loop {
        break;
    }
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
