// `break` with a value is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn spin(x: &Array<f32>, y: &mut Array<f32>) {
    loop {
        break 1u32;
    }
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
