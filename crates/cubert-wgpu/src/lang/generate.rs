//! The tree walk from IR to WGSL. See the module docs of `lang`.

use super::atomic::{self, Array};
use super::error::{GenerateError, fail};
use super::helpers::Helpers;
use super::memory::{self, ArrayParam};
use super::shared;
use super::wgsl_type::{
    constant, from_unsigned, is_int, is_signed_int, normalize, register, to_unsigned,
    unsigned_register, unsupported, zero,
};
use super::{WgslTarget, arith, cast, plane, tensor, vector};
use cubert_lang::ElemType;
use cubert_lang::ir::{
    AtomicTarget, Block, Builtin, Instruction, Kernel, Operation, TensorField, Type, Value, VarId,
};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Prints `kernel` as a WGSL compute shader whose entry point is `entry`, for workgroups
/// of `cube_dim` units, for an adapter that can do what `target` says.
///
/// # Errors
/// [`GenerateError`] naming the kernel for IR the generator can't print, or (then
/// [`GenerateError::is_unsupported`]) for a type or operation the target can't run.
pub fn generate(
    kernel: &Kernel,
    entry: &str,
    cube_dim: (u32, u32, u32),
    target: &WgslTarget,
) -> Result<String, GenerateError> {
    generate_inner(kernel, entry, cube_dim, target)
        .map_err(|error| error.context(&format!("kernel `{}`", kernel.name)))
}

fn generate_inner(
    kernel: &Kernel,
    entry: &str,
    cube_dim: (u32, u32, u32),
    target: &WgslTarget,
) -> Result<String, GenerateError> {
    if cube_dim.0 == 0 || cube_dim.1 == 0 || cube_dim.2 == 0 {
        return fail(format!("a cube of {cube_dim:?} units"));
    }
    if !is_identifier(entry) {
        return fail(format!("`{entry}` isn't a WGSL identifier"));
    }
    let scan = Scan::of(kernel, target)?;
    let arrays: Vec<ArrayParam> = kernel
        .arrays()
        .map(|(slot, elem, mutable)| ArrayParam {
            elem,
            mutable,
            atomic: scan.atomic_arrays.contains(&(slot as u32)),
        })
        .collect();
    let mut printer = Printer {
        kernel,
        target: *target,
        vector_lines: target.vector_lines & super::vector::candidates(kernel),
        cube_dim,
        arrays,
        atomic_shared: scan.atomic_shared,
        helpers: Helpers::default(),
        out: String::new(),
        depth: 1,
        pinned: None,
        writes_global: kernel
            .params
            .iter()
            .any(|param| matches!(param, cubert_lang::ir::Param::Array { mutable: true, .. })),
    };
    printer.locals()?;
    printer.block(&kernel.body)?;
    Ok(printer.module(entry, scan.uses_plane))
}

/// Whether `name` is a plain WGSL identifier (ASCII letters, digits, `_`; not starting
/// with a digit or `__`).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
        && name != "_"
}

/// What a first walk over the kernel finds: which arrays atomics target, whether plane
/// operations or their builtins appear; it also refuses types the target lacks.
struct Scan {
    atomic_arrays: BTreeSet<u32>,
    atomic_shared: BTreeSet<usize>,
    uses_plane: bool,
}

impl Scan {
    fn of(kernel: &Kernel, target: &WgslTarget) -> Result<Self, GenerateError> {
        let mut scan = Scan {
            atomic_arrays: BTreeSet::new(),
            atomic_shared: BTreeSet::new(),
            uses_plane: false,
        };
        let mut elems = BTreeSet::new();
        for param in &kernel.params {
            match param {
                cubert_lang::ir::Param::Array { elem, .. }
                | cubert_lang::ir::Param::Scalar(elem) => {
                    elems.insert(*elem);
                }
                other => return fail(format!("unsupported parameter {other:?}")),
            }
        }
        for local in &kernel.locals {
            elems.insert(local.ty.elem());
        }
        scan.block(&kernel.body, &mut elems)?;
        for elem in elems {
            if let Some(reason) = unsupported(elem, target) {
                return Err(GenerateError::unsupported(reason));
            }
        }
        if scan.uses_plane && !target.subgroups {
            return Err(GenerateError::unsupported(
                "plane operations need subgroups, which this adapter lacks (SUBGROUP)",
            ));
        }
        Ok(scan)
    }

