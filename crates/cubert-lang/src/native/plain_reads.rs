//! Plain reads of read-only arrays for kernels that aren't exclusive.
//!
//! The checked body reads arrays with relaxed atomic loads, one element at a time, because
//! another unit of the launch may write the element at the same moment. An array the kernel
//! can't write (`&Array`, never an atomic's target) that overlaps no array the kernel
//! writes can't change during the launch, so its loads may be plain: bounds-checked and
//! reported like the checked body's, but free to be combined and vectorized (a line is
//! checked once and read as one vector load). A matmul reads its operands this way while
//! it writes a tile of the output, which no exclusive body allows.
//!
//! The macro writes such a kernel's body a second time with those arrays as
//! [`GatheredArray`](super::GatheredArray)s; [`plain_reads_allowed`] says, once per run of
//! cubes, whether the launch's buffers let that body run.

use super::array::Args;
use super::exclusive::{ExclusiveParam, disjoint};

/// Whether the body with plain reads may run a launch with `args`: every array in `params`
/// marked `gathered` (read plainly) is aligned for its elements and overlaps no array
/// marked `written`. `params` lists every array and tensor parameter of the kernel.
pub fn plain_reads_allowed(args: &Args<'_>, params: &[ExclusiveParam]) -> bool {
    params.iter().filter(|param| param.gathered).all(|read| {
        let Some(raw) = args.raw(read.slot) else {
            return false;
        };
        (raw.ptr as usize).is_multiple_of(read.elem_size.max(1))
            && params.iter().filter(|param| param.written).all(|written| {
                args.raw(written.slot)
                    .is_some_and(|other| disjoint(&raw, &other))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::{AccessMonitor, RawArray};
    use std::panic::Location;

    struct Silent;
    impl AccessMonitor for Silent {
        fn out_of_bounds(&self, _: usize, _: u64, _: u64, _: bool, _: &Location<'_>) {}
        fn kernel_error(&self, _: &str) {}
        fn data_race(&self, _: &str) {}
    }

    fn param(slot: usize, written: bool, gathered: bool) -> ExclusiveParam {
        ExclusiveParam {
            slot,
            elem_size: 4,
            written,
            gathered,
        }
    }

    #[test]
    fn read_only_input_overlapping_the_output_is_read_atomically() {
        let mut memory = [0u32; 16];
        let base = memory.as_mut_ptr().cast::<u8>();
        let whole = RawArray { ptr: base, len: 64 };
        let second_half = RawArray {
            ptr: base.wrapping_add(32),
            len: 32,
        };
        let first_half = RawArray { ptr: base, len: 32 };
        let params = [param(0, false, true), param(1, true, false)];
        let buffers = [whole, second_half];
        // SAFETY: the buffers are `memory`, alive for the test; nothing is dereferenced.
        let overlapping = unsafe { Args::new(&buffers, &[], &Silent) };
        assert!(!plain_reads_allowed(&overlapping, &params));
        let buffers = [first_half, second_half];
        // SAFETY: as above.
        let apart = unsafe { Args::new(&buffers, &[], &Silent) };
        assert!(plain_reads_allowed(&apart, &params));
    }

    #[test]
    fn misaligned_or_missing_input_is_read_atomically() {
        let mut memory = [0u32; 16];
        let base = memory.as_mut_ptr().cast::<u8>();
        let odd = RawArray {
            ptr: base.wrapping_add(1),
            len: 16,
        };
        let out = RawArray {
            ptr: base.wrapping_add(32),
            len: 32,
        };
        let params = [param(0, false, true), param(1, true, false)];
        let buffers = [odd, out];
        // SAFETY: as in the test above.
        let misaligned = unsafe { Args::new(&buffers, &[], &Silent) };
        assert!(!plain_reads_allowed(&misaligned, &params));
        // SAFETY: as above.
        let missing = unsafe { Args::new(&[], &[], &Silent) };
        assert!(!plain_reads_allowed(&missing, &params));
    }
}
