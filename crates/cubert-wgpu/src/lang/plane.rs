//! Plane operations as WGSL subgroup operations.
//!
//! A plane is the unit's subgroup: `PLANE_DIM` is `subgroup_size` (32 on NVIDIA, 32 or
//! 64 on AMD, 8 to 32 on Intel, 32 on Apple, 8 on lavapipe) and `UNIT_POS_PLANE` is
//! `subgroup_invocation_id` (`UNIT_POS % PLANE_DIM` in cubes of more than one dimension,
//! where naga refuses that builtin). Kernels written for planes of 32 (a butterfly of
//! `UNIT_POS_PLANE ^ 16, ^ 8, ..`, shared arrays of `CUBE_DIM / 32` partial sums) compute
//! something else where `PLANE_DIM` isn't 32. The units taking part in an operation are the subgroup's
//! active invocations (`subgroupBallot(true)`), as CUDA's are `__activemask()`.
//!
//! - `plane_sum`, `plane_min`, `plane_max` read every lane's value with
//!   `subgroupShuffle` and fold the active ones in lane order with the language's
//!   arithmetic (wrapping integers, halves rounded after each step; a sum from zero, a
//!   minimum or maximum from the first active lane), so a float sum has the bits of the
//!   CPU's and CUDA's over the same lanes. `subgroupAdd` would leave the order to the
//!   device.
//! - `plane_all`, `plane_any` are `subgroupAll`, `subgroupAny` (over the active
//!   invocations).
//! - `plane_shuffle(v, lane)` reads lane `lane % PLANE_DIM`, and gives zero when that
//!   lane's unit isn't active (`subgroupShuffle` from an inactive invocation is
//!   indeterminate). `bool` values move as `u32`.
//!
//! WGSL doesn't say which invocations form a subgroup; every Vulkan, Metal and D3D12
//! driver builds them from consecutive `local_invocation_index` values for compute
//! shaders, which is what `UNIT_POS / PLANE_DIM` indexing relies on (as on CUDA).

use super::arith;
use super::error::{GenerateError, fail};
use super::helpers::Helpers;
use super::wgsl_type::{is_int, register, zero};
use cubert_lang::ElemType;
use cubert_lang::ir::{BinaryOp, PlaneOp};

/// The WGSL test of whether `lane` is set in ballot `lanes`.
const LANE_ACTIVE: &str = "((lanes[{lane} / 32u] >> ({lane} % 32u)) & 1u) != 0u";

fn lane_active(lane: &str) -> String {
    LANE_ACTIVE.replace("{lane}", lane)
}

/// The expression of plane reduction `op` of `x` (a register of `elem`).
pub(super) fn reduce(
    helpers: &mut Helpers,
    op: PlaneOp,
    elem: ElemType,
    x: &str,
) -> Result<String, GenerateError> {
    match op {
        PlaneOp::All | PlaneOp::Any if elem == ElemType::Bool => Ok(format!(
            "{}({x})",
            if op == PlaneOp::All {
                "subgroupAll"
            } else {
                "subgroupAny"
            }
        )),
        PlaneOp::All | PlaneOp::Any => fail(format!("{op:?} of {elem}, not bool")),
        _ if elem == ElemType::Bool => fail(format!("{op:?} of bool")),
        PlaneOp::Sum | PlaneOp::Min | PlaneOp::Max => {
            let (step, name) = match op {
                PlaneOp::Sum => (BinaryOp::Add, "sum"),
                PlaneOp::Min => (BinaryOp::Min, "min"),
                _ => (BinaryOp::Max, "max"),
            };
            let fold = arith::binary(helpers, step, elem, "total", "x")?;
            let function = format!("cubert_plane_{name}_{elem}");
            let reg = register(elem);
            helpers.add(&function, || {
                let active = lane_active("lane");
                if op == PlaneOp::Sum {
                    let start = zero(elem);
                    format!(
                        r"
// `plane_{name}` of {elem}: the active lanes' values folded in lane order, from zero.
fn {function}(v: {reg}, plane_dim: u32) -> {reg} {{
    let lanes = subgroupBallot(true);
    var total: {reg} = {start};
    for (var lane = 0u; lane < plane_dim; lane = lane + 1u) {{
        let x = subgroupShuffle(v, lane);
        if ({active}) {{
            total = {fold};
        }}
    }}
    return total;
}}"
                    )
                } else {
                    format!(
                        r"
// `plane_{name}` of {elem}: the active lanes' values folded in lane order.
fn {function}(v: {reg}, plane_dim: u32) -> {reg} {{
    let lanes = subgroupBallot(true);
    var total: {reg} = v;
    var first = true;
    for (var lane = 0u; lane < plane_dim; lane = lane + 1u) {{
        let x = subgroupShuffle(v, lane);
        if ({active}) {{
            if (first) {{
                total = x;
                first = false;
            }} else {{
                total = {fold};
            }}
        }}
    }}
    return total;
}}"
                    )
                }
            });
            Ok(format!("{function}({x}, cubert_plane_dim)"))
        }
    }
}

/// The expression of `plane_shuffle(x, lane)` for `x` a register of `elem`.
pub(super) fn shuffle(helpers: &mut Helpers, elem: ElemType, x: &str, lane: &str) -> String {
    let reg = register(elem);
    let function = format!("cubert_plane_shuffle_{reg}");
    helpers.add(&function, || {
        let active = lane_active("source");
        let (moved, back, zero) = if elem == ElemType::Bool {
            ("select(0u, 1u, v)", "(x != 0u)", "false".to_string())
        } else {
            ("v", "x", zero(elem))
        };
        debug_assert!(elem == ElemType::Bool || is_int(elem) || elem.is_float());
        format!(
            r"
// `plane_shuffle` of {reg}: the value of lane `lane % plane_dim`, zero if it isn't active.
fn {function}(v: {reg}, lane: u32, plane_dim: u32) -> {reg} {{
    let lanes = subgroupBallot(true);
    let source = lane % plane_dim;
    let x = subgroupShuffle({moved}, source);
    if ({active}) {{
        return {back};
    }}
    return {zero};
}}"
        )
    });
    format!("{function}({x}, {lane}, cubert_plane_dim)")
}
