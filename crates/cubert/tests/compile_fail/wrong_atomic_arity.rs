// An atomic called with the wrong number of arguments is rejected.
#![allow(unused_imports)]
use cubert::lang::prelude::*;

#[cubert::kernel]
fn count(x: &Array<u32>, y: &mut Array<u32>) {
    atomic_add(y, 0);
}

fn main() {}
