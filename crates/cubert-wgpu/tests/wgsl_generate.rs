//! The WGSL generator of the kernel language: every kernel of the language's tests and
//! every standard kernel prints WGSL that naga (the parser and validator wgpu runs on every
//! shader) accepts with the capabilities of the target, for targets with every optional
//! feature and with none; a kernel that needs a missing feature is refused with an
//! unsupported error, never printed as invalid WGSL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_runtime::CubeDim;
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::{self, MatmulTiling, RowSplit, StandardKernel};
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::ir::{Block, Builtin, Instruction, Kernel, Operation, Param};
use cubert_runtime::lang::prelude::*;
use cubert_wgpu::lang::{GenerateError, WgslTarget, entry_name, generate};
use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};

#[cubert_macros::kernel(crate = cubert_runtime)]
fn saxpy<F: Float>(a: F, x: &Array<F>, y: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// Arithmetic, comparisons, bit operations, compound assignment and `select` on `T`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn integer_ops<T: Int>(x: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS_X;
    if i >= x.len() {
        return;
    }
    let a = x[i];
    let b = x[(i + 1) % x.len()];
    let mut acc = a + b - a * b;
    acc += a / b;
    acc -= a % b;
    acc = acc ^ (a & b) | (a >> 3u32);
    acc = acc << (b & x[0]) as u32;
    acc = select(a < b, acc, !acc);
    acc = -acc;
    out[i] = acc.abs().min(a).max(b);
    out[i] += a;
}

/// Control flow: if/else chains, `if` as a value, loops of every kind, `&&`/`||`, local
/// arrays, and compile-time parameters.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn control_flow(
    x: &Array<i32>,
    out: &mut Array<i32>,
    #[comptime] unroll: u32,
    #[comptime] negate: bool,
) {
    let i = UNIT_POS + CUBE_POS * CUBE_DIM;
    let mut local = [0i32; 8];
    let mut total = 0i32;
    for j in 0..8u32 {
        local[j] = x[(i + j) % x.len()];
    }
    for j in (0..unroll).step_by(2) {
        total += local[j % 8];
    }
    for j in 1..=3i32 {
        if j == 2 {
            continue;
        }
        total += j;
    }
    let mut k = 0u32;
    while k < 4 {
        k += 1;
        if k > 2 && total > 100 {
            break;
        }
    }
    loop {
        total -= 1;
        if total < 0 || k == 0 {
            break;
        }
    }
    let sign = if total > 0 {
        1
    } else if total < 0 {
        -1
    } else {
        0
    };
    if negate {
        total = -total;
    }
    let copy = local;
    local[0] = 7;
    if i < out.len() && x[i] != 0 {
        out[i] = total * sign + copy[0] + (CUBE_COUNT_Y + UNIT_POS_Z + ABSOLUTE_POS_Y) as i32;
    }
}

/// Every float method, `F::new`, and casts to and from `F`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_math<F: Float>(x: &Array<F>, out: &mut Array<F>, flags: &mut Array<u8>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let mut r = v.sqrt() + v.exp() + v.ln() + v.log2() + v.log10();
        r += v.sin() * v.cos() - v.tan() / v.tanh();
        r += v.erf() + v.floor() + v.ceil() + v.round() + v.trunc() + v.recip();
        r += v.abs().powf(F::new(1.5)) + v.mul_add(F::new(2.0), F::new(-1.0));
        r = r.min(F::new(1.0e4)).max(-F::new(1.0e4)) % F::new(7.0);
        out[i] = r;
        flags[i] = (v.is_nan() as u8) | ((r > v) as u8) << 1u32 | (v as i32 as u8);
    }
}

/// The float operations that have a WGSL implementation for `f64` too.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn float_arithmetic<F: Float>(x: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let mut r = v.sqrt() + v.floor() + v.ceil() + v.round() + v.trunc() + v.recip();
        r += v.abs() * v / F::new(3.0) - v.mul_add(F::new(2.0), F::new(-1.0));
        r = r.min(F::new(1.0e4)).max(-F::new(1.0e4)) % F::new(7.0);
        out[i] = -r;
    }
}

/// Casts between `A` and `B` both ways, through `bool` and `u64`.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn casts<A: Scalar, B: Scalar>(x: &Array<A>, out: &mut Array<B>, back: &mut Array<A>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let b = x[i] as B;
        out[i] = b;
        back[i] = b as A;
        let flag = x[i] as bool;
        back[i] = select(flag, back[i], (x[i] as u64) as A);
    }
}

/// Casts between `A` and `B` without 64-bit types.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn casts_32<A: Scalar, B: Scalar>(x: &Array<A>, out: &mut Array<B>, back: &mut Array<A>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let b = x[i] as B;
        out[i] = b;
        back[i] = b as A;
        let flag = x[i] as bool;
        back[i] = select(flag, back[i], (x[i] as u32) as A);
    }
}

/// Operations of constants only: WGSL would evaluate them when the shader is created and
/// reject the overflows, infinities, NaNs and divisions by zero the language defines.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn constant_folding(out: &mut Array<f32>, ints: &mut Array<i32>, #[comptime] special: f32) {
    let zero = 0.0f32;
    out[5] = out[5] * special;
    out[6] = special;
    out[7] = special.min(out[7]);
    out[0] = 1.0f32 / 0.0f32;
    out[1] = (-1.0f32).sqrt();
    out[2] = 3.0e38f32 * 2.0f32;
    out[3] = 0.0f32.ln();
    out[4] = zero;
    ints[0] = (-2147483647i32 - 1i32) / -1i32;
    ints[1] = 7i32 / 0i32;
    ints[2] = 7i32 % 0i32;
    ints[3] = 2147483647i32 + 1i32;
    ints[4] = (-1.0e20f32) as i32;
}

/// Atomics on global and shared arrays of every atomic type, and a plane of each
/// reduction.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn cooperation(floats: &mut Array<f32>, ints: &mut Array<i32>, units: &mut Array<u32>) {
    let mut partial = SharedMemory::<f32>::new(8);
    let mut counts = SharedMemory::<u32>::new(4);
    let v = floats[ABSOLUTE_POS];
    let sum = plane_sum(v);
    if UNIT_POS_PLANE == 0 {
        partial[UNIT_POS / PLANE_DIM] = sum;
    }
    sync_cube();
    atomic_add(counts, 0u32, 1u32);
    atomic_max(floats, 1u32, v);
    atomic_min(floats, 2u32, plane_min(v));
    atomic_add(floats, 3u32, plane_max(v));
    atomic_compare_exchange(floats, 4u32, 0.0f32, v);
    atomic_exchange(ints, 0u32, plane_sum(ints[ABSOLUTE_POS]));
    atomic_max(ints, 1u32, -1i32);
    atomic_compare_exchange(units, 0u32, 1u32, 2u32);
    atomic_min(units, 1u32, plane_shuffle(units[ABSOLUTE_POS], 3u32));
    if plane_all(v > 0.0f32) || plane_any(v < 0.0f32) {
        units[2] = atomic_add(counts, 1u32, 1u32) + counts[0];
    }
    sync_cube();
    floats[0] = partial[0];
}

