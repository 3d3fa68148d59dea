//! The shapes of the plane's matrix multiply-accumulate (`plane_mma`) and the layout of its
//! fragments, per input type.
//!
//! One `plane_mma` multiplies a 16 × K `A` by a K × 8 `B` into a 16 × 8 `f32`
//! accumulator, where a row of `A` is 256 bits: K = 16 for `bf16`/`f16`, 8 for `f32`
//! (multiplied as TF32) and 32 for the 8-bit floats. These are PTX's `mma.m16n8k16`,
//! `m16n8k8` and `m16n8k32`; their fragments are laid out the same way in 32-bit
//! registers, each register holding [`MmaShape::per_register`] consecutive elements of a
//! row of `A` (a column of `B`), so one formula gives every type's layout. With
//! `g = lane / 4`, `t = lane % 4` and `r` elements per register, element `i` of a unit's
//! fragment is in register `i / r`:
//!
//! - `A`: row `g + 8 · (register % 2)`, column `r · t + i % r + 4r · (register / 2)`;
//! - `B`: row (`k`) `r · t + i % r + 4r · register`, column (`n`) `g`;
//! - the accumulator (4 `f32`, every type): row `g + 8 · (i / 2)`, column `2t + i % 2`.
//!
//! Backends and the CPU's emulation read the layout from here.

use crate::elem::ElemType;

/// Which operand of `plane_mma` a fragment load fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaOperand {
    /// `A`: 16 rows × K columns (row-major in shared memory).
    A,
    /// `B`: K rows × 8 columns (`n`) (row-major in shared memory: a row of `B` is 8
    /// consecutive elements).
    B,
}

/// The shape of one `plane_mma` on one input type (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaShape {
    /// Elements of a fragment per 32-bit register: 2, 1 or 4.
    per_register: u32,
}

impl MmaShape {
    /// The shape for fragments of `elem`: `bf16` and `f16` (K = 16), `f32` (TF32, K = 8),
    /// `e4m3` and `e5m2` (K = 32); `None` for the other types, which tensor cores don't
    /// multiply.
    pub const fn of(elem: ElemType) -> Option<Self> {
        let per_register = match elem {
            ElemType::BF16 | ElemType::F16 => 2,
            ElemType::F32 => 1,
            ElemType::E4M3 | ElemType::E5M2 => 4,
            _ => return None,
        };
        Some(Self { per_register })
    }

    /// The shape of `A` by `B` when the two fragments' types may be multiplied together:
    /// the same type, or two 8-bit floats (`e4m3` by `e5m2` is one of the hardware's
    /// forms).
    pub fn of_pair(a: ElemType, b: ElemType) -> Option<Self> {
        let fp8 = |elem| matches!(elem, ElemType::E4M3 | ElemType::E5M2);
        if a == b || (fp8(a) && fp8(b)) {
            Self::of(a)
        } else {
            None
        }
    }

    /// Elements of a fragment per 32-bit register.
    pub const fn per_register(self) -> u32 {
        self.per_register
    }

    /// K: columns of `A`, rows of `B`.
    pub const fn k(self) -> u32 {
        8 * self.per_register
    }

    /// Elements of one unit's fragment of `operand`: `A` holds 4 registers, `B` 2.
    pub const fn fragment_len(self, operand: MmaOperand) -> u32 {
        match operand {
            MmaOperand::A => 4 * self.per_register,
            MmaOperand::B => 2 * self.per_register,
        }
    }

    /// `(row, column)` in `A` of element `i` of the fragment of the unit in lane `lane`.
    pub const fn a(self, lane: u32, i: u32) -> (u32, u32) {
        let r = self.per_register;
        let (g, t, register) = (lane / 4, lane % 4, i / r);
        (
            g + 8 * (register % 2),
            r * t + i % r + 4 * r * (register / 2),
        )
    }

    /// `(k, n)` in `B` of element `i` of the fragment of the unit in lane `lane`.
    pub const fn b(self, lane: u32, i: u32) -> (u32, u32) {
        let r = self.per_register;
        let (g, t, register) = (lane / 4, lane % 4, i / r);
        (r * t + i % r + 4 * r * register, g)
    }

    /// `(row, column)` of `operand`'s element `i` of the fragment of lane `lane`.
    pub const fn element(self, operand: MmaOperand, lane: u32, i: u32) -> (u32, u32) {
        match operand {
            MmaOperand::A => self.a(lane, i),
            MmaOperand::B => self.b(lane, i),
        }
    }

    /// `(row, column)` in the 16 × 8 accumulator of element `i` (of 4) of the fragment of
    /// lane `lane`; the same for every input type.
    pub const fn acc(lane: u32, i: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        (g + 8 * (i / 2), 2 * t + (i % 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each lane's fragments cover every element of `A` and `B` once, for every shape.
    #[test]
    fn fragments_cover_each_operand_once() {
        for elem in [ElemType::BF16, ElemType::F32, ElemType::E4M3] {
            let shape = MmaShape::of(elem).unwrap();
            for operand in [MmaOperand::A, MmaOperand::B] {
                let (rows, columns) = match operand {
                    MmaOperand::A => (16, shape.k()),
                    MmaOperand::B => (shape.k(), 8),
                };
                let mut seen = vec![0u32; (rows * columns) as usize];
                for lane in 0..32 {
                    for i in 0..shape.fragment_len(operand) {
                        let (row, column) = shape.element(operand, lane, i);
                        seen[(row * columns + column) as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "{elem} {operand:?}");
            }
        }
    }

    /// The 16-bit layout is PTX's `m16n8k16` one as the language documented it first.
    #[test]
    fn half_layout_is_m16n8k16() {
        let shape = MmaShape::of(ElemType::F16).unwrap();
        // Lane 5: g = 1, t = 1.
        assert_eq!(shape.a(5, 0), (1, 2));
        assert_eq!(shape.a(5, 3), (9, 3));
        assert_eq!(shape.a(5, 4), (1, 10));
        assert_eq!(shape.b(5, 1), (3, 1));
        assert_eq!(shape.b(5, 2), (10, 1));
        assert_eq!(MmaShape::acc(5, 3), (9, 3));
    }

    /// TF32 and 8-bit layouts are PTX's `m16n8k8` and `m16n8k32` ones.
    #[test]
    fn tf32_and_fp8_layouts_are_ptx() {
        let tf32 = MmaShape::of(ElemType::F32).unwrap();
        // a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (t, g), b1 (t+4, g).
        assert_eq!(tf32.a(6, 1), (9, 2));
        assert_eq!(tf32.a(6, 2), (1, 6));
        assert_eq!(tf32.b(6, 1), (6, 1));
        let fp8 = MmaShape::of(ElemType::E5M2).unwrap();
        // a_i: row g for i < 4 and 8 <= i < 12; column 4t + i % 4 (+16 from i = 8).
        assert_eq!(fp8.a(6, 5), (9, 9));
        assert_eq!(fp8.a(6, 10), (1, 26));
        // b_i: row 4t + i % 4 (+16 from i = 4), column g.
        assert_eq!(fp8.b(6, 6), (26, 1));
        assert_eq!(MmaShape::of_pair(ElemType::E4M3, ElemType::E5M2), Some(fp8));
        assert_eq!(MmaShape::of_pair(ElemType::F16, ElemType::BF16), None);
    }
}
