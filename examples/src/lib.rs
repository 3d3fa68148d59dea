//! Small programs showing how to use cubert. They live in `examples/examples/` and run with
//! `cargo run -p cubert-examples --example NAME`:
//!
//! - `hello_add`: create two buffers, add them with `ops::add`, read the sum back;
//! - `custom_cpu_kernel`: write a `cubert::cpu::CpuKernel`, launch it with
//!   `KernelArguments`, and see an out-of-bounds write of a checked launch come back as an
//!   error at `sync`;
//! - `profiling`: time launches with `client.profile`, print the per-kernel summary and
//!   write a Chrome trace.
