//! Tensor metadata: `x.rank()`, `x.shape(d)`, `x.stride(d)` from the info words.
//!
//! The launch's 64-bit info words follow the arrays' offset and length pairs in
//! `cubert_info`: word `k` is `cubert_info[2A + 2k]` (low half) and `[2A + 2k + 1]` (high
//! half), `A` the number of array parameters. Word `scalars + tensor` holds the offset `o`
//! (in words) of the tensor's block `[rank, shape_0 .. shape_{rank-1}, stride_0 ..]`, as
//! on CUDA (`ir::Operation::TensorMeta`). Reads past the words the binding holds (its
//! `arrayLength`), a zero or out-of-range block, and dimensions past the rank give 1 for
//! a shape and 0 otherwise; values above `u32::MAX` read as `u32::MAX`.

use super::helpers::Helpers;

/// The metadata helper of a kernel with `arrays` array parameters; returns its name.
pub(super) fn meta(helpers: &mut Helpers, arrays: u32) -> String {
    helpers.add("cubert_tensor_meta", || {
        let base = 2 * arrays;
        format!(
            r"
// Field `field` (0 rank, 1 shape, 2 stride) of dimension `dim` of the tensor whose block's
// offset is info word `header` (see `ir::Operation::TensorMeta`), saturated to u32.
fn cubert_tensor_meta(header: u32, field: u32, dim: u32) -> u32 {{
    let fallback = select(0u, 1u, field == 1u);
    let length = arrayLength(&cubert_info);
    let words = select(0u, (length - {base}u) / 2u, length >= {base}u);
    if (header >= words) {{
        return fallback;
    }}
    let block = cubert_info[{base}u + 2u * header];
    if (cubert_info[{base}u + 2u * header + 1u] != 0u || block == 0u || block >= words) {{
        return fallback;
    }}
    let rank = cubert_info[{base}u + 2u * block];
    let rank_high = cubert_info[{base}u + 2u * block + 1u];
    var index = block;
    if (field != 0u) {{
        if ((rank_high == 0u && dim >= rank) || dim >= words) {{
            return fallback;
        }}
        if (field == 2u) {{
            if (rank_high != 0u || rank >= words) {{
                return fallback;
            }}
            index = block + 1u + rank + dim;
        }} else {{
            index = block + 1u + dim;
        }}
        if (index >= words) {{
            return fallback;
        }}
    }}
    let low = cubert_info[{base}u + 2u * index];
    let high = cubert_info[{base}u + 2u * index + 1u];
    return select(low, 0xffffffffu, high != 0u);
}}"
        )
    })
}