    fn block(
        &mut self,
        block: &Block,
        elems: &mut BTreeSet<ElemType>,
    ) -> Result<(), GenerateError> {
        for instruction in &block.instructions {
            match instruction {
                Instruction::Assign { op, .. } => {
                    for value in operands(op) {
                        elems.insert(value.elem());
                    }
                    match op {
                        Operation::Cast(_, to) => {
                            elems.insert(*to);
                        }
                        Operation::Plane(..) | Operation::PlaneShuffle { .. } => {
                            self.uses_plane = true;
                        }
                        Operation::Builtin(Builtin::PlaneDim | Builtin::UnitPosPlane) => {
                            self.uses_plane = true;
                        }
                        Operation::Atomic { target, .. } => match target {
                            AtomicTarget::Global(slot) => {
                                self.atomic_arrays.insert(*slot);
                            }
                            AtomicTarget::Shared(Value::Var(var, _)) => {
                                self.atomic_shared.insert(var.index());
                            }
                            AtomicTarget::Shared(other) => {
                                return fail(format!("an atomic on {other:?}"));
                            }
                        },
                        _ => {}
                    }
                }
                Instruction::Store { index, value, .. }
                | Instruction::LocalStore { index, value, .. } => {
                    elems.insert(index.elem());
                    elems.insert(value.elem());
                }
                Instruction::LoadLine { index, .. } | Instruction::StoreLine { index, .. } => {
                    elems.insert(index.elem());
                }
                Instruction::CopyLineAsync {
                    shared_line,
                    line,
                    valid,
                    ..
                } => {
                    for value in [shared_line, line, valid] {
                        elems.insert(value.elem());
                    }
                }
                Instruction::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    elems.insert(cond.elem());
                    self.block(then, elems)?;
                    self.block(otherwise, elems)?;
                }
                Instruction::Loop { body } => self.block(body, elems)?,
                Instruction::RangeLoop {
                    start,
                    end,
                    step,
                    body,
                    ..
                } => {
                    for value in [start, end, step] {
                        elems.insert(value.elem());
                    }
                    self.block(body, elems)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The bits of `elem`'s size (a constant's bits are kept zero-extended).
fn elem_mask(elem: ElemType) -> u64 {
    match elem.size() {
        8 => u64::MAX,
        size => (1u64 << (8 * size)) - 1,
    }
}

/// The scalar operands of `op` (array operands of local and shared loads included).
fn operands(op: &Operation) -> Vec<Value> {
    match op {
        Operation::Copy(v)
        | Operation::Unary(_, v)
        | Operation::Math(_, v)
        | Operation::Cast(v, _)
        | Operation::Plane(_, v) => vec![*v],
        Operation::Binary(_, a, b) => vec![*a, *b],
        Operation::Fma(a, b, c) | Operation::Select(a, b, c) => vec![*a, *b, *c],
        Operation::Load { index, .. } => vec![*index],
        Operation::LocalLoad { array, index } => vec![*array, *index],
        Operation::TensorMeta { dim, .. } => dim.iter().copied().collect(),
        Operation::PlaneShuffle { value, lane } => vec![*value, *lane],
        Operation::Atomic {
            target,
            index,
            value,
            compare,
            ..
        } => {
            let mut values = vec![*index, *value];
            values.extend(*compare);
            if let AtomicTarget::Shared(array) = target {
                values.push(*array);
            }
            values
        }
        _ => Vec::new(),
    }
}

struct Printer<'a> {
    kernel: &'a Kernel,
    target: WgslTarget,
    /// The arrays printed as `array<vec4<T>>`: the target's, where the kernel allows.
    vector_lines: u64,
    cube_dim: (u32, u32, u32),
    arrays: Vec<ArrayParam>,
    atomic_shared: BTreeSet<usize>,
    helpers: Helpers,
    out: String,
    depth: usize,
    /// A constant printed as `cubert_k` (a `let` WGSL can't fold: see `Instruction::Assign`).
    pinned: Option<Value>,
    /// Whether the kernel writes a global array (`sync_cube` then orders storage too).
    writes_global: bool,
}

impl Printer<'_> {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// The local declarations at the top of the entry point: scalars read from the info
    /// words, then every local variable (zero-initialized, as WGSL does).
    fn locals(&mut self) -> Result<(), GenerateError> {
        let arrays = self.arrays.len() as u32;
        let scalars: Vec<ElemType> = self.kernel.scalars().collect();
        for (index, elem) in scalars.into_iter().enumerate() {
            let read = memory::scalar(arrays, index as u32, elem);
            self.line(&format!(
                "let s{index}: {} = {read}; // scalar {elem}",
                register(elem)
            ));
        }
        for (index, local) in self.kernel.locals.iter().enumerate() {
            let declaration = match local.ty {
                Type::Scalar(elem) => format!("var v{index}: {};", register(elem)),
                Type::LocalArray(elem, len) => {
                    format!("var v{index}: array<{}, {}>;", register(elem), len.max(1))
                }
                // Module-scope `var<workgroup>`, declared in `module`.
                Type::SharedArray(..) => continue,
                other => return fail(format!("unsupported local type {other:?}")),
            };
            let comment = local
                .name
                .as_ref()
                .map(|name| format!(" // {name}"))
                .unwrap_or_default();
            self.line(&format!("{declaration}{comment}"));
        }
        Ok(())
    }

    /// The whole module: bindings, shared arrays, helpers, and the entry point around the
    /// printed body.
    fn module(&mut self, entry: &str, uses_plane: bool) -> String {
        let mut out = format!(
            "// {} (generated by cubert from the kernel language)\n\n",
            self.kernel.name
        );
        out.push_str(&memory::bindings(&self.arrays, self.vector_lines));
        for (var, elem, len, _) in self.kernel.shared_arrays() {
            let atomic = self.atomic_shared.contains(&var.index());
            out.push_str(&shared::declare_shared(var, elem, len, atomic));
        }
        out.push('\n');
        out.push_str(&self.helpers.render());
        let (x, y, z) = self.cube_dim;
        // naga refuses `subgroup_invocation_id` in workgroups of more than one dimension
        // (the backends don't agree on how they map to subgroups): there the lane is
        // `UNIT_POS % PLANE_DIM`, the language's definition.
        let one_dimensional = y == 1 && z == 1;
        let (plane, lane) = match (uses_plane, one_dimensional) {
            (false, _) => ("", ""),
            (true, true) => (
                ",\n    @builtin(subgroup_size) cubert_plane_dim: u32,\n    @builtin(subgroup_invocation_id) cubert_lane: u32",
                "",
            ),
            (true, false) => (
                ",\n    @builtin(subgroup_size) cubert_plane_dim: u32",
                "    let cubert_lane = cubert_unit_index % cubert_plane_dim;\n",
            ),
        };
        let _ = write!(
            out,
            "@compute @workgroup_size({x}, {y}, {z})\nfn {entry}(\n    @builtin(local_invocation_id) cubert_unit: vec3<u32>,\n    @builtin(local_invocation_index) cubert_unit_index: u32,\n    @builtin(workgroup_id) cubert_cube: vec3<u32>,\n    @builtin(num_workgroups) cubert_cubes: vec3<u32>{plane},\n) {{\n{lane}{}}}\n",
            self.out
        );
        out
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
                self.line(&format!("// rust: {file}:{line}"));
            }
            Instruction::Assign { out, op } => self.assign(*out, op)?,
            Instruction::Store {
                array,
                index,
                value,
            } => {
                let param = self.array(*array)?;
                if value.elem() != param.elem {
                    return fail(format!(
                        "a {} stored to an array of {}",
                        value.elem(),
                        param.elem
                    ));
                }
                let store = memory::store(&mut self.helpers, self.target.checked, *array, &param)?;
                let (index, value) = (self.value(*index), self.value(*value));
                self.line(&format!("{store}({index}, {value});"));
            }
            Instruction::LocalStore {
                array,
                index,
                value,
            } => {
                let text = self.value(*index);
                let stored = self.value(*value);
                match self.kernel.local_type(*array) {
                    Some(Type::LocalArray(_, len)) => {
                        if let Some(statement) =
                            shared::local_store(&array.to_string(), len, *index, &text, &stored)
                        {
                            self.line(&statement);
                        }
                    }
                    Some(Type::SharedArray(elem, len)) => {
                        let atomic = self.atomic_shared.contains(&array.index());
                        let store = shared::shared_store(
                            &mut self.helpers,
                            self.target.checked,
                            *array,
                            elem,
                            len,
                            atomic,
                        );
                        self.line(&format!("{store}({text}, {stored});"));
                    }
                    _ => return fail(format!("{array} isn't a local or shared array")),
                }
            }
            Instruction::LoadLine { out, array, index } => {
                let param = self.array(*array)?;
                let Some(Type::LocalArray(local, width)) = self.kernel.local_type(*out) else {
                    return fail(format!(
                        "a line loaded into {out}, which isn't a local array"
                    ));
                };
                if local != param.elem {
                    return fail(format!("a line of {local} from an array of {}", param.elem));
                }
                let index = self.value(*index);
                if self.vectorized(*array) {
                    let load = vector::load(&mut self.helpers, self.target.checked, *array, &param);
                    self.line(&format!("{{ let line = {load}({index});"));
                    for k in 0..width {
                        self.line(&format!("    {out}[{k}] = line[{k}];"));
                    }
                    self.line("}");
                    return Ok(());
                }
                let load = memory::load(&mut self.helpers, self.target.checked, *array, &param);
                let element = memory::line_element(&mut self.helpers);
                for k in 0..width {
                    self.line(&format!(
                        "{out}[{k}] = {load}({element}({index}, {width}u, {k}u));"
                    ));
                }
            }
            Instruction::StoreLine {
                array,
                index,
                value,
            } => {
                let param = self.array(*array)?;
                let Some(Type::LocalArray(local, width)) = self.kernel.local_type(*value) else {
                    return fail(format!(
                        "a line stored from {value}, which isn't a local array"
                    ));
                };
                if local != param.elem {
                    return fail(format!("a line of {local} into an array of {}", param.elem));
                }
                let index = self.value(*index);
                if self.vectorized(*array) {
                    let store =
                        vector::store(&mut self.helpers, self.target.checked, *array, &param);
                    let parts: Vec<String> = (0..width).map(|k| format!("{value}[{k}]")).collect();
                    self.line(&format!(
                        "{store}({index}, vec4<{}>({}));",
                        super::wgsl_type::register(param.elem),
                        parts.join(", ")
                    ));
                    return Ok(());
                }
                let store = memory::store(&mut self.helpers, self.target.checked, *array, &param)?;
                let element = memory::line_element(&mut self.helpers);
                for k in 0..width {
                    self.line(&format!(
                        "{store}({element}({index}, {width}u, {k}u), {value}[{k}]);"
                    ));
                }
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
                self.line("loop {");
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
            } => self.range_loop(*var, *start, *end, *step, *inclusive, body)?,
            Instruction::Break => self.line("break;"),
            Instruction::Continue => self.line("continue;"),
            Instruction::Return => self.line("return;"),
            Instruction::SyncCube => {
                // `workgroupBarrier` orders workgroup memory only; the language's barrier
                // also makes the cube's global writes visible to its units.
                if self.writes_global {
                    self.line("storageBarrier();");
                }
                self.line("workgroupBarrier();");
            }
            Instruction::CopyLineAsync {
                shared,
                shared_line,
                array,
                line,
                width,
                valid,
            } => self.copy_line(*shared, *shared_line, *array, *line, *width, *valid)?,
            // Copies land at once here (`copy_line`), so there is nothing to wait for.
            Instruction::CommitAsyncCopies | Instruction::WaitAsyncCopies { .. } => {}
            Instruction::PlaneLoadFragment { .. } => {
                return Err(GenerateError::unsupported(
                    "plane_load_a/plane_load_b: fragments feed plane_mma, which WGSL lacks; \
                     this backend's `Features::plane_mma` is false",
                ));
            }
            Instruction::PlaneGroupMma { .. } | Instruction::PlaneGroupMmaWait { .. } => {
                // WGSL has no tensor-core operation (`Features::plane_group_mma` is false).
                return Err(GenerateError::unsupported(
                    "plane_group_mma: WGSL has no matrix multiply-accumulate of the plane \
                     group (tensor cores); this backend's `Features::plane_group_mma` is false",
                ));
            }
            Instruction::PlaneMma { .. } => {
                // WGSL has no tensor-core operation (`Features::plane_mma` is false here).
                return Err(GenerateError::unsupported(
                    "plane_mma: WGSL has no matrix multiply-accumulate of the plane (tensor \
                     cores); this backend's `Features::plane_mma` is false",
                ));
            }
            other => return fail(format!("unsupported instruction {other:?}")),
        }
        Ok(())
    }

    /// An asynchronous copy, made synchronously (WGSL has no asynchronous copy; the
    /// language lets a copy land any time before its wait): each element of line `line`
    /// of `array` is loaded and stored to line `shared_line` of `shared`, through the
    /// checked accesses; zeros, without reading `array`, when `valid` is false.
    fn copy_line(
        &mut self,
        shared: VarId,
        shared_line: Value,
        array: u32,
        line: Value,
        width: u32,
        valid: Value,
    ) -> Result<(), GenerateError> {
        let param = self.array(array)?;
        let Some(Type::SharedArray(elem, len)) = self.kernel.local_type(shared) else {
            return fail(format!(
                "an asynchronous copy into {shared}, not a shared array"
            ));
        };
        if elem != param.elem {
            return fail(format!(
                "an asynchronous copy of {} into a shared array of {elem}",
                param.elem
            ));
        }
        let load = memory::load(&mut self.helpers, self.target.checked, array, &param);
        let atomic = self.atomic_shared.contains(&shared.index());
        let store = shared::shared_store(
            &mut self.helpers,
            self.target.checked,
            shared,
            elem,
            len,
            atomic,
        );
        let element = memory::line_element(&mut self.helpers);
        let (shared_line, line, valid) =
            (self.value(shared_line), self.value(line), self.value(valid));
        let zero = zero(elem);
        self.line(&format!("if ({valid}) {{"));
        for k in 0..width {
            self.line(&format!(
                "    {store}({element}({shared_line}, {width}u, {k}u), {load}({element}({line}, {width}u, {k}u)));"
            ));
        }
        self.line("} else {");
        for k in 0..width {
            self.line(&format!(
                "    {store}({element}({shared_line}, {width}u, {k}u), {zero});"
            ));
        }
        self.line("}");
        Ok(())
    }

    /// `out = op;`. WGSL evaluates an expression of constants when the shader is created
    /// and rejects it if it overflows, gives a NaN or infinity, or divides by zero, where
    /// the language gives a value: an operation of constants only reads its first
    /// constant through a `let` (which WGSL never folds).
    fn assign(&mut self, out: cubert_lang::ir::VarId, op: &Operation) -> Result<(), GenerateError> {
        let Some(Type::Scalar(elem)) = self.kernel.local_type(out) else {
            return fail(format!(
                "assignment to {out}, which isn't a scalar variable"
            ));
        };
        let values = operands(op);
        let pin = !matches!(op, Operation::Copy(_))
            && !values.is_empty()
            && values.iter().all(|value| matches!(value, Value::Const(_)));
        if pin {
            let first = values[0];
            let (ty, text) = (register(first.elem()), self.value(first));
            self.line("{");
            self.depth += 1;
            self.line(&format!("let cubert_k: {ty} = {text};"));
            self.pinned = Some(first);
        }
        let computed = self.operation(op, elem);
        self.pinned = None;
        let computed = computed?;
        self.line(&format!("{out} = {computed};"));
        if pin {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    fn range_loop(
        &mut self,
        var: cubert_lang::ir::VarId,
        start: Value,
        end: Value,
        step: Value,
        inclusive: bool,
        body: &Block,
    ) -> Result<(), GenerateError> {
        let Some(Type::Scalar(elem)) = self.kernel.local_type(var) else {
            return fail(format!("range counter {var} isn't a scalar variable"));
        };
        if !is_int(elem) {
            return fail(format!(
                "a range loop counts in an integer type, not {elem}"
            ));
        }
        if let Some(values) = super::unroll::trips(start, end, step, inclusive, body) {
            for value in values {
                let counter = self.value(Value::Const(cubert_lang::ir::Constant {
                    elem,
                    bits: value as u64 & elem_mask(elem),
                }));
                self.line(&format!("{{ // {var} = {value}"));
                self.depth += 1;
                self.line(&format!("{var} = {counter};"));
                self.depth -= 1;
                self.nested(body)?;
                self.line("}");
            }
            return Ok(());
        }
        let ty = register(elem);
        let unsigned = unsigned_register(elem);
        let (zero, one) = match ty {
            "i32" => ("0i", "1i"),
            "u32" => ("0u", "1u"),
            "i64" => ("0li", "1li"),
            _ => ("0lu", "1lu"),
        };
        let (uzero, uone) = if unsigned == "u64" {
            ("0lu", "1lu")
        } else {
            ("0u", "1u")
        };
        let (start, end, step) = (self.value(start), self.value(end), self.value(step));
        // A step below 1 counts as 1, as on the CPU and CUDA, so every loop ends.
        let positive = if is_signed_int(elem) {
            format!("if (s_{var} <= {zero}) {{ s_{var} = {one}; }}")
        } else {
            format!("if (s_{var} == {zero}) {{ s_{var} = {one}; }}")
        };
        self.line("{");
        self.depth += 1;
        self.line(&format!("var s_{var}: {ty} = {step};"));
        self.line(&positive);
        self.line(&format!("let e_{var}: {ty} = {end};"));
        if inclusive {
            // `..=` may run to the type's last value: step, and stop at a wrap.
            self.line(&format!("{var} = {start};"));
            self.line(&format!("if ({var} <= e_{var}) {{"));
            self.depth += 1;
            self.line("loop {");
            self.nested(body)?;
            self.depth += 1;
            self.line("continuing {");
            self.depth += 1;
            let sum = format!(
                "{} + {}",
                to_unsigned(elem, &var.to_string()),
                to_unsigned(elem, &format!("s_{var}"))
            );
            let next = normalize(elem, &from_unsigned(elem, &format!("({sum})")));
            self.line(&format!("let n_{var}: {ty} = {next};"));
            self.line(&format!(
                "let go_{var} = n_{var} > {var} && n_{var} <= e_{var};"
            ));
            self.line(&format!("if (go_{var}) {{ {var} = n_{var}; }}"));
            self.line(&format!("break if !go_{var};"));
            self.depth -= 1;
            self.line("}");
            self.depth -= 1;
            self.line("}");
            self.depth -= 1;
            self.line("}");
        } else {
            // `a..b`: the trip count first (at most `b - a`, no overflow), then a counted
            // loop; the counter is rebuilt from the trip each time.
            self.line(&format!("let b_{var}: {ty} = {start};"));
            let (b, e, s) = (
                to_unsigned(elem, &format!("b_{var}")),
                to_unsigned(elem, &format!("e_{var}")),
                to_unsigned(elem, &format!("s_{var}")),
            );
            self.line(&format!(
                "let n_{var}: {unsigned} = select({uzero}, ({e} - {b} - {uone}) / {s} + {uone}, b_{var} < e_{var});"
            ));
            self.line(&format!(
                "for (var t_{var}: {unsigned} = {uzero}; t_{var} < n_{var}; t_{var} = t_{var} + {uone}) {{"
            ));
            self.depth += 1;
            let value = from_unsigned(elem, &format!("({b} + t_{var} * {s})"));
            self.line(&format!("{var} = {value};"));
            self.depth -= 1;
            self.nested(body)?;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Whether array `slot` prints as `array<vec4<T>>` (see `vector`).
    fn vectorized(&self, slot: u32) -> bool {
        slot < 64 && self.vector_lines & (1 << slot) != 0
    }

    fn array(&self, slot: u32) -> Result<ArrayParam, GenerateError> {
        match self.arrays.get(slot as usize) {
            Some(array) => Ok(*array),
            None => fail(format!("array parameter {slot} doesn't exist")),
        }
    }

    /// An operand as a WGSL expression of its register type.
    fn value(&self, value: Value) -> String {
        if self.pinned == Some(value) {
            return "cubert_k".to_string();
        }
        match value {
            Value::Var(id, _) => id.to_string(),
            Value::Const(c) => constant(c),
            Value::Scalar(index, _) => format!("s{index}"),
        }
    }

    /// The expression computing `op`, whose result has type `out`.
    fn operation(&mut self, op: &Operation, out: ElemType) -> Result<String, GenerateError> {
        Ok(match op {
            Operation::Copy(value) => self.value(*value),
            Operation::Unary(unary, value) => {
                arith::unary(*unary, value.elem(), &self.value(*value))?
            }
            Operation::Binary(binary, a, b) => {
                let (x, y) = (self.value(*a), self.value(*b));
                arith::binary(&mut self.helpers, *binary, a.elem(), &x, &y)?
            }
            Operation::Math(math, value) => {
                let x = self.value(*value);
                arith::math(&mut self.helpers, *math, value.elem(), &x)?
            }
            Operation::Fma(a, b, c) => {
                let (x, y, z) = (self.value(*a), self.value(*b), self.value(*c));
                arith::fma(&mut self.helpers, a.elem(), &x, &y, &z)?
            }
            Operation::Cast(value, to) => {
                let x = self.value(*value);
                cast::cast(&mut self.helpers, value.elem(), &x, *to)?
            }
            Operation::Select(cond, a, b) => format!(
                "select({}, {}, {})",
                self.value(*b),
                self.value(*a),
                self.value(*cond)
            ),
            Operation::Builtin(builtin) => self.builtin(*builtin),
            Operation::Load { array, index } => {
                let param = self.array(*array)?;
                let load = memory::load(&mut self.helpers, self.target.checked, *array, &param);
                format!("{load}({})", self.value(*index))
            }
            Operation::LocalLoad { array, index } => {
                let text = self.value(*index);
                match array.ty() {
                    Type::LocalArray(elem, len) => {
                        shared::local_load(&self.value(*array), elem, len, *index, &text)
                    }
                    Type::SharedArray(elem, len) => {
                        let Value::Var(var, _) = array else {
                            return fail("a shared array that isn't a variable");
                        };
                        let atomic = self.atomic_shared.contains(&var.index());
                        let load = shared::shared_load(
                            &mut self.helpers,
                            self.target.checked,
                            *var,
                            elem,
                            len,
                            atomic,
                        );
                        format!("{load}({text})")
                    }
                    _ => return fail("an array load from something that isn't an array"),
                }
            }
            Operation::Length { array } => {
                self.array(*array)?;
                memory::length(*array)
            }
            Operation::TensorMeta { tensor, field, dim } => {
                let header = self.kernel.scalars().count() as u32 + tensor;
                let dim = dim.map(|d| self.value(d)).unwrap_or_else(|| "0u".into());
                let field = match field {
                    TensorField::Rank => 0,
                    TensorField::Shape => 1,
                    TensorField::Stride => 2,
                };
                let meta = tensor::meta(&mut self.helpers, self.arrays.len() as u32);
                format!("{meta}({header}u, {field}u, {dim})")
            }
            Operation::Plane(op, value) => {
                let x = self.value(*value);
                plane::reduce(&mut self.helpers, *op, value.elem(), &x)?
            }
            Operation::PlaneShuffle { value, lane } => {
                let (x, lane_text) = (self.value(*value), self.value(*lane));
                plane::shuffle(&mut self.helpers, value.elem(), &x, &lane_text)
            }
            Operation::Atomic {
                op,
                target,
                index,
                value,
                compare,
            } => {
                let array = match target {
                    AtomicTarget::Global(slot) => {
                        let param = self.array(*slot)?;
                        if !param.mutable {
                            return fail(format!("an atomic on array {slot}, which is read-only"));
                        }
                        if param.elem != value.elem() {
                            return fail(format!(
                                "an atomic of {} on an array of {}",
                                value.elem(),
                                param.elem
                            ));
                        }
                        Array::Global(*slot)
                    }
                    AtomicTarget::Shared(Value::Var(var, Type::SharedArray(_, len))) => {
                        Array::Shared(*var, *len)
                    }
                    AtomicTarget::Shared(_) => {
                        return fail("a shared atomic on something that isn't a shared array");
                    }
                };
                let (index, operand) = (self.value(*index), self.value(*value));
                let compare = compare.map(|c| self.value(c));
                atomic::atomic(
                    &mut self.helpers,
                    self.target.checked,
                    atomic::Call {
                        op: *op,
                        elem: value.elem(),
                        array,
                        index: &index,
                        value: &operand,
                        compare: compare.as_deref(),
                    },
                )?
            }
            other => return fail(format!("unsupported operation {other:?} (to {out})")),
        })
    }

    /// A builtin as a WGSL `u32` expression, linearized as CUDA does: x fastest.
    fn builtin(&self, builtin: Builtin) -> String {
        let (x, y, z) = self.cube_dim;
        let units = x.wrapping_mul(y).wrapping_mul(z);
        const CUBE_POS: &str = "(cubert_cube.x + cubert_cube.y * cubert_cubes.x + cubert_cube.z * cubert_cubes.x * cubert_cubes.y)";
        match builtin {
            Builtin::AbsolutePos => format!("({CUBE_POS} * {units}u + cubert_unit_index)"),
            Builtin::AbsolutePosX => format!("(cubert_cube.x * {x}u + cubert_unit.x)"),
            Builtin::AbsolutePosY => format!("(cubert_cube.y * {y}u + cubert_unit.y)"),
            Builtin::AbsolutePosZ => format!("(cubert_cube.z * {z}u + cubert_unit.z)"),
            Builtin::UnitPos => "cubert_unit_index".into(),
            Builtin::UnitPosX => "cubert_unit.x".into(),
            Builtin::UnitPosY => "cubert_unit.y".into(),
            Builtin::UnitPosZ => "cubert_unit.z".into(),
            Builtin::CubePos => CUBE_POS.into(),
            Builtin::CubePosX => "cubert_cube.x".into(),
            Builtin::CubePosY => "cubert_cube.y".into(),
            Builtin::CubePosZ => "cubert_cube.z".into(),
            Builtin::CubeDim => format!("{units}u"),
            Builtin::CubeDimX => format!("{x}u"),
            Builtin::CubeDimY => format!("{y}u"),
            Builtin::CubeDimZ => format!("{z}u"),
            Builtin::CubeCount => "(cubert_cubes.x * cubert_cubes.y * cubert_cubes.z)".into(),
            Builtin::CubeCountX => "cubert_cubes.x".into(),
            Builtin::CubeCountY => "cubert_cubes.y".into(),
            Builtin::CubeCountZ => "cubert_cubes.z".into(),
            Builtin::PlaneDim => "cubert_plane_dim".into(),
            Builtin::UnitPosPlane => "cubert_lane".into(),
        }
    }
}
