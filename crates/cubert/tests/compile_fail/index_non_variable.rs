// Indexing something other than an array variable (`x[i][j]`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn nested(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[0][1];
}

fn main() {}
