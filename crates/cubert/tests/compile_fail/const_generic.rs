// A const generic parameter is rejected (use `#[comptime]`).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn tile<const N: u32>(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
