// A line load that doesn't name its width.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<f32>, y: &mut Array<f32>) {
    let v = x.line(ABSOLUTE_POS);
    y.set_line(ABSOLUTE_POS, v);
}

fn main() {}
