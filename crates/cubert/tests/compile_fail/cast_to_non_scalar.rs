// An `as` cast to a type that isn't a kernel scalar (`usize`) is rejected at the type.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn index(x: &Array<f32>, y: &mut Array<u32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS] as usize;
}

fn main() {}