/// The targets the tests print for: every feature and none, checked and not (with every
/// feature, each array accessed only by lines of 4 prints as `vec4`s).
fn targets() -> [(&'static str, WgslTarget); 4] {
    let every = WgslTarget {
        shader_f16: true,
        shader_f64: true,
        shader_int64: true,
        subgroups: true,
        checked: true,
        vector_lines: u64::MAX,
    };
    let none = WgslTarget {
        shader_f16: false,
        shader_f64: false,
        shader_int64: false,
        subgroups: false,
        checked: false,
        vector_lines: 0,
    };
    [
        ("every feature, checked", every),
        (
            "every feature, unchecked",
            WgslTarget {
                checked: false,
                ..every
            },
        ),
        ("no feature, unchecked", none),
        (
            "64-bit integers and subgroups, checked",
            WgslTarget {
                shader_int64: true,
                subgroups: true,
                checked: true,
                ..none
            },
        ),
    ]
}

/// naga's capabilities for `target`.
fn capabilities(target: &WgslTarget) -> Capabilities {
    let mut capabilities = Capabilities::empty();
    if target.shader_f16 {
        capabilities |= Capabilities::SHADER_FLOAT16;
    }
    if target.shader_f64 {
        capabilities |= Capabilities::FLOAT64;
    }
    if target.shader_int64 {
        capabilities |= Capabilities::SHADER_INT64;
    }
    if target.subgroups {
        capabilities |= Capabilities::SUBGROUP;
    }
    capabilities
}

/// Parses and validates `source` as wgpu would for an adapter of `target`.
fn validate(source: &str, target: &WgslTarget) -> Result<(), String> {
    let module =
        naga::front::wgsl::parse_str(source).map_err(|error| error.emit_to_string(source))?;
    let mut validator = Validator::new(ValidationFlags::all(), capabilities(target));
    if target.subgroups {
        validator
            .subgroup_stages(ShaderStages::COMPUTE)
            .subgroup_operations(SubgroupOperationSet::all());
    }
    validator
        .validate(&module)
        .map(|_| ())
        .map_err(|error| error.emit_to_string(source))
}

/// What a kernel needs of the adapter: (64-bit integers, f64, subgroups).
fn needs(kernel: &Kernel) -> (bool, bool, bool) {
    let mut elems: Vec<ElemType> = kernel.locals.iter().map(|local| local.ty.elem()).collect();
    for param in &kernel.params {
        match param {
            Param::Array { elem, .. } | Param::Scalar(elem) => elems.push(*elem),
            _ => {}
        }
    }
    fn cooperates(block: &Block) -> bool {
        block
            .instructions
            .iter()
            .any(|instruction| match instruction {
                Instruction::Assign { op, .. } => matches!(
                    op,
                    Operation::Plane(..)
                        | Operation::PlaneShuffle { .. }
                        | Operation::Builtin(Builtin::PlaneDim | Builtin::UnitPosPlane)
                ),
                Instruction::If {
                    then, otherwise, ..
                } => cooperates(then) || cooperates(otherwise),
                Instruction::Loop { body } | Instruction::RangeLoop { body, .. } => {
                    cooperates(body)
                }
                _ => false,
            })
    }
    let int64 = elems
        .iter()
        .any(|elem| matches!(elem, ElemType::I64 | ElemType::U64 | ElemType::F64));
    let f64 = elems.contains(&ElemType::F64);
    (int64, f64, cooperates(&kernel.body))
}

/// Prints `definition` for every target, validates what prints, and checks that every
/// refusal is an unsupported feature the target lacks. Returns the failures.
fn check(definition: &KernelDefinition, cube_dim: (u32, u32, u32)) -> Vec<String> {
    let ir = definition.ir().unwrap_or_else(|error| panic!("{error}"));
    let entry = entry_name(definition.name(), definition.id());
    let (int64, f64, subgroups) = needs(ir);
    let mut failures = Vec::new();
    for (label, target) in targets() {
        let lacks = (int64 && !target.shader_int64)
            || (f64 && !target.shader_f64)
            || (subgroups && !target.subgroups);
        match generate(ir, &entry, cube_dim, &target) {
            Ok(source) => {
                if lacks {
                    failures.push(format!(
                        "{} ({label}): printed though the target lacks a feature",
                        definition.id()
                    ));
                }
                if let Err(log) = validate(&source, &target) {
                    failures.push(format!("{} ({label}):\n{log}\n{source}", definition.id()));
                }
            }
            Err(error) => {
                // WGSL has no tensor cores: `plane_mma` and `plane_group_mma` are refused
                // everywhere.
                let plane_mma = error.to_string().contains("plane_mma")
                    || error.to_string().contains("plane_group_mma");
                if !error.is_unsupported() || !(lacks || plane_mma) {
                    failures.push(format!("{} ({label}): refused: {error}", definition.id()));
                }
            }
        }
    }
    failures
}

fn assert_all_print(definitions: &[(KernelDefinition, (u32, u32, u32))]) {
    let failures: Vec<String> = definitions
        .iter()
        .flat_map(|(definition, cube_dim)| check(definition, *cube_dim))
        .collect();
    let summary: Vec<String> = failures
        .iter()
        .map(|failure| failure.lines().take(6).collect::<Vec<_>>().join("\n"))
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures of {} kernels:\n{}\n\nfirst:\n{}",
        failures.len(),
        definitions.len(),
        summary.join("\n"),
        failures[0]
    );
}

/// Adds by lines of 4 (`a` and `out`), reading `b` element by element too.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn add_lines_mixed<T: Numeric>(a: &Array<T>, b: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i * 4 < out.len() {
        let x = a.line::<4>(i);
        let y = b.line::<4>(i);
        let mut z = x;
        for k in 0..4u32 {
            z[k] = x[k] + y[k] + b[i];
        }
        out.set_line(i, z);
    }
}

#[test]
fn arrays_accessed_only_by_lines_of_four_print_as_vec4() {
    use cubert_wgpu::lang::vector::candidates;
    let f32_kernel = add_lines_mixed::definition::<f32>();
    let ir = f32_kernel.ir().unwrap();
    // `b` is read by lines and by elements; `a` and `out` only by lines.
    assert_eq!(candidates(ir), 0b101);
    // 2-byte and 8-byte elements stay scalar.
    assert_eq!(
        candidates(add_lines_mixed::definition::<f16>().ir().unwrap()),
        0
    );
    assert_eq!(
        candidates(add_lines_mixed::definition::<f64>().ir().unwrap()),
        0
    );
    let entry = entry_name(f32_kernel.name(), f32_kernel.id());
    for checked in [false, true] {
        let target = WgslTarget {
            checked,
            ..targets()[0].1
        };
        let source = generate(ir, &entry, (256, 1, 1), &target).unwrap();
        assert!(source.contains("cubert_a0: array<vec4<f32>>"), "{source}");
        assert!(source.contains("cubert_a1: array<f32>"), "{source}");
        assert!(source.contains("cubert_a2: array<vec4<f32>>"), "{source}");
        validate(&source, &target).unwrap();
        // Only the arrays the target names print as vectors.
        let source = generate(
            ir,
            &entry,
            (256, 1, 1),
            &WgslTarget {
                vector_lines: 0b100,
                ..target
            },
        )
        .unwrap();
        assert!(source.contains("cubert_a0: array<f32>"), "{source}");
        assert!(source.contains("cubert_a2: array<vec4<f32>>"), "{source}");
        validate(&source, &target).unwrap();
    }
}

#[test]
fn only_kernels_with_checked_accesses_count_into_the_status_word() {
    // The server reads the status word back after a checked launch only where the printed
    // kernel counts into it (`&cubert_status[0]`).
    let target = targets()[0].1;
    let print = |definition: &KernelDefinition| {
        let entry = entry_name(definition.name(), definition.id());
        generate(definition.ir().unwrap(), &entry, (64, 1, 1), &target).unwrap()
    };
    let noop = standard::definition(StandardKernel::Noop)
        .unwrap()
        .unwrap()
        .0;
    assert!(!print(&noop).contains("&cubert_status[0]"));
    assert!(print(&saxpy::definition::<f32>()).contains("&cubert_status[0]"));
}

#[test]
fn constant_range_loops_print_unrolled_and_dynamic_ones_as_loops() {
    let target = targets()[1].1;
    // `for k in 0..4u32` over a line: four copies, each after `k`'s assignment.
    let lines = add_lines_mixed::definition::<f32>();
    let entry = entry_name(lines.name(), lines.id());
    let source = generate(lines.ir().unwrap(), &entry, (64, 1, 1), &target).unwrap();
    assert!(!source.contains("for (var t_"), "{source}");
    for k in 0..4 {
        assert!(source.contains(&format!(" = {k}u;")), "{source}");
    }
    // The standard kernel's grid-stride loop ends at a launch value: it stays a loop.
    let standard = standard::lines_definition(StandardKernel::Add(ElemType::F32)).unwrap();
    let entry = entry_name(standard.name(), standard.id());
    let source = generate(standard.ir().unwrap(), &entry, (64, 1, 1), &target).unwrap();
    assert_eq!(source.matches("for (var t_").count(), 1, "{source}");
}

