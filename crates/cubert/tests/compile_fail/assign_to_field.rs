// Assigning to something other than a variable or an array element is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn poke(x: &Array<f32>, y: &mut Array<f32>) {
    y.len = x[ABSOLUTE_POS];
}

fn main() {}
