// The 8-bit floats are storage types: arithmetic on them is refused at compile time with a
// note saying to cast to f32 first.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn add_fp8(x: &Array<e4m3>, y: &mut Array<e4m3>) {
    let i = ABSOLUTE_POS;
    y[i] = x[i] + x[i];
}

fn main() {}
