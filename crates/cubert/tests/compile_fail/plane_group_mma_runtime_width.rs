// `plane_group_mma` whose N is a runtime value: the shape must be known when the kernel is
// built (it picks the instruction and the accumulator's length).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<bf16>, y: &mut Array<f32>, n: u32) {
    let tile = SharedMemory::<bf16>::new(8192);
    let mut acc = [0.0f32; 64];
    plane_group_mma(&mut acc, &tile, 0, &tile, 4096, 4096, n, 16);
    y[ABSOLUTE_POS] = acc[0] + x[0].to_f32();
}

fn main() {}
