// A shared array whose length is a runtime value is rejected at the length.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn stage(x: &Array<f32>, y: &mut Array<f32>) {
    let mut tile = SharedMemory::<f32>::new(x.len());
    tile[UNIT_POS] = x[ABSOLUTE_POS];
    y[ABSOLUTE_POS] = tile[UNIT_POS];
}

fn main() {}
