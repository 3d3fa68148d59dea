// A `let` annotated with a type that isn't a scalar or a generic element type is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn index(x: &Array<f32>, y: &mut Array<f32>) {
    let i: usize = 0;
    y[ABSOLUTE_POS] = x[i];
}

fn main() {}
