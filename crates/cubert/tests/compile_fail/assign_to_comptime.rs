// Assigning to a `#[comptime]` parameter is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn scale(x: &Array<f32>, y: &mut Array<f32>, #[comptime] factor: u32) {
    factor += 1;
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
