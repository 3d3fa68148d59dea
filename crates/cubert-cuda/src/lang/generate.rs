//! The tree walk from IR to CUDA C++. See the module docs of `lang`.

use super::cuda_type::{
    bits, constant, int_range, int_range_as_double, is_half, is_int, is_signed_int, name, wrapping,
    zero,
};
use super::{cooperative, group_mma, line, mma, pipeline};
use cubert_lang::ElemType;
use cubert_lang::ir::{
    AtomicTarget, BinaryOp, Block, Builtin, Instruction, Kernel, MathOp, MmaOperand, MmaShape,
    Operation, TensorField, Type, UnaryOp, Value,
};
use std::fmt::{self, Write};

/// Why the generator can't print a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateError(String);

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GenerateError {}

/// Helpers every generated kernel uses (after the prelude).
const HELPERS: &str = r#"
// The kernel's cube dim `x,y,z`, when the build defines it (`lang::CUBE_DIM`; a kernel is
// always launched with the cube dim it was built for). The compiler then keeps registers
// within what that many units may use, so a launch never fails for want of registers, and
// knows each unit's position is below it, so an index built from one (a shared-memory tile
// read at `q * stride + UNIT_POS_Y + i * units_y`) can be proved in bounds and its check
// dropped.
#ifdef CUBERT_CUBE_DIM
#define CUBERT_DIM_X_(x, y, z) (x)
#define CUBERT_DIM_Y_(x, y, z) (y)
#define CUBERT_DIM_Z_(x, y, z) (z)
#define CUBERT_DIM_X(dim) CUBERT_DIM_X_(dim)
#define CUBERT_DIM_Y(dim) CUBERT_DIM_Y_(dim)
#define CUBERT_DIM_Z(dim) CUBERT_DIM_Z_(dim)
#define CUBERT_LAUNCH_BOUNDS __launch_bounds__(CUBERT_DIM_X(CUBERT_CUBE_DIM) * CUBERT_DIM_Y(CUBERT_CUBE_DIM) * CUBERT_DIM_Z(CUBERT_CUBE_DIM))
#define CUBERT_ASSUME_CUBE_DIM()                                                            \
    do {                                                                                   \
        __builtin_assume(threadIdx.x < CUBERT_DIM_X(CUBERT_CUBE_DIM));                     \
        __builtin_assume(threadIdx.y < CUBERT_DIM_Y(CUBERT_CUBE_DIM));                     \
        __builtin_assume(threadIdx.z < CUBERT_DIM_Z(CUBERT_CUBE_DIM));                     \
    } while (0)
// The cube dim is a constant too: no special-register read, and index arithmetic on it
// folds (a one-element launch's path to its loads is a few instructions).
#define CUBERT_BLOCK_DIM_X ((unsigned int)CUBERT_DIM_X(CUBERT_CUBE_DIM))
#define CUBERT_BLOCK_DIM_Y ((unsigned int)CUBERT_DIM_Y(CUBERT_CUBE_DIM))
#define CUBERT_BLOCK_DIM_Z ((unsigned int)CUBERT_DIM_Z(CUBERT_CUBE_DIM))
#else
#define CUBERT_LAUNCH_BOUNDS
#define CUBERT_ASSUME_CUBE_DIM() do { } while (0)
#define CUBERT_BLOCK_DIM_X blockDim.x
#define CUBERT_BLOCK_DIM_Y blockDim.y
#define CUBERT_BLOCK_DIM_Z blockDim.z
#endif
namespace cubert_lang {
// The next value of a range loop: false when it passes `end` or wraps around.
template <typename T, typename U>
__device__ __forceinline__ bool advance(T& value, T step, T end, bool inclusive) {
    T next = (T)((U)value + (U)step);
    if (!(next > value)) return false;
    if (inclusive ? !(next <= end) : !(next < end)) return false;
    value = next;
    return true;
}
// A float or double to an integer type: saturating, NaN gives 0 (Rust's `as`).
template <typename T>
__device__ __forceinline__ T saturate(double value, double low, double high, T min, T max) {
    if (value != value) return (T)0;
    if (value <= low) return min;
    if (value >= high) return max;
    return (T)value;
}
__device__ __forceinline__ float h2f(cubert::f16 v) { return cubert::f16_to_f32(v); }
__device__ __forceinline__ float h2f(cubert::bf16 v) { return cubert::bf16_to_f32(v); }
__device__ __forceinline__ double h2d(cubert::f16 v) { return cubert::f16_to_f64(v); }
__device__ __forceinline__ double h2d(cubert::bf16 v) { return cubert::bf16_to_f64(v); }
__device__ __forceinline__ float h2f(cubert::e4m3 v) { return cubert::e4m3_to_f32(v); }
__device__ __forceinline__ float h2f(cubert::e5m2 v) { return cubert::e5m2_to_f32(v); }
__device__ __forceinline__ double h2d(cubert::e4m3 v) { return cubert::e4m3_to_f64(v); }
__device__ __forceinline__ double h2d(cubert::e5m2 v) { return cubert::e5m2_to_f64(v); }
// A tensor's metadata (see `ir::Operation::TensorMeta`): field 0 the rank, 1 the extent of
// `dim` (1 past the rank), 2 its stride (0 past the rank); saturated to u32.
__device__ __forceinline__ unsigned int tensor_meta(const cubert::Args& a, unsigned int header, int field, unsigned int dim) {
    if (header >= CUBERT_MAX_INFO) return field == 1 ? 1u : 0u;
    cubert::u64 block = a.info_words[header];
    if (block == 0 || block >= CUBERT_MAX_INFO) return field == 1 ? 1u : 0u;
    cubert::u64 rank = a.info_words[block];
    cubert::u64 word;
    if (field == 0) {
        word = rank;
    } else {
        if (dim >= rank) return field == 1 ? 1u : 0u;
        cubert::u64 index = block + 1 + (field == 2 ? rank : 0) + dim;
        if (index >= CUBERT_MAX_INFO) return field == 1 ? 1u : 0u;
        word = a.info_words[index];
    }
    return word > 0xffffffffull ? 0xffffffffu : (unsigned int)word;
}
} // namespace cubert_lang
"#;

