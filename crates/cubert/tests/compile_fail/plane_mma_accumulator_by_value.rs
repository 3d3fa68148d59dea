// `plane_mma` whose accumulator isn't a local array variable taken `&mut`.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<bf16>, y: &mut Array<f32>) {
    let acc = [0.0f32; 4];
    let a = [x[0]; 8];
    let b = [x[1]; 4];
    plane_mma(acc, a, b);
    y[ABSOLUTE_POS] = acc[0];
}

fn main() {}
