// `SharedMemory::new(len)` without the element type is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn stage(x: &Array<f32>, y: &mut Array<f32>) {
    let mut tile = SharedMemory::new(8);
    tile[UNIT_POS] = x[ABSOLUTE_POS];
    y[ABSOLUTE_POS] = tile[UNIT_POS];
}

fn main() {}
