// A `for` loop over something other than a range (an array) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn total(x: &Array<f32>, y: &mut Array<f32>) {
    let mut sum = 0.0f32;
    for v in x {
        sum += v;
    }
    y[ABSOLUTE_POS] = sum;
}

fn main() {}