#[test]
fn every_language_test_kernel_prints_valid_wgsl() {
    let mut all = vec![
        saxpy::definition::<f16>(),
        saxpy::definition::<bf16>(),
        saxpy::definition::<f32>(),
        saxpy::definition::<f64>(),
        integer_ops::definition::<i8>(),
        integer_ops::definition::<i16>(),
        integer_ops::definition::<i32>(),
        integer_ops::definition::<i64>(),
        integer_ops::definition::<u8>(),
        integer_ops::definition::<u16>(),
        integer_ops::definition::<u32>(),
        integer_ops::definition::<u64>(),
        control_flow::definition(6, false),
        control_flow::definition(9, true),
        float_math::definition::<f16>(),
        float_math::definition::<bf16>(),
        float_math::definition::<f32>(),
        float_math::definition::<f64>(),
        float_arithmetic::definition::<f16>(),
        float_arithmetic::definition::<bf16>(),
        float_arithmetic::definition::<f32>(),
        float_arithmetic::definition::<f64>(),
        constant_folding::definition(f32::INFINITY),
        constant_folding::definition(f32::NAN),
        cooperation::definition(),
    ];
    all.extend(cubert_test_suite::language::kernel_definitions());
    let with_dim: Vec<_> = all
        .into_iter()
        .map(|definition| (definition, (32, 2, 2)))
        .collect();
    assert!(with_dim.len() > 100);
    assert_all_print(&with_dim);
}

#[test]
fn every_cast_prints_valid_wgsl() {
    let mut all = Vec::new();
    macro_rules! cast_pairs {
        ($($a:ty),*) => {
            $( all.extend(cast_pairs!(@row $a; f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool)); )*
        };
        (@row $a:ty; $($b:ty),*) => {
            [$(casts::definition::<$a, $b>(), casts_32::definition::<$a, $b>()),*]
        };
    }
    cast_pairs!(
        f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool
    );
    let with_dim: Vec<_> = all
        .into_iter()
        .map(|definition| (definition, (64, 1, 1)))
        .collect();
    assert_all_print(&with_dim);
}

/// The matmul tilings the tests print: CUDA's table and the CPU's kernel.
fn matmul_tilings() -> Vec<MatmulTiling> {
    let tiled = |block, depth, unit, lines| MatmulTiling::Tiled {
        block,
        depth,
        unit,
        lines,
    };
    vec![
        tiled((64, 64), 16, (4, 4), true),
        tiled((64, 64), 8, (4, 4), false),
        tiled((128, 128), 8, (8, 8), true),
        tiled((16, 16), 16, (1, 1), false),
        tiled((32, 32), 16, (2, 2), false),
        tiled((64, 128), 8, (4, 8), true),
        MatmulTiling::Unit { rows: 8, cols: 4 },
    ]
}

/// The reduce-sum splits the tests print: CUDA's table and the CPU's kernels.
fn reduce_splits() -> Vec<RowSplit> {
    vec![
        RowSplit::Cube {
            units: 256,
            lines: true,
        },
        RowSplit::Plane {
            planes: 8,
            lines: true,
        },
        RowSplit::Cube {
            units: 128,
            lines: false,
        },
        RowSplit::Plane {
            planes: 4,
            lines: false,
        },
        RowSplit::Unit {
            units: 1,
            wide: true,
        },
        RowSplit::Unit {
            units: 64,
            wide: false,
        },
    ]
}

#[test]
fn every_standard_kernel_prints_valid_wgsl() {
    let dim = |cube_dim: CubeDim| (cube_dim.x, cube_dim.y, cube_dim.z);
    let mut all = Vec::new();
    for kernel in StandardKernel::every() {
        if let Some((definition, cube_dim)) = standard::definition(kernel).unwrap() {
            all.push((definition, dim(cube_dim)));
        }
        if let Some(definition) = standard::lines_definition(kernel) {
            all.push((definition, (256, 1, 1)));
        }
        if let Some(definition) = standard::units_definition(kernel).unwrap() {
            all.push((definition, (256, 1, 1)));
        }
    }
    for elem in ElemType::ALL.into_iter().filter(ElemType::has_arithmetic) {
        for (index, split) in reduce_splits().into_iter().enumerate() {
            let name = format!("reduce_sum_{elem}_{index}");
            let (definition, cube_dim) =
                standard::reduce_sum_definition(elem, split, &name).unwrap();
            all.push((definition, dim(cube_dim)));
        }
        for (index, tiling) in matmul_tilings().into_iter().enumerate() {
            let name = format!("matmul_{elem}_{index}");
            let (definition, cube_dim) = standard::matmul_definition(elem, tiling, &name).unwrap();
            all.push((definition, dim(cube_dim)));
        }
    }
    assert!(all.len() > 300, "only {}", all.len());
    assert_all_print(&all);
}

fn every_feature(checked: bool) -> WgslTarget {
    WgslTarget {
        shader_f16: true,
        shader_f64: true,
        shader_int64: true,
        subgroups: true,
        checked,
        vector_lines: 0,
    }
}

fn print(definition: &KernelDefinition, target: &WgslTarget) -> Result<String, GenerateError> {
    let entry = entry_name(definition.name(), definition.id());
    generate(definition.ir().unwrap(), &entry, (64, 1, 1), target)
}

#[test]
fn sixty_four_bit_types_are_refused_without_the_feature() {
    let without = WgslTarget {
        shader_int64: false,
        shader_f64: false,
        ..every_feature(true)
    };
    for definition in [
        integer_ops::definition::<i64>(),
        integer_ops::definition::<u64>(),
        saxpy::definition::<f64>(),
        casts_32::definition::<f32, u64>(),
    ] {
        let error = print(&definition, &without).unwrap_err();
        assert!(error.is_unsupported(), "{error}");
        assert!(error.to_string().contains("SHADER_"), "{error}");
        assert!(print(&definition, &every_feature(true)).is_ok());
    }
    // f64 needs both: its bits are handled as u64.
    let floats_only = WgslTarget {
        shader_int64: false,
        ..every_feature(true)
    };
    assert!(
        print(&saxpy::definition::<f64>(), &floats_only)
            .unwrap_err()
            .is_unsupported()
    );
    let ints_only = WgslTarget {
        shader_f64: false,
        ..every_feature(true)
    };
    assert!(
        print(&saxpy::definition::<f64>(), &ints_only)
            .unwrap_err()
            .is_unsupported()
    );
    assert!(print(&integer_ops::definition::<i64>(), &ints_only).is_ok());
}

#[test]
fn plane_operations_are_refused_without_subgroups() {
    let without = WgslTarget {
        subgroups: false,
        ..every_feature(false)
    };
    let error = print(&cooperation::definition(), &without).unwrap_err();
    assert!(error.is_unsupported(), "{error}");
    assert!(error.to_string().contains("subgroups"), "{error}");
    let source = print(&cooperation::definition(), &every_feature(false)).unwrap();
    assert!(
        source.contains("@builtin(subgroup_size) cubert_plane_dim: u32"),
        "{source}"
    );
    assert!(source.contains("subgroupShuffle"), "{source}");
    // Sums fold in lane order, not with subgroupAdd.
    assert!(!source.contains("subgroupAdd"), "{source}");
}