/// Prints `kernel` as CUDA C++ with the `extern "C"` entry point `entry`.
///
/// # Errors
/// [`GenerateError`] for IR the generator can't print (an operation on a type it doesn't
/// apply to).
pub fn generate(kernel: &Kernel, entry: &str) -> Result<String, GenerateError> {
    let mut printer = Printer {
        kernel,
        out: String::new(),
        depth: 1,
    };
    printer.out.push_str(HELPERS);
    printer.out.push_str(cooperative::HELPERS);
    printer.out.push_str(line::HELPERS);
    printer.out.push_str(mma::HELPERS);
    printer.out.push_str(pipeline::HELPERS);
    if kernel.uses_plane_group_mma() {
        printer.out.push_str(&group_mma::helpers());
    }
    let _ = writeln!(
        printer.out,
        "\n// {} (generated by cubert from the kernel language)\nextern \"C\" __global__ void CUBERT_LAUNCH_BOUNDS {entry}(const __grid_constant__ cubert::Args args) {{",
        kernel.name
    );
    printer.line("CUBERT_ASSUME_CUBE_DIM();");
    let shared = kernel.shared_arrays();
    if !shared.is_empty() {
        printer.line(&format!(
            "extern __shared__ __align__({}) unsigned char cubert_shared[];",
            kernel.shared_alignment()
        ));
    }
    for (index, local) in kernel.locals.iter().enumerate() {
        let declaration = match local.ty {
            Type::Scalar(elem) => format!("{} v{index};", name(elem)),
            Type::LocalArray(elem, len) => format!("{} v{index}[{}];", name(elem), len.max(1)),
            Type::SharedArray(elem, _) => {
                let Some(&(_, _, _, offset)) = shared.iter().find(|(var, ..)| var.index() == index)
                else {
                    return fail(format!("shared array v{index} has no place"));
                };
                let ty = name(elem);
                format!("{ty}* v{index} = reinterpret_cast<{ty}*>(cubert_shared + {offset});")
            }
            other => return fail(format!("unsupported local type {other:?}")),
        };
        let comment = local
            .name
            .as_ref()
            .map(|name| format!(" // {name}"))
            .unwrap_or_default();
        let _ = writeln!(printer.out, "    {declaration}{comment}");
    }
    printer.block(&kernel.body)?;
    printer.out.push_str("}\n");
    Ok(printer.out)
}

struct Printer<'a> {
    kernel: &'a Kernel,
    out: String,
    depth: usize,
}

fn fail<T>(message: impl Into<String>) -> Result<T, GenerateError> {
    Err(GenerateError(message.into()))
}

