// A macro call used as a value (`vec![...]`) is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn allocate(x: &Array<f32>, y: &mut Array<f32>) {
    let v = vec![x[ABSOLUTE_POS]];
    y[ABSOLUTE_POS] = v[0];
}

fn main() {}
