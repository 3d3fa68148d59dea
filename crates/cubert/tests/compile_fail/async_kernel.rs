// An `async` kernel is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
async fn copy(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