/// Whether `source`, comments left out, calls the WGSL built-in function `name`.
fn calls_builtin(source: &str, name: &str) -> bool {
    let code: String = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let call = format!("{name}(");
    code.match_indices(&call).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// WGSL's transcendental functions, which the generator must not call.
const WGSL_TRANSCENDENTALS: [&str; 9] = [
    "exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "pow",
];

#[test]
fn f64_transcendental_functions_print_as_software_helpers() {
    let source = print(&float_math::definition::<f64>(), &every_feature(true)).unwrap();
    for helper in [
        "fn cubert_exp_f64(",
        "fn cubert_ln_f64(",
        "fn cubert_rem_pio2_f64(",
        "fn cubert_erf_f64(",
        "fn cubert_pow_f64(",
    ] {
        assert!(source.contains(helper), "no `{helper}` in\n{source}");
    }
    // No WGSL built-in transcendental function is called: they take f32 only.
    for builtin in WGSL_TRANSCENDENTALS {
        assert!(
            !calls_builtin(&source, builtin),
            "`{builtin}(` in\n{source}"
        );
    }
}

#[test]
fn f32_transcendental_functions_print_as_software_helpers_without_64_bit_integers() {
    let target = WgslTarget {
        shader_f16: false,
        shader_f64: false,
        shader_int64: false,
        subgroups: false,
        checked: true,
        vector_lines: 0,
    };
    let source = print(&float_math::definition::<f32>(), &target).unwrap();
    for helper in [
        "fn cubert_exp_f32(",
        "fn cubert_ln_f32(",
        "fn cubert_rem_pio2_f32(",
        "fn cubert_tanh_f32(",
        "fn cubert_erf_f32(",
        "fn cubert_pow_f32(",
    ] {
        assert!(source.contains(helper), "no `{helper}` in\n{source}");
    }
    // WGSL's own are only as accurate as WGSL promises (`sin` bounded on [-pi, pi] only).
    for builtin in WGSL_TRANSCENDENTALS {
        assert!(
            !calls_builtin(&source, builtin),
            "`{builtin}(` in\n{source}"
        );
    }
    // The helpers work on adapters without 64-bit integers (WebGPU has none): no 64-bit
    // type and no 64-bit literal (`1lu`, `0x..li`).
    let tokens: Vec<&str> = source.split(|c: char| !c.is_alphanumeric()).collect();
    for token in tokens {
        let literal = token.starts_with(|c: char| c.is_ascii_digit())
            && (token.ends_with("lu") || token.ends_with("li"));
        assert!(
            token != "u64" && token != "i64" && !literal,
            "`{token}` in\n{source}"
        );
    }
}

#[test]
fn bindings_follow_the_abi() {
    let source = print(&cooperation::definition(), &every_feature(true)).unwrap();
    for binding in [
        "@group(0) @binding(0) var<storage, read_write> cubert_status: array<atomic<u32>>;",
        "@group(0) @binding(1) var<storage, read> cubert_info: array<u32>;",
        "@group(0) @binding(2) var<storage, read_write> cubert_a0: array<atomic<u32>>;",
        "@group(0) @binding(3) var<storage, read_write> cubert_a1: array<atomic<i32>>;",
        "@group(0) @binding(4) var<storage, read_write> cubert_a2: array<atomic<u32>>;",
    ] {
        assert!(source.contains(binding), "no `{binding}` in\n{source}");
    }
    // Narrow types are packed in words: plain for an `&Array`, atomic for an `&mut Array`.
    // Every array is bound read-write (views of one buffer may share a dispatch).
    let source = print(&casts_32::definition::<u8, f16>(), &every_feature(false)).unwrap();
    for binding in [
        "@group(0) @binding(2) var<storage, read_write> cubert_a0: array<u32>;",
        "@group(0) @binding(3) var<storage, read_write> cubert_a1: array<atomic<u32>>;",
        "@group(0) @binding(4) var<storage, read_write> cubert_a2: array<atomic<u32>>;",
    ] {
        assert!(source.contains(binding), "no `{binding}` in\n{source}");
    }
    assert!(!source.contains("enable f16"), "{source}");
    // Scalars follow the arrays' offset and length pairs: saxpy has 2 arrays, so `a` is at
    // word 4.
    let source = print(&saxpy::definition::<f32>(), &every_feature(false)).unwrap();
    assert!(
        source.contains("let s0: f32 = bitcast<f32>(cubert_info[4u]);"),
        "{source}"
    );
    assert!(
        source.contains("cubert_a1[cubert_info[2u] + i]"),
        "{source}"
    );
    assert!(
        source.contains("@compute @workgroup_size(64, 1, 1)"),
        "{source}"
    );
    let source = print(&saxpy::definition::<f64>(), &every_feature(false)).unwrap();
    assert!(
        source.contains("bitcast<f64>((u64(cubert_info[5u]) << 32u) | u64(cubert_info[4u]))"),
        "{source}"
    );
}

#[test]
fn checked_mode_counts_out_of_bounds_accesses() {
    let count = "atomicAdd(&cubert_status[0], 1u);";
    let checked = print(&saxpy::definition::<f32>(), &every_feature(true)).unwrap();
    assert!(checked.contains(count), "{checked}");
    assert!(checked.contains("if (i >= cubert_info[3u]) {"), "{checked}");
    let unchecked = print(&saxpy::definition::<f32>(), &every_feature(false)).unwrap();
    assert!(!unchecked.contains(count), "{unchecked}");
    // Atomics skip an index out of bounds in every mode, and count it only when checked.
    let unchecked = print(&cooperation::definition(), &every_feature(false)).unwrap();
    assert!(
        unchecked.contains("if (i >= cubert_info[1u]) {"),
        "{unchecked}"
    );
    assert!(!unchecked.contains(count), "{unchecked}");
}

#[test]
fn operations_of_constants_print_without_constant_evaluation() {
    let source = print(
        &constant_folding::definition(f32::NAN),
        &every_feature(false),
    )
    .unwrap();
    assert!(source.contains("let cubert_k"), "{source}");
    validate(&source, &every_feature(false)).unwrap();
}

/// The line of this file holding `needle`.
fn line_of(needle: &str) -> usize {
    include_str!("wgsl_generate.rs")
        .lines()
        .position(|line| line.contains(needle) && !line.contains("line_of("))
        .unwrap()
        + 1
}

#[test]
fn generated_code_notes_the_rust_line_of_each_statement() {
    let source = print(&saxpy::definition::<f32>(), &every_feature(false)).unwrap();
    let store = line_of("y[i] = a * x[i] + y[i];");
    let note = format!("// rust: crates/cubert-wgpu/tests/wgsl_generate.rs:{store}");
    assert!(source.contains(&note), "no `{note}` in\n{source}");
}

#[test]
fn entry_names_are_wgsl_identifiers() {
    let definition = casts::definition::<f32, i8>();
    let entry = entry_name(definition.name(), definition.id());
    assert!(entry.starts_with("cubert_casts_"), "{entry}");
    assert!(entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    assert_eq!(entry, entry_name(definition.name(), definition.id()));
    let error = generate(
        definition.ir().unwrap(),
        "not an identifier",
        (1, 1, 1),
        &every_feature(false),
    )
    .unwrap_err();
    assert!(!error.is_unsupported(), "{error}");
}

#[test]
#[ignore = "prints a generated kernel"]
fn print_a_kernel() {
    println!(
        "{}",
        print(&control_flow::definition(6, false), &every_feature(true)).unwrap()
    );
}

// ---- Execution: the printed kernels run on a wgpu adapter and agree with the CPU -------
//
// These run where wgpu finds a Vulkan adapter (Mesa's lavapipe runs them on the CPU) and
// are skipped, with a note, where it finds none.

mod common;

use common::{ArrayArg, Gpu, Outcome};
use cubert_runtime::lang::native;

fn gpu() -> Option<Gpu> {
    let gpu = Gpu::new();
    if gpu.is_none() {
        eprintln!("no wgpu adapter: skipping the execution test");
    }
    gpu
}

/// Prints `definition` for `gpu` and runs it on enough cubes of 64 units for `units`.
fn launch(
    gpu: &Gpu,
    definition: &KernelDefinition,
    arrays: &[ArrayArg],
    info: &[u64],
    units: u32,
    checked: bool,
) -> Outcome {
    let entry = entry_name(definition.name(), definition.id());
    let source = generate(
        definition.ir().unwrap(),
        &entry,
        (64, 1, 1),
        &gpu.target(checked),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    gpu.run(
        &source,
        &entry,
        arrays,
        info,
        (units.div_ceil(64).max(1), 1, 1),
    )
}

fn bytes_of<T: Scalar>(values: &[T]) -> Vec<u8> {
    let size = T::ELEM.size();
    values
        .iter()
        .flat_map(|value| value.to_bits().to_le_bytes()[..size].to_vec())
        .collect()
}

fn values_of<T: Scalar>(bytes: &[u8]) -> Vec<T> {
    let size = T::ELEM.size();
    bytes
        .chunks_exact(size)
        .map(|chunk| {
            let mut word = [0u8; 8];
            word[..size].copy_from_slice(chunk);
            T::from_bits(u64::from_le_bytes(word))
        })
        .collect()
}

fn input<T: Scalar>(values: &[T]) -> ArrayArg {
    ArrayArg::new(bytes_of(values), T::ELEM.size(), false)
}

fn output<T: Scalar>(len: usize) -> ArrayArg {
    ArrayArg::new(vec![0; len * T::ELEM.size()], T::ELEM.size(), true)
}

/// A deterministic stream of 64-bit patterns (xorshift).
fn patterns(count: usize, seed: u64) -> Vec<u64> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
        .collect()
}

/// Values of `T` to test with: its edge values and random bit patterns.
fn samples<T: Scalar>(count: usize, seed: u64) -> Vec<T> {
    let size = T::ELEM.size();
    let mask = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    };
    let mut edges: Vec<u64> = vec![0, 1, 2, 3, mask, mask - 1, mask >> 1, (mask >> 1) + 1];
    let floats: &[f64] = &[
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        -2.5,
        0.49999997,
        1e-40,
        -1e-40,
        3.0,
        -7.0,
        1e30,
        -1e30,
        1e10,
        65504.0,
        65520.0,
        2147483520.0,
        2147483648.0,
        4294967296.0,
        -2147483904.0,
        9.3e18,
        1.9e19,
        300.0,
        -129.0,
        255.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -0.0,
        0.1,
        1e-8,
        5e-324,
        1.0e-310,
    ];
    edges.extend(floats.iter().map(|f| match T::ELEM {
        ElemType::F64 => f.to_bits(),
        ElemType::F32 => u64::from((*f as f32).to_bits()),
        ElemType::F16 => u64::from(f16::from_f64(*f).to_bits()),
        ElemType::BF16 => u64::from(bf16::from_f64(*f).to_bits()),
        _ => (*f as i64) as u64,
    }));
    edges.extend(patterns(count, seed));
    edges
        .into_iter()
        .map(|bits| T::from_bits(bits & mask))
        .collect()
}

/// Whether `got` is `want`, bit for bit, or both are NaNs (the language doesn't fix the
/// payload of an arithmetic result's NaN).
#[allow(clippy::eq_op)] // `x != x`: whether a value of any scalar type is a NaN
fn same<T: Scalar>(got: T, want: T) -> bool {
    got.to_bits() == want.to_bits() || (got != got && want != want)
}

fn assert_same<T: Scalar>(what: &str, got: &[T], want: &[T], inputs: &dyn Fn(usize) -> String) {
    let wrong: Vec<String> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !same(**g, **w))
        .take(12)
        .map(|(i, (g, w))| format!("  [{i}] {}: got {g:?}, want {w:?}", inputs(i)))
        .collect();
    assert_eq!(got.len(), want.len(), "{what}");
    assert!(
        wrong.is_empty(),
        "{what}: wrong values\n{}",
        wrong.join("\n")
    );
}

