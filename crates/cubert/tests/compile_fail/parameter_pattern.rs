// A parameter that isn't a plain name (a tuple pattern) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn add((a, b): (f32, f32), y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = a + b;
}

fn main() {}
