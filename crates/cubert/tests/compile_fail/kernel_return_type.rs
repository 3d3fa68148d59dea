// A kernel with a return type is rejected (results go to `&mut Array` parameters).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn first(x: &Array<f32>) -> f32 {
    x[0]
}

fn main() {}
