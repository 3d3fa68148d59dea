// `let ... else` is rejected at its `else` block.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn early(x: &Array<f32>, y: &mut Array<f32>) {
    let v = x[ABSOLUTE_POS] else {
        return;
    };
    y[ABSOLUTE_POS] = v;
}

fn main() {}
