//! The `cubert` command (being written).

fn main() {}