/// Float operations the language defines exactly, 15 results per element.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn exact_float_ops<F: Float>(x: &Array<F>, y: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let base = i * 15;
        out[base] = a + b;
        out[base + 1] = a - b;
        out[base + 2] = a * b;
        out[base + 3] = a / b;
        out[base + 4] = a % b;
        out[base + 5] = a.min(b);
        out[base + 6] = a.max(b);
        out[base + 7] = a.sqrt();
        out[base + 8] = a.recip();
        out[base + 9] = a.round();
        out[base + 10] = a.floor();
        out[base + 11] = a.trunc();
        out[base + 12] = -a.abs();
        out[base + 13] = select(a < b, a, b);
        out[base + 14] = a.ceil();
    }
}

fn exact_float_reference<F: Float>(a: F, b: F) -> [F; 15] {
    [
        Numeric::add(a, b),
        Numeric::sub(a, b),
        Numeric::mul(a, b),
        Numeric::div(a, b),
        Numeric::rem(a, b),
        Numeric::min_of(a, b),
        Numeric::max_of(a, b),
        a.sqrt(),
        a.recip(),
        a.round(),
        a.floor(),
        a.trunc(),
        Numeric::neg(a.abs()),
        if a < b { a } else { b },
        a.ceil(),
    ]
}

fn check_exact_float_ops<F: Float>(gpu: &Gpu) {
    let x = samples::<F>(3000, 0x5eed_0001 ^ F::ELEM.size() as u64);
    let mut y = samples::<F>(3000, 0x5eed_0002);
    y.rotate_left(5);
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let outcome = launch(
        gpu,
        &exact_float_ops::definition::<F>(),
        &[input(x), input(y).with_offset(3), output::<F>(n * 15)],
        &[],
        n as u32,
        true,
    );
    assert_eq!(outcome.out_of_bounds, 0);
    let got: Vec<F> = values_of(&outcome.arrays[2]);
    let want: Vec<F> = (0..n)
        .flat_map(|i| exact_float_reference(x[i], y[i]))
        .collect();
    const OPS: [&str; 15] = [
        "+", "-", "*", "/", "%", "min", "max", "sqrt", "recip", "round", "floor", "trunc", "-abs",
        "select", "ceil",
    ];
    let flush = |v: F| {
        if cubert_test_suite::language::is_subnormal(v) {
            F::from_bits(v.to_bits() & sign_bit::<F>())
        } else {
            v
        }
    };
    // WGSL lets a driver flush subnormals and assume no NaNs (NVIDIA's does both): a
    // result passes that is exact, or equal to the reference with every subnormal (inputs
    // and results) taken as a zero of its sign, or any result of a comparison, `min` or
    // `max` involving a NaN.
    let relaxed: Vec<F> = got
        .iter()
        .zip(&want)
        .enumerate()
        .map(|(k, (&g, &w))| {
            let (a, b) = (x[k / 15], y[k / 15]);
            let flushed = exact_float_reference(flush(a), flush(b))[k % 15];
            let nan_ignored = matches!(k % 15, 5 | 6 | 13) && (is_nan(a) || is_nan(b));
            if nan_ignored || same(flush(g), flush(flushed)) || same(flush(g), flush(w)) {
                w
            } else {
                g
            }
        })
        .collect();
    assert_same(&format!("{} ops", F::ELEM), &relaxed, &want, &|k| {
        format!("{} of {:?}, {:?}", OPS[k % 15], x[k / 15], y[k / 15])
    });
}

/// Whether `v` is a NaN.
#[allow(clippy::eq_op)] // `x != x`: whether a value of any scalar type is a NaN
fn is_nan<F: Float>(v: F) -> bool {
    v != v
}

/// The sign bit of `F`'s bits.
fn sign_bit<F: Float>() -> u64 {
    1 << (8 * F::ELEM.size() - 1)
}

#[test]
fn float_arithmetic_matches_the_cpu_but_for_flushed_subnormals_and_ignored_nans() {
    let Some(gpu) = gpu() else { return };
    check_exact_float_ops::<f32>(&gpu);
    check_exact_float_ops::<f16>(&gpu);
    check_exact_float_ops::<bf16>(&gpu);
    if gpu.target(true).shader_f64 && gpu.target(true).shader_int64 {
        check_exact_float_ops::<f64>(&gpu);
    }
}

/// Integer operations, 15 results per element.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn int_ops<T: Int>(x: &Array<T>, y: &Array<T>, out: &mut Array<T>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let a = x[i];
        let b = y[i];
        let base = i * 15;
        out[base] = a + b;
        out[base + 1] = a - b;
        out[base + 2] = a * b;
        out[base + 3] = a / b;
        out[base + 4] = a % b;
        out[base + 5] = a & b;
        out[base + 6] = a | b;
        out[base + 7] = a ^ b;
        out[base + 8] = a << (b as u32);
        out[base + 9] = a >> (b as u32);
        out[base + 10] = a.min(b);
        out[base + 11] = a.max(b);
        out[base + 12] = -a;
        out[base + 13] = !a;
        out[base + 14] = a.abs().mul_add(b, a);
    }
}

fn int_reference<T: Int>(a: T, b: T) -> [T; 15] {
    let amount: u32 = native::cast::<u32, T>(b);
    [
        Numeric::add(a, b),
        Numeric::sub(a, b),
        Numeric::mul(a, b),
        Numeric::div(a, b),
        Numeric::rem(a, b),
        Int::bitand(a, b),
        Int::bitor(a, b),
        Int::bitxor(a, b),
        Int::shl(a, amount),
        Int::shr(a, amount),
        Numeric::min_of(a, b),
        Numeric::max_of(a, b),
        Numeric::neg(a),
        Int::bitnot(a),
        Numeric::abs_of(a).mul_add(b, a),
    ]
}

