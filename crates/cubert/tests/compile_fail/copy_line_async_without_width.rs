// `copy_line_async` must name its line's width.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<f32>, y: &mut Array<f32>) {
    let mut tile = SharedMemory::<f32>::new(128);
    copy_line_async(&mut tile, UNIT_POS, x, UNIT_POS, true);
    wait_async_copies(0);
    sync_cube();
    y[ABSOLUTE_POS] = tile[UNIT_POS];
}

fn main() {}
