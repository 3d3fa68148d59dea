//! Writes one matmul kernel of the kernel language as CUDA source and as the cubin NVRTC
//! builds for sm_90, for inspecting the generated machine code without a GPU
//! (`scripts/sass-stats` runs it and counts the SASS instructions).
//!
//! ```text
//! cargo run -p cubert-cuda --example dump_kernel -- <kind> <tiling> [checked] <dir>
//! ```
//!
//! - `bf16 <i>` / `tf32 <i>`: the tensor-core matmul with `MMA_TILINGS[i]`;
//! - `group <i>`: the plane group's (`wgmma`) bf16 matmul with `GROUP_MMA_TILINGS[i]`;
//! - `f32 <variant>`: the CUDA backend's f32 matmul variant of that name (`d128x128k8`);
//! - `add <units|lines>`: the f32 add of a unit per element or per line of 4, as `ops::add`
//!   launches it on GPUs.
//!
//! Unchecked launches by default (as `matmul_tensor_cores` and `ops` launch them),
//! `checked` for checked ones. Writes `<dir>/kernel.cu` and `<dir>/kernel.cubin`.

use cubert_cuda::lang::{cube_dim_option, entry_name, generate};
use cubert_cuda::standard_kernels::matmul_tilings;
use cubert_cuda::{PRELUDE, compile_cuda, nvrtc_options};
use cubert_runtime::kernel::standard::matmul_group_mma::{
    GROUP_MMA_TILINGS, matmul_plane_group_mma,
};
use cubert_runtime::kernel::standard::matmul_mma::{MMA_TILINGS, matmul_plane_mma};
use cubert_runtime::kernel::standard::matmul_tf32::matmul_plane_mma_tf32;
use cubert_runtime::kernel::standard::{
    ELEMENTWISE_CUBE_DIM, StandardKernel, lines_definition, matmul_definition, units_definition,
};
use cubert_runtime::lang::prelude::bf16;
use cubert_runtime::{CubeDim, ElemType, ExecutionMode};
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: dump_kernel <bf16|tf32|group|f32|add> <tiling index or variant> [checked] <dir>";
    let (Some(kind), Some(tiling), Some(dir)) = (args.first(), args.get(1), args.last()) else {
        return Err(usage.into());
    };
    let mode = if args.iter().any(|arg| arg == "checked") {
        ExecutionMode::Checked
    } else {
        ExecutionMode::Unchecked
    };
    let (definition, cube_dim) = match kind.as_str() {
        "f32" => {
            let (_, found) = matmul_tilings()
                .into_iter()
                .find(|(name, _)| name == tiling)
                .ok_or_else(|| format!("no f32 matmul variant named {tiling}"))?;
            matmul_definition(ElemType::F32, found, "dump")?
        }
        "bf16" | "tf32" => {
            let t = MMA_TILINGS
                .get(tiling.parse::<usize>()?)
                .ok_or_else(|| format!("MMA_TILINGS has {} tilings", MMA_TILINGS.len()))?;
            let (m, n, pm, pn, d, s) = (
                t.tile_m, t.tile_n, t.planes_m, t.planes_n, t.depth, t.stages,
            );
            let definition = if kind == "bf16" {
                matmul_plane_mma::definition::<bf16>(m, n, pm, pn, d, s)
            } else {
                matmul_plane_mma_tf32::definition(m, n, pm, pn, d, s)
            };
            (definition, CubeDim::new_1d(t.units()))
        }
        "group" => {
            let t = GROUP_MMA_TILINGS
                .get(tiling.parse::<usize>()?)
                .ok_or_else(|| {
                    format!("GROUP_MMA_TILINGS has {} tilings", GROUP_MMA_TILINGS.len())
                })?;
            let definition =
                matmul_plane_group_mma::definition::<bf16>(t.groups, t.tile_n, t.stages);
            (definition, CubeDim::new_1d(t.units()))
        }
        "add" => {
            let kernel = StandardKernel::Add(ElemType::F32);
            let definition = match tiling.as_str() {
                "units" => units_definition(kernel)?,
                "lines" => lines_definition(kernel),
                _ => None,
            };
            let definition = definition.ok_or("add takes `units` or `lines`")?;
            (definition, ELEMENTWISE_CUBE_DIM)
        }
        _ => return Err(usage.into()),
    };
    let ir = definition.ir().map_err(|error| error.to_string())?;
    let entry = entry_name(definition.name(), definition.id());
    let source = generate(ir, &entry)?;
    let options = nvrtc_options(
        (9, 0),
        mode,
        &[cube_dim_option(cube_dim), "--fmad=false".into()],
    );
    // The source first: it is written even where NVRTC is missing.
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("kernel.cu"), format!("{PRELUDE}\n{source}"))?;
    let cubin = compile_cuda(&entry, &source, &options).map_err(|log| log.to_string())?;
    std::fs::write(dir.join("kernel.cubin"), cubin)?;
    println!("{}", definition.id());
    Ok(())
}