fn check_int_ops<T: Int>(gpu: &Gpu) {
    let x = samples::<T>(2000, 0x1234);
    let mut y = samples::<T>(2000, 0x4321);
    y.rotate_left(3);
    let n = x.len();
    let outcome = launch(
        gpu,
        &int_ops::definition::<T>(),
        &[
            input(&x).with_offset(1),
            input(&y),
            output::<T>(n * 15).with_offset(7),
        ],
        &[],
        n as u32,
        false,
    );
    let got: Vec<T> = values_of(&outcome.arrays[2]);
    let want: Vec<T> = (0..n).flat_map(|i| int_reference(x[i], y[i])).collect();
    assert_same(&format!("{} ops", T::ELEM), &got, &want, &|k| {
        format!("op {} of {:?}, {:?}", k % 15, x[k / 15], y[k / 15])
    });
}

#[test]
fn integer_arithmetic_wraps_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    check_int_ops::<i8>(&gpu);
    check_int_ops::<i16>(&gpu);
    check_int_ops::<i32>(&gpu);
    check_int_ops::<u8>(&gpu);
    check_int_ops::<u16>(&gpu);
    check_int_ops::<u32>(&gpu);
    if gpu.target(false).shader_int64 {
        check_int_ops::<i64>(&gpu);
        check_int_ops::<u64>(&gpu);
    }
}

/// `x as B`, element by element.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn cast_each<A: Scalar, B: Scalar>(x: &Array<A>, out: &mut Array<B>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        out[i] = x[i] as B;
    }
}

fn check_cast<A: Scalar, B: Scalar>(gpu: &Gpu) -> Option<String> {
    let target = gpu.target(false);
    let wide = [A::ELEM, B::ELEM].iter().any(|elem| elem.size() == 8);
    let f64 = [A::ELEM, B::ELEM].contains(&ElemType::F64);
    if (wide && !target.shader_int64) || (f64 && !target.shader_f64) {
        return None;
    }
    let mut x = samples::<A>(1500, 0xca57);
    if A::ELEM == ElemType::Bool {
        x = vec![A::from_bits(0), A::from_bits(1)];
    }
    let outcome = launch(
        gpu,
        &cast_each::definition::<A, B>(),
        &[
            input(&x).with_offset(5),
            output::<B>(x.len()).with_offset(2),
        ],
        &[],
        x.len() as u32,
        true,
    );
    let got: Vec<B> = values_of(&outcome.arrays[1]);
    let want: Vec<B> = x.iter().map(|v| native::cast::<B, A>(*v)).collect();
    let wrong: Vec<String> = got
        .iter()
        .zip(&want)
        .zip(&x)
        .filter(|((g, w), _)| g.to_bits() != w.to_bits())
        .take(6)
        .map(|((g, w), v)| format!("    {v:?} as {}: got {g:?}, want {w:?}", B::ELEM))
        .collect();
    (!wrong.is_empty() || outcome.out_of_bounds != 0).then(|| {
        format!(
            "{} -> {} ({} out of bounds):\n{}",
            A::ELEM,
            B::ELEM,
            outcome.out_of_bounds,
            wrong.join("\n")
        )
    })
}

#[test]
fn casts_convert_bit_for_bit_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut failures = Vec::new();
    macro_rules! cast_pairs {
        ($($a:ty),*) => {
            $( cast_pairs!(@row $a; f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool); )*
        };
        (@row $a:ty; $($b:ty),*) => {
            $( failures.extend(check_cast::<$a, $b>(&gpu)); )*
        };
    }
    cast_pairs!(
        f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool
    );
    assert!(
        failures.is_empty(),
        "{} casts differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The language tests' kernel called `name`.
fn suite_kernel(name: &str) -> KernelDefinition {
    cubert_test_suite::language::kernel_definitions()
        .into_iter()
        .find(|definition| definition.name() == name)
        .unwrap_or_else(|| panic!("no kernel `{name}` in the language tests"))
}

#[test]
fn range_loops_count_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let m = [0u32, 1, 2, 3, 4, 7, 10, 33, 200];
    let outcome = launch(
        &gpu,
        &suite_kernel("ranges"),
        &[input(&m), output::<u32>(m.len() * 10)],
        &[],
        m.len() as u32,
        true,
    );
    let got: Vec<u32> = values_of(&outcome.arrays[1]);
    let mut want = Vec::new();
    let to_type_max: u32 =
        (250u32..=255).sum::<u32>() + (250u32..=255).step_by(4).sum::<u32>() * 1000;
    let signed: i32 = (-3i32..=3).map(|k| k * k * k + k * k).sum();
    for (i, &m) in m.iter().enumerate() {
        want.extend([
            (0..m).sum::<u32>(),
            (1..=m).sum::<u32>(),
            (3..m).step_by(4).sum::<u32>(),
            (0..=m).step_by(3).map(|k| k * k).sum::<u32>(),
            (m..3).count() as u32,
            to_type_max,
            signed as u32,
            (m..m * 3).step_by(i + 1).sum::<u32>(),
            (0..5u32)
                .step_by((m as usize / 100).max(1))
                .map(|k| k + 1)
                .sum::<u32>(),
            (-4i32..4)
                .step_by((m as i32 - 3).max(1) as usize)
                .map(|k| k + 10)
                .sum::<i32>() as u32,
        ]);
    }
    assert_eq!(got, want);
    assert_eq!(outcome.out_of_bounds, 0);
}

#[test]
fn tensor_metadata_reads_the_info_words_as_cuda_lays_them_out() {
    let Some(gpu) = gpu() else { return };
    // Info words: the scalar, then the header (offset of the block), then the block
    // [rank, shape.., strides..].
    let info = [7u64, 2, 3, 2, 3, 4, 12, 4, 1];
    let outcome = launch(
        &gpu,
        &suite_kernel("tensor_metadata"),
        &[input(&[0.0f32; 24]), output::<u32>(13)],
        &info,
        1,
        true,
    );
    let got: Vec<u32> = values_of(&outcome.arrays[1]);
    assert_eq!(got, vec![3, 2, 3, 4, 1, 1, 12, 4, 1, 0, 0, 7, 24]);
    // A value past u32::MAX saturates; a block past the words reads as rank 0.
    let info = [7u64, 2, 1, 1u64 << 40, 5];
    let outcome = launch(
        &gpu,
        &suite_kernel("tensor_metadata"),
        &[input(&[0.0f32; 24]), output::<u32>(13)],
        &info,
        1,
        true,
    );
    let got: Vec<u32> = values_of(&outcome.arrays[1]);
    assert_eq!(got, vec![1, u32::MAX, 1, 1, 1, 1, 5, 0, 0, 0, 0, 7, 24]);
    let outcome = launch(
        &gpu,
        &suite_kernel("tensor_metadata"),
        &[input(&[0.0f32; 24]), output::<u32>(13)],
        &[7, 40],
        1,
        true,
    );
    let got: Vec<u32> = values_of(&outcome.arrays[1]);
    assert_eq!(got, vec![0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 7, 24]);
}

/// Every unit writes its own byte of packed arrays, and reads past the end.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn neighbours(
    x: &Array<u8>,
    bytes: &mut Array<u8>,
    flags: &mut Array<bool>,
    halves: &mut Array<f16>,
) {
    let i = ABSOLUTE_POS;
    bytes[i] = x[i] + 1u8;
    flags[i] = x[i] % 3u8 == 0u8;
    halves[i] = f16::new(0.5) * (x[i] as f16);
}

#[test]
fn packed_arrays_keep_every_units_write_and_count_out_of_bounds_accesses() {
    let Some(gpu) = gpu() else { return };
    let n = 1000;
    let x: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    // 1024 units for 1000 elements: 24 units read (3 times) and write (3 arrays) out of
    // bounds.
    let outcome = launch(
        &gpu,
        &neighbours::definition(),
        &[
            input(&x).with_offset(3),
            output::<u8>(n).with_offset(1),
            output::<bool>(n).with_offset(2),
            output::<f16>(n).with_offset(1),
        ],
        &[],
        1024,
        true,
    );
    let bytes: Vec<u8> = values_of(&outcome.arrays[1]);
    let flags: Vec<bool> = values_of(&outcome.arrays[2]);
    let halves: Vec<f16> = values_of(&outcome.arrays[3]);
    assert_eq!(
        bytes,
        x.iter().map(|v| v.wrapping_add(1)).collect::<Vec<_>>()
    );
    assert_eq!(flags, x.iter().map(|v| v % 3 == 0).collect::<Vec<_>>());
    assert_eq!(
        halves,
        x.iter()
            .map(|v| f16::from_f32(0.5 * f32::from(*v)))
            .collect::<Vec<_>>()
    );
    assert_eq!(outcome.out_of_bounds, 24 * 6);
}

