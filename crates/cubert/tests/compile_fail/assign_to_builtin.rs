// Assigning to a builtin (`ABSOLUTE_POS`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn shift(x: &Array<f32>, y: &mut Array<f32>) {
    ABSOLUTE_POS = 0;
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
