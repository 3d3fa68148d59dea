//! The plane group's matrix multiply-accumulate (`plane_group_mma`): where its operands
//! lie in shared memory and which accumulator elements each unit holds.
//!
//! A plane group is four consecutive planes of a cube starting at a multiple of four
//! (units `128 q .. 128 q + 127`). Together they compute `ACC = A·B + ACC` for a 64 × K
//! `A` and a K × N `B` of 16-bit floats (`bf16`, `f16`) read straight from shared memory,
//! with a 64 × N `f32` accumulator held in registers, N / 2 elements per unit (the first
//! N / 2 of the unit's accumulator array). On Hopper
//! this is `wgmma.mma_async` with shared-memory descriptors; the CPU emulates it.
//!
//! Both operands are stored in rows of 64 elements (128 bytes), *swizzled*: the eight
//! 16-byte lines of row `r` are permuted by XOR with `r % 8` ([`swizzle`]), so that the
//! eight rows a tensor core reads together fall in distinct banks. The swizzle applies to
//! the element's index in its shared array, which backends place at a 1024-byte boundary.
//!
//! - `A` is K-major: `A(r, c)` is element `swizzle(a_start + 64 r + c)`, rows of `k`
//!   (`lhs` row-major, as it comes from memory). `a_start % 16 == 0`, the K columns lie in
//!   one row (`a_start % 64 + K <= 64`), and `a_start % 512 < 64` (row 0 starts a group of
//!   eight rows).
//! - `B` is N-major, in panels of 64 columns: `B(k, n)` is element
//!   `swizzle(b_start + panel_stride · (n / 64) + 64 k + n % 64)` (`rhs` row-major, 64
//!   columns at a time). `b_start` and `panel_stride` are multiples of 512 (eight rows).
//! - The accumulator: unit `u` of the group (`u = UNIT_POS % 128`, plane `p = u / 32`,
//!   lane `l = u % 32`, `g = l / 4`, `t = l % 4`) holds at index `i` the element at row
//!   `16 p + g + 8 · (i % 4 / 2)`, column `8 · (i / 4) + 2 t + i % 2`: PTX's `wgmma`
//!   layout, the `plane_mma` accumulator's repeated over N / 8 column blocks.
//!
//! N is 64, 128, 192 or 256 and K 16, 32, 48 or 64, both compile-time values.

use crate::elem::ElemType;

/// Elements of a swizzled row: 128 bytes of 16-bit elements.
pub const ROW: u32 = 64;

/// Elements from one group of eight rows to the next: the unit of alignment of `B`'s start
/// and panel stride.
pub const ROW_GROUP: u32 = 8 * ROW;

/// The position of element `index` of a 128-byte-swizzled array of 16-bit elements: its
/// 16-byte line within its 128-byte row goes to `line ^ (row % 8)`.
pub const fn swizzle(index: u32) -> u32 {
    index ^ (((index >> 6) & 7) << 3)
}

/// The shape of one `plane_group_mma`: `A` is 64 × `k`, `B` is `k` × `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupMmaShape {
    /// Columns of `B` and of the accumulator: 64, 128, 192 or 256.
    pub n: u32,
    /// Columns of `A`, rows of `B`: 16, 32, 48 or 64.
    pub k: u32,
}

impl GroupMmaShape {
    /// The shape of `n` columns and depth `k`, or why there is none.
    ///
    /// # Errors
    /// A message when `n` isn't 64, 128, 192 or 256 or `k` isn't 16, 32, 48 or 64.
    pub fn new(n: u32, k: u32) -> Result<Self, String> {
        if !(n.is_multiple_of(64) && (64..=256).contains(&n)) {
            return Err(format!(
                "plane_group_mma multiplies into N = 64, 128, 192 or 256 columns, not {n}"
            ));
        }
        if !(k.is_multiple_of(16) && (16..=64).contains(&k)) {
            return Err(format!(
                "plane_group_mma multiplies K = 16, 32, 48 or 64 columns of A, not {k}"
            ));
        }
        Ok(Self { n, k })
    }

    /// Whether the tensor cores multiply `elem` in this operation: `bf16` and `f16`.
    pub fn multiplies(elem: ElemType) -> bool {
        matches!(elem, ElemType::BF16 | ElemType::F16)
    }

    /// `f32` accumulators per unit: N / 2 (the unit's accumulator array holds at least
    /// this many; the operation uses the first N / 2).
    pub const fn accumulators(self) -> u32 {
        self.n / 2
    }