impl Printer<'_> {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, block: &Block) -> Result<(), GenerateError> {
        for instruction in &block.instructions {
            self.instruction(instruction)?;
        }
        Ok(())
    }

    fn nested(&mut self, block: &Block) -> Result<(), GenerateError> {
        self.depth += 1;
        let result = self.block(block);
        self.depth -= 1;
        result
    }

    fn instruction(&mut self, instruction: &Instruction) -> Result<(), GenerateError> {
        match instruction {
            Instruction::SourceLine { file, line } => {
                // Read back by `compiler::source_map` when NVRTC rejects the code.
                self.line(&format!("{}{file}:{line}", crate::source_map::RUST_LINE));
            }
            Instruction::Assign { out, op } => {
                let Some(Type::Scalar(elem)) = self.kernel.local_type(*out) else {
                    return fail(format!(
                        "assignment to {out}, which isn't a scalar variable"
                    ));
                };
                let value = self.operation(op, elem)?;
                self.line(&format!("{out} = {value};"));
            }
            Instruction::Store {
                array,
                index,
                value,
            } => {
                let elem = self.array_elem(*array)?;
                let index = self.value(*index);
                let value = self.value(*value);
                if elem == ElemType::Bool {
                    self.line(&format!(
                        "cubert::store<unsigned char>(args, {array}, (cubert::u64)({index}), (unsigned char)({value} ? 1 : 0));"
                    ));
                } else {
                    self.line(&format!(
                        "cubert::store<{}>(args, {array}, (cubert::u64)({index}), {value});",
                        name(elem)
                    ));
                }
            }
            Instruction::LocalStore {
                array,
                index,
                value,
            } => {
                let index = self.value(*index);
                let value = self.value(*value);
                match self.kernel.local_type(*array) {
                    Some(Type::LocalArray(_, len)) => self.line(&format!(
                        "if (({index}) < {len}u) {array}[{index}] = {value};"
                    )),
                    Some(Type::SharedArray(elem, len)) => self.line(&format!(
                        "cubert_lang::shared_store<{}>(args, {array}, {index}, {len}u, {value});",
                        name(elem)
                    )),
                    _ => return fail(format!("{array} isn't a local or shared array")),
                }
            }
            Instruction::SyncCube if self.kernel.uses_plane_group_mma() => {
                self.line("cubert_lang::sync_cube_for_group_mma();");
            }
            Instruction::SyncCube => self.line("__syncthreads();"),
            Instruction::PlaneGroupMmaWait { pending } => {
                self.line(&format!("cubert_lang::plane_group_mma_wait<{pending}u>();"));
            }
            Instruction::PlaneGroupMma {
                acc,
                a,
                a_start,
                b,
                b_start,
                b_panel_stride,
                n,
                k,
                asynchronous,
            } => {
                let tiles = (self.kernel.local_type(*a), self.kernel.local_type(*b));
                let (Some(Type::SharedArray(elem, a_len)), Some(Type::SharedArray(b_elem, b_len))) =
                    tiles
                else {
                    return fail(format!("plane_group_mma on {a} and {b}, not shared arrays"));
                };
                let Some(Type::LocalArray(ElemType::F32, accumulators)) =
                    self.kernel.local_type(*acc)
                else {
                    return fail(format!("plane_group_mma into {acc}, not a local f32 array"));
                };
                if b_elem != elem {
                    return fail(format!("plane_group_mma of {elem} by {b_elem}"));
                }
                let (a_start, b_start) = (self.value(*a_start), self.value(*b_start));
                let stride = self.value(*b_panel_stride);
                let call = group_mma::call(
                    elem,
                    (accumulators, *n, *k, *asynchronous),
                    &acc.to_string(),
                    (&a.to_string(), a_len, &a_start),
                    (&b.to_string(), b_len, &b_start, &stride),
                );
                match call {
                    Ok(call) => self.line(&call),
                    Err(message) => return fail(message),
                }
            }
            Instruction::PlaneMma { acc, a, b } => {
                let shapes = (
                    self.kernel.local_type(*acc),
                    self.kernel.local_type(*a),
                    self.kernel.local_type(*b),
                );
                let (
                    Some(Type::LocalArray(ElemType::F32, 4)),
                    Some(Type::LocalArray(a_elem, a_len)),
                    Some(Type::LocalArray(b_elem, b_len)),
                ) = shapes
                else {
                    return fail(format!(
                        "plane_mma on {acc}, {a}, {b}: not an accumulator of 4 f32 and two \
                         fragments"
                    ));
                };
                let lengths = MmaShape::of_pair(a_elem, b_elem).map(|shape| {
                    (
                        shape.fragment_len(MmaOperand::A),
                        shape.fragment_len(MmaOperand::B),
                    )
                });
                if lengths.is_some_and(|lengths| lengths != (a_len, b_len)) {
                    return fail(format!(
                        "plane_mma on {a_elem} fragments of {a_len} and {b_len} elements"
                    ));
                }
                match mma::call(
                    a_elem,
                    b_elem,
                    &acc.to_string(),
                    &a.to_string(),
                    &b.to_string(),
                ) {
                    Ok(call) => self.line(&call),
                    Err(message) => return fail(message),
                }
            }
            Instruction::PlaneLoadFragment {
                out,
                operand,
                shared,
                start,
                stride,
            } => {
                let Some(Type::SharedArray(elem, len)) = self.kernel.local_type(*shared) else {
                    return fail(format!(
                        "a fragment loaded from {shared}, not a shared array"
                    ));
                };
                let want = MmaShape::of(elem).map_or(0, |shape| shape.fragment_len(*operand));
                match self.kernel.local_type(*out) {
                    Some(Type::LocalArray(local, count)) if local == elem && count == want => {}
                    _ => {
                        return fail(format!(
                            "a fragment of {operand:?} loaded into {out}, not a local array of \
                             {want} {elem}"
                        ));
                    }
                }
                let start = self.value(*start);
                let stride = self.value(*stride);
                let call = mma::load_fragment(
                    elem,
                    *operand,
                    &out.to_string(),
                    &shared.to_string(),
                    len,
                    &start,
                    &stride,
                );
                match call {
                    Ok(call) => self.line(&call),
                    Err(message) => return fail(message),
                }
            }
            Instruction::CopyLineAsync {
                shared,
                shared_line,
                array,
                line,
                width,
                valid,
            } => {
                let elem = self.array_elem(*array)?;
                let Some(Type::SharedArray(shared_elem, len)) = self.kernel.local_type(*shared)
                else {
                    return fail(format!(
                        "an asynchronous copy into {shared}, not a shared array"
                    ));
                };
                if shared_elem != elem || elem == ElemType::Bool {
                    return fail(format!(
                        "an asynchronous copy of {elem} into a shared array of {shared_elem}"
                    ));
                }
                let shared_line = self.value(*shared_line);
                let line = self.value(*line);
                let valid = self.value(*valid);
                self.line(&format!(
                    "cubert_lang::copy_line_async<{}, {width}>(args, {shared}, {len}u, {shared_line}, {array}, (cubert::u64)({line}), {valid});",
                    name(elem)
                ));
            }
            Instruction::CommitAsyncCopies => self.line("cubert_lang::commit_async_copies();"),
            Instruction::WaitAsyncCopies { pending } => {
                self.line(&format!("cubert_lang::wait_async_copies<{pending}>();"));
            }
            Instruction::LoadLine { out, array, index } => {
                let elem = self.array_elem(*array)?;
                let Some(Type::LocalArray(local, _)) = self.kernel.local_type(*out) else {
                    return fail(format!(
                        "a line loaded into {out}, which isn't a local array"
                    ));
                };
                if local != elem || elem == ElemType::Bool {
                    return fail(format!("a line of {local} from an array of {elem}"));
                }
                let index = self.value(*index);
                self.line(&format!(
                    "cubert_lang::load_line<{}>(args, {array}, (cubert::u64)({index}), {out});",
                    name(elem)
                ));
            }
            Instruction::StoreLine {
                array,
                index,
                value,
            } => {
                let elem = self.array_elem(*array)?;
                let Some(Type::LocalArray(local, _)) = self.kernel.local_type(*value) else {
                    return fail(format!(
                        "a line stored from {value}, which isn't a local array"
                    ));
                };
                if local != elem || elem == ElemType::Bool {
                    return fail(format!("a line of {local} into an array of {elem}"));
                }
                let index = self.value(*index);
                self.line(&format!(
                    "cubert_lang::store_line<{}>(args, {array}, (cubert::u64)({index}), {value});",
                    name(elem)
                ));
            }
            Instruction::If {
                cond,
                then,
                otherwise,
            } => {
                let cond = self.value(*cond);
                self.line(&format!("if ({cond}) {{"));
                self.nested(then)?;
                if otherwise.instructions.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.nested(otherwise)?;
                    self.line("}");
                }
            }
            Instruction::Loop { body } => {
                self.line("for (;;) {");
                self.nested(body)?;
                self.line("}");
            }
            Instruction::RangeLoop {
                var,
                start,
                end,
                step,
                inclusive,
                body,
            } => {
                let Some(Type::Scalar(elem)) = self.kernel.local_type(*var) else {
                    return fail(format!("range counter {var} isn't a scalar variable"));
                };
                if !is_int(elem) {
                    return fail(format!(
                        "a range loop counts in an integer type, not {elem}"
                    ));
                }
                let ty = name(elem);
                // Bounds known when the kernel is built (literals, compile-time values):
                // the loop is unrolled, so local arrays it indexes stay in registers.
                let constant = [start, end, step]
                    .iter()
                    .all(|value| matches!(value, Value::Const(_)));
                let step = self.value(*step);
                let end = self.value(*end);
                let start = self.value(*start);
                let compare = if *inclusive { "<=" } else { "<" };
                let positive = if is_signed_int(elem) {
                    format!("if (s_{var} <= ({ty})0) s_{var} = ({ty})1;")
                } else {
                    format!("if (s_{var} == ({ty})0) s_{var} = ({ty})1;")
                };
                self.line("{");
                self.depth += 1;
                self.line(&format!("{ty} s_{var} = {step}; {positive}"));
                self.line(&format!("{ty} e_{var} = {end};"));
                if *inclusive {
                    // `..=` may run to the type's last value: count by stepping, stopping
                    // at a wrap.
                    self.line(&format!("{var} = {start};"));
                    self.line(&format!("if ({var} {compare} e_{var}) do {{"));
                    self.nested(body)?;
                    self.line(&format!(
                        "}} while (cubert_lang::advance<{ty}, {}>({var}, s_{var}, e_{var}, {inclusive}));",
                        wrapping(elem)
                    ));
                } else {
                    // `a..b`: the trip count first (it can't overflow: at most `b - a`),
                    // then a counted loop, which the compiler unrolls and pipelines (several
                    // loads in flight per unit); the counter is rebuilt from it each trip.
                    let unsigned = wrapping(elem);
                    self.line(&format!("{ty} b_{var} = {start};"));
                    // A range that one step passes (the common case of a grid-stride loop
                    // over a grid of a unit per element) takes one trip without the
                    // division, which would be most of a small launch's time.
                    self.line(&format!(
                        "{unsigned} r_{var} = b_{var} < e_{var} ? ({unsigned})(({unsigned})e_{var} - ({unsigned})b_{var} - 1u) : 0u;"
                    ));
                    self.line(&format!(
                        "{unsigned} n_{var} = !(b_{var} < e_{var}) ? 0u : r_{var} < ({unsigned})s_{var} ? 1u : r_{var} / ({unsigned})s_{var} + 1u;"
                    ));
                    if constant {
                        self.line("#pragma unroll");
                    }
                    self.line(&format!(
                        "for ({unsigned} t_{var} = 0; t_{var} < n_{var}; ++t_{var}) {{"
                    ));
                    self.depth += 1;
                    self.line(&format!(
                        "{var} = ({ty})(({unsigned})b_{var} + t_{var} * ({unsigned})s_{var});"
                    ));
                    self.depth -= 1;
                    self.nested(body)?;
                    self.line("}");
                }
                self.depth -= 1;
                self.line("}");
            }
            Instruction::Break => self.line("break;"),
            Instruction::Continue => self.line("continue;"),
            Instruction::Return => self.line("return;"),
            other => return fail(format!("unsupported instruction {other:?}")),
        }
        Ok(())
    }

    fn array_elem(&self, slot: u32) -> Result<ElemType, GenerateError> {
        match self.kernel.arrays().nth(slot as usize) {
            Some((_, elem, _)) => Ok(elem),
            None => fail(format!("array parameter {slot} doesn't exist")),
        }
    }

    /// An operand as a C++ expression.
    fn value(&self, value: Value) -> String {
        match value {
            Value::Var(id, _) => id.to_string(),
            Value::Const(c) => constant(c),
            Value::Scalar(index, elem) => {
                format!("cubert::scalar<{}>(args, {index})", name(elem))
            }
        }
    }

    /// An operand of a half type or an 8-bit float, as `float`.
    fn as_float(&self, value: Value) -> String {
        let text = self.value(value);
        if is_half(value.elem()) || value.elem().is_fp8() {
            format!("cubert_lang::h2f({text})")
        } else {
            text
        }
    }

    /// A `float` expression rounded back to half type `elem`.
    fn from_float(elem: ElemType, text: String) -> String {
        match elem {
            ElemType::F16 => format!("cubert::f32_to_f16({text})"),
            ElemType::BF16 => format!("cubert::f32_to_bf16({text})"),
            ElemType::E4M3 => format!("cubert::f32_to_e4m3({text})"),
            ElemType::E5M2 => format!("cubert::f32_to_e5m2({text})"),
            _ => text,
        }
    }

    /// The expression computing `op`, whose result has type `out`.
    fn operation(&self, op: &Operation, out: ElemType) -> Result<String, GenerateError> {
        Ok(match op {
            Operation::Copy(value) => self.value(*value),
            Operation::Unary(unary, value) => self.unary(*unary, *value)?,
            Operation::Binary(binary, a, b) => self.binary(*binary, *a, *b, out)?,
            Operation::Math(math, value) => self.math(*math, *value)?,
            Operation::Fma(a, b, c) => {
                let elem = a.elem();
                let (a, b, c) = (self.as_float(*a), self.as_float(*b), self.as_float(*c));
                match elem {
                    ElemType::F64 => format!("fma({a}, {b}, {c})"),
                    ElemType::F32 => format!("fmaf({a}, {b}, {c})"),
                    half if is_half(half) => Self::from_float(half, format!("fmaf({a}, {b}, {c})")),
                    int if is_int(int) => {
                        let (ty, wide) = (name(int), wrapping(int));
                        format!("(({ty})(({wide})({a}) * ({wide})({b}) + ({wide})({c})))")
                    }
                    other => return fail(format!("mul_add on {other}")),
                }
            }
            Operation::Cast(value, to) => self.cast(*value, *to),
            Operation::Select(cond, a, b) => format!(
                "({} ? {} : {})",
                self.value(*cond),
                self.value(*a),
                self.value(*b)
            ),
            Operation::Builtin(builtin) => builtin_expr(*builtin).to_string(),
            Operation::Load { array, index } => {
                let elem = self.array_elem(*array)?;
                let index = self.value(*index);
                if elem == ElemType::Bool {
                    format!(
                        "(cubert::load<unsigned char>(args, {array}, (cubert::u64)({index})) != 0)"
                    )
                } else {
                    format!(
                        "cubert::load<{}>(args, {array}, (cubert::u64)({index}))",
                        name(elem)
                    )
                }
            }
            Operation::LocalLoad { array, index } => {
                let index = self.value(*index);
                let text = self.value(*array);
                match array.ty() {
                    Type::LocalArray(elem, len) => {
                        format!("(({index}) < {len}u ? {text}[{index}] : {})", zero(elem))
                    }
                    Type::SharedArray(elem, len) => format!(
                        "cubert_lang::shared_load<{}>(args, {text}, {index}, {len}u)",
                        name(elem)
                    ),
                    _ => return fail("an array load from something that isn't an array"),
                }
            }
            Operation::TensorMeta { tensor, field, dim } => {
                let header = self.kernel.scalars().count() as u32 + tensor;
                let dim = dim.map(|d| self.value(d)).unwrap_or_else(|| "0u".into());
                let field = match field {
                    TensorField::Rank => 0,
                    TensorField::Shape => 1,
                    TensorField::Stride => 2,
                };
                format!("cubert_lang::tensor_meta(args, {header}, {field}, {dim})")
            }
            Operation::Plane(op, value) => {
                cooperative::plane(*op, value.elem(), &self.value(*value))
            }
            Operation::PlaneShuffle { value, lane } => format!(
                "cubert_lang::plane_shuffle<{}>({}, {})",
                name(value.elem()),
                self.value(*value),
                self.value(*lane)
            ),
            Operation::Atomic {
                op,
                target,
                index,
                value,
                compare,
            } => {
                let elem = value.elem();
                let ty = name(elem);
                let index = self.value(*index);
                let slot = match target {
                    AtomicTarget::Global(slot) => {
                        format!(
                            "cubert_lang::global_slot<{ty}>(args, {slot}, (cubert::u64)({index}))"
                        )
                    }
                    AtomicTarget::Shared(array) => {
                        let Type::SharedArray(_, len) = array.ty() else {
                            return fail("a shared atomic on something that isn't a shared array");
                        };
                        format!(
                            "cubert_lang::shared_slot<{ty}>(args, {}, {index}, {len}u)",
                            self.value(*array)
                        )
                    }
                };
                let compare = compare.map(|c| self.value(c)).unwrap_or_default();
                cooperative::atomic(*op, elem, &slot, &self.value(*value), &compare)
            }
            Operation::Length { array } => {
                let elem = self.array_elem(*array)?;
                let ty = if elem == ElemType::Bool {
                    "unsigned char"
                } else {
                    name(elem)
                };
                let len = format!("cubert::len<{ty}>(args, {array})");
                format!("({len} > 0xffffffffull ? 0xffffffffu : (unsigned int){len})")
            }
            other => return fail(format!("unsupported operation {other:?}")),
        })
    }

    fn unary(&self, unary: UnaryOp, value: Value) -> Result<String, GenerateError> {
        let elem = value.elem();
        let text = self.value(value);
        Ok(match (unary, elem) {
            (UnaryOp::Not, ElemType::Bool) => format!("(!{text})"),
            (UnaryOp::Not, int) if is_int(int) => format!("(({})~({text}))", name(int)),
            (UnaryOp::Neg, int) if is_int(int) => {
                format!("(({})(0u - ({})({text})))", name(int), wrapping(int))
            }
            (UnaryOp::Neg, ElemType::F16 | ElemType::BF16) => format!(
                "cubert::make_{}((({text}).bits) ^ 0x8000u)",
                if elem == ElemType::F16 { "f16" } else { "bf16" }
            ),
            (UnaryOp::Neg, _) if elem.is_float() => format!("(-{text})"),
            (op, elem) => return fail(format!("{op:?} on {elem}")),
        })
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: Value,
        b: Value,
        out: ElemType,
    ) -> Result<String, GenerateError> {
        let elem = a.elem();
        // The 8-bit floats have no arithmetic (they aren't `Numeric`): only comparisons
        // reach here, in `float`.
        if is_half(elem) || elem.is_fp8() {
            let (x, y) = (self.as_float(a), self.as_float(b));
            let computed = match op {
                BinaryOp::Add => format!("({x} + {y})"),
                BinaryOp::Sub => format!("({x} - {y})"),
                BinaryOp::Mul => format!("({x} * {y})"),
                BinaryOp::Div => format!("({x} / {y})"),
                BinaryOp::Rem => format!("fmodf({x}, {y})"),
                BinaryOp::Min => format!("fminf({x}, {y})"),
                BinaryOp::Max => format!("fmaxf({x}, {y})"),
                BinaryOp::Pow => format!("powf({x}, {y})"),
                comparison if comparison.is_comparison() => {
                    return Ok(format!("({x} {} {y})", comparison_symbol(comparison)));
                }
                other => return fail(format!("{other:?} on {elem}")),
            };
            return Ok(Self::from_float(out, computed));
        }
        let (x, y) = (self.value(a), self.value(b));
        if op.is_comparison() {
            return Ok(format!("({x} {} {y})", comparison_symbol(op)));
        }
        if elem.is_float() {
            let f = if elem == ElemType::F32 { "f" } else { "" };
            return Ok(match op {
                BinaryOp::Add => format!("({x} + {y})"),
                BinaryOp::Sub => format!("({x} - {y})"),
                BinaryOp::Mul => format!("({x} * {y})"),
                BinaryOp::Div => format!("({x} / {y})"),
                BinaryOp::Rem => format!("fmod{f}({x}, {y})"),
                BinaryOp::Min => format!("fmin{f}({x}, {y})"),
                BinaryOp::Max => format!("fmax{f}({x}, {y})"),
                BinaryOp::Pow => format!("pow{f}({x}, {y})"),
                other => return fail(format!("{other:?} on {elem}")),
            });
        }
        if elem == ElemType::Bool {
            return Ok(match op {
                BinaryOp::BitAnd => format!("({x} & {y})"),
                BinaryOp::BitOr => format!("({x} | {y})"),
                BinaryOp::BitXor => format!("({x} ^ {y})"),
                other => return fail(format!("{other:?} on bool")),
            });
        }
        let ty = name(elem);
        let wide = wrapping(elem);
        let mask = bits(elem) - 1;
        Ok(match op {
            BinaryOp::Add => format!("(({ty})(({wide})({x}) + ({wide})({y})))"),
            BinaryOp::Sub => format!("(({ty})(({wide})({x}) - ({wide})({y})))"),
            BinaryOp::Mul => format!("(({ty})(({wide})({x}) * ({wide})({y})))"),
            BinaryOp::Div if is_signed_int(elem) => format!(
                "(({y}) == ({ty})0 ? ({ty})0 : (({y}) == ({ty})-1 ? (({ty})(0u - ({wide})({x}))) : ({ty})(({x}) / ({y}))))"
            ),
            BinaryOp::Rem if is_signed_int(elem) => {
                format!("(({y}) == ({ty})0 || ({y}) == ({ty})-1 ? ({ty})0 : ({ty})(({x}) % ({y})))")
            }
            BinaryOp::Div => format!("(({y}) == ({ty})0 ? ({ty})0 : ({ty})(({x}) / ({y})))"),
            BinaryOp::Rem => format!("(({y}) == ({ty})0 ? ({ty})0 : ({ty})(({x}) % ({y})))"),
            BinaryOp::BitAnd => format!("(({ty})(({x}) & ({y})))"),
            BinaryOp::BitOr => format!("(({ty})(({x}) | ({y})))"),
            BinaryOp::BitXor => format!("(({ty})(({x}) ^ ({y})))"),
            BinaryOp::Shl => format!("(({ty})(({wide})({x}) << (({y}) & {mask}u)))"),
            BinaryOp::Shr if is_signed_int(elem) => {
                let signed = if elem == ElemType::I64 {
                    "long long"
                } else {
                    "int"
                };
                format!("(({ty})(({signed})({x}) >> (({y}) & {mask}u)))")
            }
            BinaryOp::Shr => format!("(({ty})(({wide})({x}) >> (({y}) & {mask}u)))"),
            BinaryOp::Min => format!("(({x}) < ({y}) ? ({x}) : ({y}))"),
            BinaryOp::Max => format!("(({x}) > ({y}) ? ({x}) : ({y}))"),
            other => return fail(format!("{other:?} on {elem}")),
        })
    }

    fn math(&self, math: MathOp, value: Value) -> Result<String, GenerateError> {
        let elem = value.elem();
        if is_int(elem) {
            if math != MathOp::Abs {
                return fail(format!("{} on {elem}", math.name()));
            }
            let (ty, wide, text) = (name(elem), wrapping(elem), self.value(value));
            if !is_signed_int(elem) {
                return Ok(text);
            }
            return Ok(format!(
                "(({text}) < ({ty})0 ? ({ty})(0u - ({wide})({text})) : ({text}))"
            ));
        }
        if !elem.is_float() {
            return fail(format!("{} on {elem}", math.name()));
        }
        let x = self.as_float(value);
        let double = elem == ElemType::F64;
        let f = if double { "" } else { "f" };
        let computed = match math {
            MathOp::Abs => format!("fabs{f}({x})"),
            MathOp::Sqrt => format!("sqrt{f}({x})"),
            MathOp::Exp => format!("exp{f}({x})"),
            MathOp::Ln => format!("log{f}({x})"),
            MathOp::Log2 => format!("log2{f}({x})"),
            MathOp::Log10 => format!("log10{f}({x})"),
            MathOp::Sin => format!("sin{f}({x})"),
            MathOp::Cos => format!("cos{f}({x})"),
            MathOp::Tan => format!("tan{f}({x})"),
            MathOp::Tanh => format!("tanh{f}({x})"),
            MathOp::Erf => format!("erf{f}({x})"),
            MathOp::Floor => format!("floor{f}({x})"),
            MathOp::Ceil => format!("ceil{f}({x})"),
            MathOp::Round => format!("round{f}({x})"),
            MathOp::Trunc => format!("trunc{f}({x})"),
            MathOp::Recip if double => format!("(1.0 / {x})"),
            MathOp::Recip => format!("(1.0f / {x})"),
        };
        Ok(Self::from_float(elem, computed))
    }

    /// `value as to`, with the language's conversions (see `native::CastFrom`).
    fn cast(&self, value: Value, to: ElemType) -> String {
        let from = value.elem();
        let text = self.value(value);
        if from == to {
            return text;
        }
        // The source as double (exact for every type but the 64-bit integers, which go
        // through their own paths below).
        let as_double = match from {
            ElemType::F16 | ElemType::BF16 | ElemType::E4M3 | ElemType::E5M2 => {
                format!("cubert_lang::h2d({text})")
            }
            ElemType::Bool => format!("(({text}) ? 1.0 : 0.0)"),
            _ => format!("(double)({text})"),
        };
        // A type stored as bits and widened through `h2f` (exact to float).
        let narrow = |elem: ElemType| is_half(elem) || elem.is_fp8();
        match to {
            ElemType::Bool => match from {
                half if narrow(half) => format!("(cubert_lang::h2f({text}) != 0.0f)"),
                _ => format!("(({text}) != 0)"),
            },
            ElemType::F64 => as_double,
            ElemType::F32 => match from {
                half if narrow(half) => format!("cubert_lang::h2f({text})"),
                ElemType::Bool => format!("(({text}) ? 1.0f : 0.0f)"),
                // One rounding from every integer and from double (cvt.rn).
                _ => format!("(float)({text})"),
            },
            ElemType::F16 => match from {
                ElemType::F32 => format!("cubert::f32_to_f16({text})"),
                _ => format!("cubert::f64_to_f16({as_double})"),
            },
            ElemType::BF16 => match from {
                ElemType::F32 => format!("cubert::f32_to_bf16({text})"),
                _ => format!("cubert::f64_to_bf16({as_double})"),
            },
            // One rounding: the narrow float types widen to float exactly.
            ElemType::E4M3 | ElemType::E5M2 => {
                let to = to.name();
                match from {
                    ElemType::F32 => format!("cubert::f32_to_{to}({text})"),
                    narrow_from if narrow(narrow_from) => {
                        format!("cubert::f32_to_{to}(cubert_lang::h2f({text}))")
                    }
                    _ => format!("cubert::f64_to_{to}({as_double})"),
                }
            }
            int => {
                let ty = name(int);
                if from.is_float() {
                    let (low, high) = int_range_as_double(int);
                    let (min, max) = int_range(int);
                    format!("cubert_lang::saturate<{ty}>({as_double}, {low}, {high}, {min}, {max})")
                } else if from == ElemType::Bool {
                    format!("(({ty})(({text}) ? 1 : 0))")
                } else {
                    // Integer to integer wraps: conversions to unsigned types are modular
                    // in C++, to signed types modular in NVCC/NVRTC.
                    format!("(({ty})({text}))")
                }
            }
        }
    }
}

