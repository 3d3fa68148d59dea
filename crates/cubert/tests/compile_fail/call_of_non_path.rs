// Calling something that isn't a function name (a parenthesized callee) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn pick(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = (select)(true, x[0], x[1]);
}

fn main() {}
