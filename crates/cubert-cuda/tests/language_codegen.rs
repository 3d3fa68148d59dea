//! The CUDA generator of the kernel language: every construct of the language, for every
//! element type, prints CUDA C++ that NVRTC compiles for Hopper in both execution modes.
//! Needs only NVRTC (no GPU): run with `--include-ignored` where libnvrtc is installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cubert_cuda::lang::{cube_dim_option, entry_name, generate};
use cubert_cuda::standard_kernels::{matmul_tilings, reduce_sum_splits};
use cubert_cuda::{compile_cuda, nvrtc_options, nvrtc_version};
use cubert_runtime::elem::ElemType;
use cubert_runtime::kernel::standard::{self, MatmulTiling, RowSplit, StandardKernel};
use cubert_runtime::lang::KernelDefinition;
use cubert_runtime::lang::prelude::*;
use cubert_runtime::{CubeDim, ExecutionMode};

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
/// arrays, and a compile-time parameter.
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

fn definitions() -> Vec<KernelDefinition> {
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
    ];
    macro_rules! cast_pairs {
        ($($a:ty),*) => {
            $( all.extend(cast_pairs!(@row $a; f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool)); )*
        };
        (@row $a:ty; $($b:ty),*) => {
            [$(casts::definition::<$a, $b>()),*]
        };
    }
    cast_pairs!(
        f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool
    );
    // The behaviour suite's language tests, so a kernel they launch on the GPU compiles here
    // first.
    all.extend(cubert_test_suite::language::kernel_definitions());
    // The standard kernels written in the language, for every type they take.
    all.extend(
        StandardKernel::every()
            .into_iter()
            .filter_map(|kernel| standard::definition(kernel).unwrap())
            .map(|(definition, _)| definition),
    );
    all.extend(
        StandardKernel::every()
            .into_iter()
            .filter_map(standard::lines_definition),
    );
    all.extend(
        StandardKernel::every()
            .into_iter()
            .filter_map(|kernel| standard::units_definition(kernel).unwrap()),
    );
    // Reduce-sum, every split of the CUDA backend's variants and the CPU's unit-per-row
    // kernel, for every numeric type.
    let mut splits: Vec<RowSplit> = reduce_sum_splits()
        .into_iter()
        .map(|(_, split)| split)
        .collect();
    splits.push(RowSplit::Unit {
        units: 1,
        wide: true,
    });
    splits.push(RowSplit::Unit {
        units: 1,
        wide: false,
    });
    for elem in ElemType::ALL.into_iter().filter(ElemType::has_arithmetic) {
        for (index, split) in splits.iter().enumerate() {
            let name = format!("reduce_sum_{elem}_{index}");
            all.push(
                standard::reduce_sum_definition(elem, *split, &name)
                    .unwrap()
                    .0,
            );
        }
    }
    // Matmul: every tiling of the CUDA backend's variants and the CPU's unit-per-block
    // kernel for f32; the default tiling and the CPU's kernel for every other numeric type,
    // and the tiling of a unit per output for the other float types (each unrolled tile
    // takes a second or two to compile).
    let unit = MatmulTiling::Unit { rows: 8, cols: 4 };
    let tilings = matmul_tilings();
    for elem in ElemType::ALL.into_iter().filter(ElemType::has_arithmetic) {
        let chosen: Vec<MatmulTiling> = if elem == ElemType::F32 {
            tilings.iter().map(|(_, tiling)| *tiling).collect()
        } else {
            tilings
                .iter()
                .filter(|(name, _)| {
                    *name == "default" || (elem.is_float() && *name == "b16x16k16t1x1")
                })
                .map(|(_, tiling)| *tiling)
                .collect()
        };
        for (index, tiling) in chosen.into_iter().chain([unit]).enumerate() {
            let name = format!("matmul_{elem}_{index}");
            all.push(standard::matmul_definition(elem, tiling, &name).unwrap().0);
        }
    }
    all
}

#[test]
fn every_test_kernel_expands_and_generates_cuda() {
    for definition in definitions() {
        let ir = definition.ir().unwrap_or_else(|error| panic!("{error}"));
        let entry = entry_name(definition.name(), definition.id());
        let source = generate(ir, &entry).unwrap_or_else(|error| panic!("{error}"));
        assert!(
            source.contains(&format!("void CUBERT_LAUNCH_BOUNDS {entry}(")),
            "{source}"
        );
    }
}

