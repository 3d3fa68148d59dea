// Dereferencing (`*v`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy(x: &Array<f32>, y: &mut Array<f32>) {
    let v = x[ABSOLUTE_POS];
    y[ABSOLUTE_POS] = *v;
}

fn main() {}