/// Plane reductions, a shuffle and the plane's size.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn plane_values(x: &Array<f32>, ints: &Array<i32>, out: &mut Array<f32>, int_out: &mut Array<i32>) {
    let i = ABSOLUTE_POS;
    let v = x[i];
    out[i * 4] = plane_sum(v);
    out[i * 4 + 1] = plane_min(v);
    out[i * 4 + 2] = plane_shuffle(v, UNIT_POS_PLANE + 1u32);
    out[i * 4 + 3] = PLANE_DIM as f32;
    int_out[i] = plane_sum(ints[i]);
}

#[test]
fn plane_sums_fold_in_lane_order() {
    let Some(gpu) = gpu() else { return };
    if !gpu.target(false).subgroups {
        eprintln!("{}: no subgroups, skipping", gpu.name);
        return;
    }
    let n = 256;
    let x: Vec<f32> = patterns(n, 99)
        .iter()
        .map(|bits| (*bits as u32 >> 9) as f32 * 1.0e-3 - 4000.0)
        .collect();
    let ints: Vec<i32> = patterns(n, 7).iter().map(|bits| *bits as i32).collect();
    let outcome = launch(
        &gpu,
        &plane_values::definition(),
        &[
            input(&x),
            input(&ints),
            output::<f32>(n * 4),
            output::<i32>(n),
        ],
        &[],
        n as u32,
        true,
    );
    let got: Vec<f32> = values_of(&outcome.arrays[2]);
    let int_got: Vec<i32> = values_of(&outcome.arrays[3]);
    let plane = got[3] as usize;
    assert!(plane.is_power_of_two() && plane <= 128, "plane of {plane}");
    for i in 0..n {
        let first = i / plane * plane;
        let lanes = &x[first..first + plane];
        let sum = lanes.iter().fold(0.0f32, |acc, v| acc + v);
        let min = lanes.iter().copied().reduce(f32::min).unwrap();
        let int_sum = ints[first..first + plane]
            .iter()
            .fold(0i32, |acc, v| acc.wrapping_add(*v));
        let next = x[first + (i - first + 1) % plane];
        assert_eq!(got[i * 4].to_bits(), sum.to_bits(), "sum at {i}");
        assert_eq!(got[i * 4 + 1], min, "min at {i}");
        assert_eq!(got[i * 4 + 2], next, "shuffle at {i}");
        assert_eq!(int_got[i], int_sum, "int sum at {i}");
    }
}

/// Atomics of every kind on global and shared arrays.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn atomics(x: &Array<f32>, floats: &mut Array<f32>, ints: &mut Array<i32>, units: &mut Array<u32>) {
    let mut shared = SharedMemory::<u32>::new(2);
    let i = ABSOLUTE_POS;
    if UNIT_POS == 0 {
        shared[0] = 0u32;
        shared[1] = 0u32;
    }
    sync_cube();
    let v = x[i];
    atomic_add(floats, 0u32, v);
    atomic_max(floats, 1u32, v);
    atomic_min(floats, 2u32, v);
    atomic_add(ints, 0u32, 1i32);
    atomic_min(ints, 1u32, 0i32 - i as i32);
    atomic_max(units, 0u32, i);
    atomic_add(shared, 0u32, 2u32);
    atomic_compare_exchange(units, 1u32, 0u32, i + 1u32);
    atomic_exchange(units, 3u32, 5u32);
    // Out of bounds: nothing happens, zero comes back.
    units[4] = atomic_add(units, 1000u32, 1u32);
    sync_cube();
    if UNIT_POS == 0 {
        atomic_add(units, 2u32, shared[0]);
    }
}

#[test]
fn atomics_update_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let n = 512usize;
    let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
    let outcome = launch(
        &gpu,
        &atomics::definition(),
        &[
            input(&x),
            output::<f32>(3),
            output::<i32>(2).with_offset(1),
            output::<u32>(5),
        ],
        &[],
        n as u32,
        true,
    );
    let floats: Vec<f32> = values_of(&outcome.arrays[1]);
    let ints: Vec<i32> = values_of(&outcome.arrays[2]);
    let units: Vec<u32> = values_of(&outcome.arrays[3]);
    assert_eq!(floats[0], x.iter().sum::<f32>());
    assert_eq!(floats[1], 50.0);
    assert_eq!(floats[2], -50.0);
    assert_eq!(ints, vec![n as i32, 1 - n as i32]);
    assert_eq!(units[0], n as u32 - 1);
    assert!(units[1] >= 1 && units[1] <= n as u32, "{}", units[1]);
    assert_eq!(units[2], 2 * n as u32);
    assert_eq!(units[3], 5);
    assert_eq!(units[4], 0);
    assert_eq!(outcome.out_of_bounds, n as u32);
}

/// Transcendental functions, for the accuracy and special values of the WGSL helpers.
#[cubert_macros::kernel(crate = cubert_runtime)]
fn transcendental<F: Float>(x: &Array<F>, out: &mut Array<F>) {
    let i = ABSOLUTE_POS;
    if i < x.len() {
        let v = x[i];
        let base = i * 10;
        out[base] = v.exp();
        out[base + 1] = v.ln();
        out[base + 2] = v.log2();
        out[base + 3] = v.log10();
        out[base + 4] = v.sin();
        out[base + 5] = v.cos();
        out[base + 6] = v.tan();
        out[base + 7] = v.tanh();
        out[base + 8] = v.erf();
        out[base + 9] = v.abs().powf(F::new(0.5)) + v.powf(F::new(2.0)) * v.powf(F::new(-3.0));
    }
}

#[test]
fn transcendental_functions_keep_their_special_values() {
    let Some(gpu) = gpu() else { return };
    let x = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        2.0,
        10.0,
        -10.0,
        80.0,
        -80.0,
        1e-10,
        -1e-10,
        1e-3,
        3.0,
        20.0,
        -20.0,
        88.0,
        89.0,
        -104.0,
        -110.0,
        5.5,
        -2.5,
        0.84,
        1.2,
        2.9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let outcome = launch(
        &gpu,
        &transcendental::definition::<f32>(),
        &[input(&x), output::<f32>(x.len() * 10)],
        &[],
        x.len() as u32,
        false,
    );
    let got: Vec<f32> = values_of(&outcome.arrays[1]);
    let mut wrong = Vec::new();
    const NAMES: [&str; 10] = [
        "exp", "ln", "log2", "log10", "sin", "cos", "tan", "tanh", "erf", "pow",
    ];
    for (i, &v) in x.iter().enumerate() {
        let want = [
            v.exp(),
            v.ln(),
            v.log2(),
            v.log10(),
            v.sin(),
            v.cos(),
            v.tan(),
            v.tanh(),
            <f32 as Float>::erf(v),
            v.abs().powf(0.5) + v.powf(2.0) * v.powf(-3.0),
        ];
        for (k, want) in want.into_iter().enumerate() {
            let got = got[i * 10 + k];
            let close = if want.is_nan() {
                got.is_nan()
            } else if want.is_infinite() || want == 0.0 {
                got == want
            } else if (4..7).contains(&k) && v.abs() > std::f32::consts::PI {
                // WGSL bounds `sin` and `cos` (and `tan`, their quotient) on [-π, π]
                // only; NVIDIA's driver was 6e-4 off `tan(80)`.
                got.is_finite() && (k == 6 || got.abs() <= 1.0)
            } else {
                // WGSL's accuracy (and the trigonometric functions' absolute error).
                let tolerance = if (4..7).contains(&k) {
                    2e-4
                } else {
                    2e-5 * want.abs()
                };
                (got - want).abs() <= tolerance
            };
            if !close {
                wrong.push(format!("  {}({v}): got {got:e}, want {want:e}", NAMES[k]));
            }
        }
    }
    assert!(wrong.is_empty(), "on {}:\n{}", gpu.name, wrong.join("\n"));
}

