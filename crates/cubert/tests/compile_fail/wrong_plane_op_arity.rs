// A plane operation called with the wrong number of arguments is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn reduce(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = plane_sum(x[ABSOLUTE_POS], x[0]);
}

fn main() {}
