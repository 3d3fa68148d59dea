// `match` is rejected, pointing at the whole `match`.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn pick(x: &Array<u32>, y: &mut Array<u32>) {
    let v = match x[ABSOLUTE_POS] {
        0 => 1u32,
        _ => 2u32,
    };
    y[ABSOLUTE_POS] = v;
}

fn main() {}