/// Prints `definition` for cubes of `cube_dim` and runs it on `cubes` cubes.
fn launch_grid(
    gpu: &Gpu,
    definition: &KernelDefinition,
    arrays: &[ArrayArg],
    info: &[u64],
    cube_dim: CubeDim,
    cubes: (u32, u32, u32),
) -> Outcome {
    let entry = entry_name(definition.name(), definition.id());
    let dim = (cube_dim.x, cube_dim.y, cube_dim.z);
    let source = generate(definition.ir().unwrap(), &entry, dim, &gpu.target(true))
        .unwrap_or_else(|error| panic!("{error}"));
    gpu.run(&source, &entry, arrays, info, cubes)
}

#[test]
fn standard_matmul_and_reduce_kernels_compute_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    // Small integers: every order of the sums is exact.
    let (m, k, n) = (70usize, 37usize, 45usize);
    let lhs: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let rhs: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 13) as f32 - 6.0).collect();
    let want: Vec<f32> = (0..m * n)
        .map(|o| {
            (0..k)
                .map(|j| lhs[o / n * k + j] * rhs[j * n + o % n])
                .sum()
        })
        .collect();
    for tiling in matmul_tilings() {
        let (definition, cube_dim) =
            standard::matmul_definition(ElemType::F32, tiling, "matmul_f32").unwrap();
        let (cols, rows) = tiling.tile();
        let cubes = ((n as u32).div_ceil(cols), (m as u32).div_ceil(rows), 1);
        let outcome = launch_grid(
            &gpu,
            &definition,
            &[
                input(&lhs),
                input(&rhs).with_offset(1),
                output::<f32>(m * n),
            ],
            &[m as u64, k as u64, n as u64],
            cube_dim,
            cubes,
        );
        let got: Vec<f32> = values_of(&outcome.arrays[2]);
        assert_eq!(got, want, "{tiling:?}");
        assert_eq!(outcome.out_of_bounds, 0, "{tiling:?}");
    }
    let (rows, cols) = (10usize, 1001usize);
    let matrix: Vec<f32> = (0..rows * cols).map(|i| ((i * 3) % 17) as f32).collect();
    let sums: Vec<f32> = matrix.chunks(cols).map(|row| row.iter().sum()).collect();
    let plane = {
        let outcome = launch(
            &gpu,
            &plane_values::definition(),
            &[
                input(&[0.0f32; 64]),
                input(&[0i32; 64]),
                output::<f32>(256),
                output::<i32>(64),
            ],
            &[],
            64,
            false,
        );
        values_of::<f32>(&outcome.arrays[2])[3] as u32
    };
    for split in reduce_splits() {
        if !matches!(split, RowSplit::Unit { .. }) && plane != 32 {
            // The plane and cube kernels fold a plane's sums with a butterfly of
            // `UNIT_POS_PLANE ^ 16, ^ 8, .., ^ 1` shuffles: they assume planes of 32.
            eprintln!("planes of {plane}: skipping {split:?}");
            continue;
        }
        let (definition, cube_dim) =
            standard::reduce_sum_definition(ElemType::F32, split, "reduce_sum_f32").unwrap();
        let cubes = (rows as u32).div_ceil(split.rows_per_cube());
        let outcome = launch_grid(
            &gpu,
            &definition,
            &[input(&matrix).with_offset(2), output::<f32>(rows)],
            &[rows as u64, cols as u64],
            cube_dim,
            (cubes, 1, 1),
        );
        let got: Vec<f32> = values_of(&outcome.arrays[1]);
        assert_eq!(got, sums, "{split:?}");
        assert_eq!(outcome.out_of_bounds, 0, "{split:?}");
    }
    // 64-bit integers wrap in every register.
    if gpu.target(true).shader_int64 {
        let big: Vec<u64> = (0..rows * cols).map(|i| ((i as u64) << 40) | 7).collect();
        let want: Vec<u64> = big
            .chunks(cols)
            .map(|row| row.iter().fold(0u64, |a, b| a.wrapping_add(*b)))
            .collect();
        for split in reduce_splits() {
            let RowSplit::Unit { units, .. } = split else {
                continue;
            };
            let (definition, cube_dim) =
                standard::reduce_sum_definition(ElemType::U64, split, "reduce_sum_u64").unwrap();
            let outcome = launch_grid(
                &gpu,
                &definition,
                &[input(&big), output::<u64>(rows).with_offset(1)],
                &[rows as u64, cols as u64],
                cube_dim,
                ((rows as u32).div_ceil(units), 1, 1),
            );
            assert_eq!(values_of::<u64>(&outcome.arrays[1]), want, "{split:?}");
        }
    }
}

#[test]
fn lines_move_whole_lines_and_skip_elements_past_the_end() {
    let Some(gpu) = gpu() else { return };
    let definition = standard::lines_definition(StandardKernel::Add(ElemType::F32)).unwrap();
    let len = 1002usize;
    let a: Vec<f32> = (0..len).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..len).map(|i| (i * 2) as f32).collect();
    // 251 lines: the last is half outside: its two elements past the end are skipped and
    // reported, for each of the three arrays.
    let lines = len.div_ceil(4) as u64;
    let outcome = launch(
        &gpu,
        &definition,
        &[
            input(&a).with_offset(1),
            input(&b),
            output::<f32>(len).with_offset(3),
        ],
        &[lines],
        lines as u32,
        true,
    );
    let got: Vec<f32> = values_of(&outcome.arrays[2]);
    assert_eq!(got, (0..len).map(|i| (i * 3) as f32).collect::<Vec<_>>());
    assert_eq!(outcome.out_of_bounds, 2 * 3);
}

#[test]
fn the_copy_kernel_moves_every_line_as_vectors_and_as_scalars() {
    let Some(gpu) = gpu() else { return };
    let definition = standard::elementwise::copy_lines::definition();
    let entry = entry_name(definition.name(), definition.id());
    let len = 4096usize;
    let words: Vec<u32> = (0..len as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    for vector_lines in [0, u64::MAX] {
        let target = WgslTarget {
            vector_lines,
            ..gpu.target(false)
        };
        let source = generate(definition.ir().unwrap(), &entry, (64, 1, 1), &target).unwrap();
        assert_eq!(source.contains("array<vec4<u32>>"), vector_lines != 0);
        let lines = (len / 4) as u64;
        // A grid smaller than the lines: the kernel strides over the rest.
        let outcome = gpu.run(
            &source,
            &entry,
            &[
                input(&words).with_offset(4),
                output::<u32>(len).with_offset(8),
            ],
            &[lines],
            (3, 1, 1),
        );
        assert!(values_of::<u32>(&outcome.arrays[1]) == words);
    }
}

#[test]
fn vector_lines_move_whole_lines_and_skip_elements_past_the_end() {
    let Some(gpu) = gpu() else { return };
    let definition = standard::lines_definition(StandardKernel::Add(ElemType::F32)).unwrap();
    let entry = entry_name(definition.name(), definition.id());
    for (len, checked) in [(1002usize, true), (1000, false), (1000, true)] {
        let a: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..len).map(|i| (i * 2) as f32).collect();
        let lines = len.div_ceil(4) as u64;
        let target = WgslTarget {
            vector_lines: u64::MAX,
            ..gpu.target(checked)
        };
        let source = generate(definition.ir().unwrap(), &entry, (64, 1, 1), &target).unwrap();
        assert!(source.contains("array<vec4<f32>>"), "{source}");
        // Views start whole vectors into their bindings, as the server binds them.
        let outcome = gpu.run(
            &source,
            &entry,
            &[
                input(&a).with_offset(4),
                input(&b),
                output::<f32>(len).with_offset(8),
            ],
            &[lines],
            ((lines as u32).div_ceil(64), 1, 1),
        );
        let got: Vec<f32> = values_of(&outcome.arrays[2]);
        assert_eq!(got, (0..len).map(|i| (i * 3) as f32).collect::<Vec<_>>());
        // A last line half outside: two elements skipped and reported per array.
        let expected = if checked && len % 4 != 0 { 2 * 3 } else { 0 };
        assert_eq!(
            outcome.out_of_bounds, expected,
            "len {len}, checked {checked}"
        );
    }
}