fn comparison_symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        _ => ">=",
    }
}

fn builtin_expr(builtin: Builtin) -> &'static str {
    const UNIT_POS: &str = "(threadIdx.x + threadIdx.y * CUBERT_BLOCK_DIM_X + threadIdx.z * CUBERT_BLOCK_DIM_X * CUBERT_BLOCK_DIM_Y)";
    const CUBE_POS: &str =
        "(blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y)";
    match builtin {
        Builtin::AbsolutePos => {
            "((blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y) * (CUBERT_BLOCK_DIM_X * CUBERT_BLOCK_DIM_Y * CUBERT_BLOCK_DIM_Z) + (threadIdx.x + threadIdx.y * CUBERT_BLOCK_DIM_X + threadIdx.z * CUBERT_BLOCK_DIM_X * CUBERT_BLOCK_DIM_Y))"
        }
        Builtin::AbsolutePosX => "(blockIdx.x * CUBERT_BLOCK_DIM_X + threadIdx.x)",
        Builtin::AbsolutePosY => "(blockIdx.y * CUBERT_BLOCK_DIM_Y + threadIdx.y)",
        Builtin::AbsolutePosZ => "(blockIdx.z * CUBERT_BLOCK_DIM_Z + threadIdx.z)",
        Builtin::UnitPos => UNIT_POS,
        Builtin::UnitPosX => "threadIdx.x",
        Builtin::UnitPosY => "threadIdx.y",
        Builtin::UnitPosZ => "threadIdx.z",
        Builtin::CubePos => CUBE_POS,
        Builtin::CubePosX => "blockIdx.x",
        Builtin::CubePosY => "blockIdx.y",
        Builtin::CubePosZ => "blockIdx.z",
        Builtin::CubeDim => "(CUBERT_BLOCK_DIM_X * CUBERT_BLOCK_DIM_Y * CUBERT_BLOCK_DIM_Z)",
        Builtin::CubeDimX => "CUBERT_BLOCK_DIM_X",
        Builtin::CubeDimY => "CUBERT_BLOCK_DIM_Y",
        Builtin::CubeDimZ => "CUBERT_BLOCK_DIM_Z",
        Builtin::CubeCount => "(gridDim.x * gridDim.y * gridDim.z)",
        Builtin::CubeCountX => "gridDim.x",
        Builtin::CubeCountY => "gridDim.y",
        Builtin::CubeCountZ => "gridDim.z",
        Builtin::PlaneDim => "32u",
        Builtin::UnitPosPlane => {
            "((threadIdx.x + threadIdx.y * CUBERT_BLOCK_DIM_X + threadIdx.z * CUBERT_BLOCK_DIM_X * CUBERT_BLOCK_DIM_Y) & 31u)"
        }
    }
}
