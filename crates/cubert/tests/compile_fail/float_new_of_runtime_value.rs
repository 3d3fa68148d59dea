// `F::new` of a runtime value is rejected (convert with `as`).
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn widen(x: &Array<u32>, y: &mut Array<f32>) {
    y[ABSOLUTE_POS] = f32::new(x[ABSOLUTE_POS]);
}

fn main() {}
