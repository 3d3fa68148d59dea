// A method call with a turbofish (only `x.line::<N>(i)` takes one).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn kernel(x: &Array<u32>, y: &mut Array<u32>) {
    y[ABSOLUTE_POS] = x.len::<u32>();
}

fn main() {}
