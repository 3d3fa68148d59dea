// A method outside the kernel language's list (`powi`) is rejected at its name.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn square(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS].powi(2);
}

fn main() {}
