// `wait_async_copies` needs its count at compile time (PTX's `cp.async.wait_group` takes
// an immediate).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<f32>, y: &mut Array<f32>, pending: u32) {
    let mut tile = SharedMemory::<f32>::new(128);
    copy_line_async::<4>(&mut tile, UNIT_POS, x, UNIT_POS, true);
    commit_async_copies();
    wait_async_copies(pending);
    sync_cube();
    y[ABSOLUTE_POS] = tile[UNIT_POS];
}

fn main() {}