    /// `(row, column)` of accumulator element `i` of unit `unit` of the group (0..128).
    pub const fn acc(unit: u32, i: u32) -> (u32, u32) {
        let (plane, lane) = (unit / 32 % 4, unit % 32);
        let (g, t) = (lane / 4, lane % 4);
        (
            16 * plane + g + 8 * (i % 4 / 2),
            8 * (i / 4) + 2 * t + i % 2,
        )
    }

    /// The index in its shared array of `A(r, c)`.
    pub const fn a_index(a_start: u32, r: u32, c: u32) -> u32 {
        swizzle(a_start + ROW * r + c)
    }

    /// The index in its shared array of `B(k, n)`.
    pub const fn b_index(b_start: u32, panel_stride: u32, k: u32, n: u32) -> u32 {
        swizzle(b_start + panel_stride * (n / ROW) + ROW * k + n % ROW)
    }

    /// Checks the operands' placement (see the module docs) in arrays of `a_len` and
    /// `b_len` elements.
    ///
    /// # Errors
    /// A message saying which condition fails.
    pub fn check_placement(
        self,
        (a_start, a_len): (u32, u32),
        (b_start, panel_stride, b_len): (u32, u32, u32),
    ) -> Result<(), String> {
        if !a_start.is_multiple_of(16) || a_start % ROW + self.k > ROW || a_start % ROW_GROUP >= ROW
        {
            return Err(format!(
                "plane_group_mma: A starts at element {a_start}, which isn't 16 columns into \
                 the first row of a group of eight swizzled rows with room for K = {}",
                self.k
            ));
        }
        if !b_start.is_multiple_of(ROW_GROUP) || !panel_stride.is_multiple_of(ROW_GROUP) {
            return Err(format!(
                "plane_group_mma: B starts at element {b_start} with panels {panel_stride} \
                 apart; both must be multiples of {ROW_GROUP} (eight swizzled rows)"
            ));
        }
        // A's 64 rows lie in the eight groups of eight rows from its first one.
        let a_end = u64::from(a_start - a_start % ROW_GROUP) + 64 * u64::from(ROW);
        let panels = u64::from(self.n / ROW);
        let b_end = u64::from(b_start)
            + u64::from(panel_stride) * (panels - 1)
            + u64::from(self.k) * u64::from(ROW);
        if a_end > u64::from(a_len) || b_end > u64::from(b_len) {
            return Err(format!(
                "plane_group_mma: the operands reach elements {a_end} of A's {a_len} and \
                 {b_end} of B's {b_len}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The swizzle permutes the lines of each row, keeping elements in their line.
    #[test]
    fn swizzle_permutes_lines_within_rows() {
        for row in 0..16u32 {
            let mut seen = [false; 64];
            for c in 0..64u32 {
                let at = swizzle(row * 64 + c);
                assert_eq!(at / 64, row);
                assert_eq!(at % 8, c % 8);
                seen[(at % 64) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
        // Row 3's line 1 goes to line 2.
        assert_eq!(swizzle(3 * 64 + 8), 3 * 64 + 16);
    }

    /// The accumulator layout covers the 64 × N tile once.
    #[test]
    fn accumulators_cover_the_tile_once() {
        let shape = GroupMmaShape::new(128, 16).unwrap();
        let mut seen = vec![0u32; 64 * 128];
        for unit in 0..128 {
            for i in 0..shape.accumulators() {
                let (row, column) = GroupMmaShape::acc(unit, i);
                seen[(row * 128 + column) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        // Unit 37 (plane 1, lane 5: g = 1, t = 1), element 6 (column block 1, second row
        // half, even column): row 16 + 1 + 8, column 8 + 2.
        assert_eq!(GroupMmaShape::acc(37, 6), (25, 10));
    }

    /// Misplaced operands are refused with the condition they break.
    #[test]
    fn misplaced_operands_are_refused() {
        let shape = GroupMmaShape::new(128, 64).unwrap();
        assert!(shape.check_placement((0, 4096), (0, 4096, 8192)).is_ok());
        assert!(shape.check_placement((16, 4096), (0, 4096, 8192)).is_err());
        assert!(shape.check_placement((64, 8192), (0, 4096, 8192)).is_err());
        assert!(shape.check_placement((0, 4096), (64, 4096, 8192)).is_err());
        assert!(shape.check_placement((0, 4095), (0, 4096, 8192)).is_err());
        assert!(shape.check_placement((0, 4096), (0, 4096, 8191)).is_err());
        assert!(GroupMmaShape::new(80, 16).is_err());
        assert!(GroupMmaShape::new(128, 24).is_err());
    }
}