#[test]
#[ignore = "needs NVRTC"]
fn every_test_kernel_compiles_for_sm_90() {
    nvrtc_version().expect("NVRTC must be installed for this test");
    let definitions = definitions();
    let mut failures = Vec::new();
    for definition in &definitions {
        let ir = definition.ir().unwrap();
        let entry = entry_name(definition.name(), definition.id());
        let source = generate(ir, &entry).unwrap();
        for mode in [ExecutionMode::Checked, ExecutionMode::Unchecked] {
            // Unchecked builds also bound the registers, as a launch of 256 units would.
            let extra = match mode {
                ExecutionMode::Unchecked => vec![cube_dim_option(CubeDim::new_1d(256))],
                _ => Vec::new(),
            };
            let options = nvrtc_options((9, 0), mode, &extra);
            if let Err(log) = compile_cuda(&entry, &source, &options) {
                failures.push(format!("{} ({mode:?}):\n{log}\n{source}", definition.id()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} kernels failed, first:\n{}",
        failures.len(),
        definitions.len(),
        failures[0]
    );
    eprintln!("{} language kernels compiled in 2 modes", definitions.len());
}

/// The line of this file holding `needle`.
fn line_of(needle: &str) -> usize {
    include_str!("language_codegen.rs")
        .lines()
        .position(|line| line.contains(needle) && !line.contains("line_of("))
        .unwrap()
        + 1
}

#[test]
fn generated_code_notes_the_rust_line_of_each_statement() {
    let definition = saxpy::definition::<f32>();
    let source = generate(definition.ir().unwrap(), "saxpy_f32").unwrap();
    let store = line_of("y[i] = a * x[i] + y[i];");
    let note = format!("// rust: crates/cubert-cuda/tests/language_codegen.rs:{store}");
    assert!(
        source.contains(&note),
        "no `{note}` in the generated source:\n{source}"
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_compile_error_names_the_generated_line_and_the_rust_line() {
    nvrtc_version().expect("NVRTC must be installed for this test");
    let definition = saxpy::definition::<f32>();
    let source = generate(definition.ir().unwrap(), "saxpy_f32").unwrap();
    // Break the code of the store's statement, as a generator bug would.
    let store = line_of("y[i] = a * x[i] + y[i];");
    let note = format!("language_codegen.rs:{store}");
    let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
    let at = lines.iter().position(|line| line.ends_with(&note)).unwrap();
    lines.insert(at + 1, "    undeclared_on_purpose = 1;".into());
    let broken = lines.join("\n");
    let options = nvrtc_options((9, 0), ExecutionMode::Checked, &[]);
    let log = compile_cuda("saxpy_f32", &broken, &options).unwrap_err();
    assert!(log.contains("undeclared_on_purpose"), "{log}");
    assert!(
        log.contains(&format!(
            "saxpy_f32.cu line {}: `undeclared_on_purpose = 1;`",
            at + 2
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "generated from the kernel's Rust source at crates/cubert-cuda/tests/{note}"
        )),
        "{log}"
    );
}

#[test]
#[ignore = "prints a generated kernel"]
fn print_control_flow() {
    let definition = control_flow::definition(6, false);
    let entry = entry_name(definition.name(), definition.id());
    println!("{}", generate(definition.ir().unwrap(), &entry).unwrap());
}

/// The CUDA source of standard kernel `kernel`.
fn standard_source(kernel: StandardKernel) -> String {
    let (definition, _) = standard::definition(kernel).unwrap().unwrap();
    let entry = entry_name(definition.name(), definition.id());
    generate(definition.ir().unwrap(), &entry).unwrap()
}

#[test]
fn fp8_casts_round_once_through_the_prelude_conversions() {
    let cast = |from, to| standard_source(StandardKernel::Cast { from, to });
    // From f64 and the integers: the prelude's once-rounding f64 conversion.
    assert!(cast(ElemType::F64, ElemType::E4M3).contains("cubert::f64_to_e4m3("));
    assert!(cast(ElemType::I64, ElemType::E5M2).contains("cubert::f64_to_e5m2("));
    // From f32 directly, from the half types through their exact float value.
    assert!(cast(ElemType::F32, ElemType::E5M2).contains("cubert::f32_to_e5m2("));
    let from_half = cast(ElemType::BF16, ElemType::E4M3);
    assert!(
        from_half.contains("cubert::f32_to_e4m3(cubert_lang::h2f("),
        "{from_half}"
    );
    // Out of an 8-bit float: exact widening (`h2d` builds a NaN with integers).
    let to_double = cast(ElemType::E5M2, ElemType::F64);
    assert!(to_double.contains("cubert_lang::h2d("), "{to_double}");
    let to_int = cast(ElemType::E4M3, ElemType::I32);
    assert!(
        to_int.contains("cubert_lang::saturate<int>(cubert_lang::h2d("),
        "{to_int}"
    );
}

#[test]
fn fp8_comparisons_compare_float_values() {
    let kernel = cubert_test_suite::fp8::definitions()
        .into_iter()
        .find(|definition| definition.name() == "compare")
        .unwrap();
    let source = generate(kernel.ir().unwrap(), "compare_e4m3").unwrap();
    assert!(source.contains("cubert_lang::h2f("), "{source}");
    assert!(source.contains("cubert::e4m3"), "{source}");
}

#[test]
fn plane_mma_prints_one_tensor_core_mma_per_call_for_its_fragment_type() {
    let kernels = cubert_test_suite::language::kernel_definitions();
    let source_of = |name: &str, types: &str| {
        let kernel = kernels
            .iter()
            .find(|definition| definition.name() == name && definition.id().contains(types))
            .unwrap_or_else(|| panic!("{name}{types}"));
        generate(kernel.ir().unwrap(), name).unwrap()
    };
    for (kernel, types, call) in [
        ("mma_tiles", "::bf16>", "cubert::bf16, cubert::bf16"),
        ("mma_tiles", "::f16>", "cubert::f16, cubert::f16"),
        ("mma_through_shared", "<f32", "float, float"),
        (
            "mma_through_shared",
            "<cubert_lang::fp8::e4m3",
            "cubert::e4m3, cubert::e5m2",
        ),
    ] {
        let source = source_of(kernel, types);
        assert!(
            source.contains(&format!("cubert_lang::plane_mma<{call}>(")),
            "{source}"
        );
    }
    // Each type's form of `mma.sync`, and TF32's rounding of its inputs.
    let source = source_of("mma_tiles", "::bf16>");
    for form in [
        r#"CUBERT_MMA("m16n8k16", "bf16.bf16")"#,
        r#"CUBERT_MMA("m16n8k16", "f16.f16")"#,
        r#"CUBERT_MMA("m16n8k8", "tf32.tf32")"#,
        r#"CUBERT_MMA("m16n8k32", "e4m3.e5m2")"#,
        "cvt.rna.tf32.f32",
    ] {
        assert!(source.contains(form), "{form}");
    }
}
