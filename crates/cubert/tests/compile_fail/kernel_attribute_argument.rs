// `#[kernel]` takes only `crate = path`; any other argument is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel(inline)]
fn copy(x: &Array<f32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = x[ABSOLUTE_POS];
}

fn main() {}
