// A parameter attribute other than `#[comptime]` is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn copy(#[allow(unused)] x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = 0.0f32;
}

fn main() {}
