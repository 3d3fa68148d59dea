// A macro call in statement position (`println!`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn noisy(x: &Array<f32>, y: &mut Array<f32>) {
    println!("unit {}", ABSOLUTE_POS);
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
