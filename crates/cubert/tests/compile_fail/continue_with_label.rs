// `continue` with a label is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn skip(x: &Array<f32>, y: &mut Array<f32>) {
    for i in 0..4u32 {
        continue 'outer;
    }
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
