// A destructuring `let` pattern is rejected (a kernel variable is a plain name).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn pair(x: &Array<f32>, y: &mut Array<f32>) {
    let (a, b) = (x[0], x[1]);
    y[ABSOLUTE_POS] = a + b;
}

fn main() {}
