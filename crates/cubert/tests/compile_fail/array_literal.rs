// An array literal `[a, b]` is rejected (only `[v; N]` local arrays are).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn table(x: &Array<f32>, y: &mut Array<f32>) {
    let weights = [0.25f32, 0.75f32];
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS] * weights[0];
}

fn main() {}
