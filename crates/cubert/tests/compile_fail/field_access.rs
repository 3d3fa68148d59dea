// Reading a field (`x.len` without the call) falls to the catch-all rejection of other expressions.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn size(x: &Array<f32>, y: &mut Array<u32>) {
    y[ABSOLUTE_POS] = x.len;
}

fn main() {}
