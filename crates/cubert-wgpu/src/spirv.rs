//! Strict SPIR-V: a kernel's WGSL compiled to SPIR-V here, with every float operation
//! marked so that the Vulkan driver may not rewrite it, and handed to wgpu as it is.
//!
//! WGSL gives the driver latitude that the language's float rules forbid: it may contract
//! `a * b + c` into a fused multiply-add, reassociate sums, flush subnormal values to zero
//! and assume that no NaN or infinity occurs. wgpu compiles WGSL to SPIR-V (through naga)
//! with none of the SPIR-V markings that take the latitude away, and WGSL can't express
//! them. So on Vulkan, where wgpu accepts SPIR-V as it is
//! ([`wgpu::Features::PASSTHROUGH_SHADERS`]), the backend does wgpu's step itself:
//!
//! 1. parse and validate the WGSL with naga, for the device's features, as wgpu would;
//! 2. write SPIR-V with naga and the options wgpu's Vulkan backend uses (bounds checks,
//!    loop bounding, zero-initialized shared memory, the device's SPIR-V version);
//! 3. decorate the result of every float addition, subtraction, multiplication, division,
//!    remainder, negation and dot product `NoContraction` (the driver neither fuses nor
//!    reassociates them), and declare, for each float width the device can keep so,
//!    the execution modes `DenormPreserve` and `SignedZeroInfNanPreserve` ([`harden`]).
//!
//! Where the device keeps subnormal values and signed zeros, infinities and NaNs of every
//! float width kernels use, and its `fma` rounds once (every Vulkan driver of a GPU; not
//! Mesa's lavapipe, which computes it as a product and a sum), the backend's float math is
//! strict ([`SpirvTarget::strict_float_math`], `Features::strict_float_math`): a kernel
//! gives the CPU's and CUDA's bits. Elsewhere the markings that the device has still apply.
//! Division, square roots and the transcendental functions never relied on the driver:
//! the generator computes them on the bits (`lang::float`).
//!
//! `[wgpu] kernels` (`CUBERT_WGPU_KERNELS`) tells a driver's doing from the markings':
//! `wgsl` hands wgpu WGSL, as before, and `spirv` hands the driver the same SPIR-V without
//! the markings (what wgpu would have made); `strict_spirv` is the default.

use cubert_runtime::config::WgpuKernels;

/// SPIR-V opcodes and operands this module reads or writes (SPIR-V specification, 3.x).
mod op {
    pub const EXTENSION: u32 = 10;
    pub const MEMORY_MODEL: u32 = 14;
    pub const ENTRY_POINT: u32 = 15;
    pub const EXECUTION_MODE: u32 = 16;
    pub const CAPABILITY: u32 = 17;
    pub const TYPE_FLOAT: u32 = 22;
    pub const TYPE_VECTOR: u32 = 23;
    pub const DECORATE: u32 = 71;
    pub const EXECUTION_MODE_ID: u32 = 331;
    /// Float arithmetic whose result `NoContraction` applies to: `OpFNegate`, `OpFAdd`,
    /// `OpFSub`, `OpFMul`, `OpFDiv`, `OpFRem`, `OpFMod`, `OpVectorTimesScalar`, `OpDot`.
    pub const FLOAT_ARITHMETIC: [u32; 9] = [127, 129, 131, 133, 136, 140, 141, 142, 148];
    pub const NO_CONTRACTION: u32 = 42;
    pub const DENORM_PRESERVE_MODE: u32 = 4459;
    pub const SIGNED_ZERO_INF_NAN_PRESERVE_MODE: u32 = 4461;
    pub const DENORM_PRESERVE_CAPABILITY: u32 = 4464;
    pub const SIGNED_ZERO_INF_NAN_PRESERVE_CAPABILITY: u32 = 4466;
    pub const FLOAT_CONTROLS_EXTENSION: &str = "SPV_KHR_float_controls";
}

/// What a Vulkan device takes as SPIR-V, found once per server ([`SpirvTarget::of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpirvTarget {
    /// The SPIR-V version written (the highest the device's Vulkan version allows, as wgpu
    /// chooses it).
    lang_version: (u8, u8),
    /// The device has `robustBufferAccess2`: out-of-bounds buffer accesses are harmless
    /// without naga's index clamps (wgpu leaves them out there too).
    robust_buffers: bool,
    /// Shared memory is zeroed by the driver (`shaderZeroInitializeWorkgroupMemory`, which
    /// wgpu enables where it exists), not by code naga writes.
    native_zero_init: bool,
    /// Float widths whose subnormal values the device keeps (`DenormPreserve`).
    denorm_widths: Vec<u32>,
    /// Float widths whose signed zeros, infinities and NaNs the device keeps.
    special_widths: Vec<u32>,
    /// Every float width kernels may use has both modes, and `fma` rounds once.
    strict: bool,
    /// The markings are added (false only with `[wgpu] kernels = "spirv"`).
    marked: bool,
    /// The device's wgpu features (naga's validation capabilities come from them).
    features: wgpu::Features,
    downlevel: wgpu::DownlevelFlags,
}

impl SpirvTarget {
    /// The target of `adapter`'s device opened with `features`, for `kernels` (`[wgpu]
    /// kernels`), or `None` where kernels stay WGSL: not Vulkan, no passthrough shaders, or
    /// `kernels = "wgsl"`.
    pub fn of(
        adapter: &wgpu::Adapter,
        features: wgpu::Features,
        kernels: WgpuKernels,
    ) -> Option<Self> {
        if !features.contains(wgpu::Features::PASSTHROUGH_SHADERS) || kernels == WgpuKernels::Wgsl {
            return None;
        }
        Self::of_vulkan(adapter, features, kernels)
    }

    /// [`Self::of`] past its checks, where wgpu has a Vulkan backend (wgpu's own list of
    /// native Vulkan platforms): reads the device's properties through wgpu's hal.
    #[cfg(any(
        windows,
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    ))]
    fn of_vulkan(
        adapter: &wgpu::Adapter,
        features: wgpu::Features,
        kernels: WgpuKernels,
    ) -> Option<Self> {
        use ash::vk;
        // SAFETY: the guard borrows the adapter's Vulkan objects only to read properties
        // and features of its physical device; nothing is created or destroyed, and the
        // guard is dropped before this function returns.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let instance = hal.shared_instance().raw_instance();
        let physical = hal.raw_physical_device();
        let capabilities = hal.physical_device_capabilities();
        let api = capabilities.properties().api_version;
        let float_controls_known = api >= vk::API_VERSION_1_2
            || capabilities.supports_extension(ash::khr::shader_float_controls::NAME);
        let mut controls = vk::PhysicalDeviceFloatControlsProperties::default();
        let mut robustness = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
        let mut zero_init = vk::PhysicalDeviceZeroInitializeWorkgroupMemoryFeatures::default();
        let has_robustness = capabilities.supports_extension(ash::ext::robustness2::NAME);
        let has_zero_init = api >= vk::API_VERSION_1_3
            || capabilities.supports_extension(ash::khr::zero_initialize_workgroup_memory::NAME);
        {
            let mut properties = vk::PhysicalDeviceProperties2::default();
            if float_controls_known {
                properties = properties.push_next(&mut controls);
            }
            // SAFETY: `physical` is a device of `instance` (both from the same adapter) and
            // the chain holds structures this Vulkan version or its extensions define.
            unsafe { instance.get_physical_device_properties2(physical, &mut properties) };
            let mut device_features = vk::PhysicalDeviceFeatures2::default();
            if has_robustness {
                device_features = device_features.push_next(&mut robustness);
            }
            if has_zero_init {
                device_features = device_features.push_next(&mut zero_init);
            }
            // SAFETY: as above.
            unsafe { instance.get_physical_device_features2(physical, &mut device_features) };
        }
        let f64_used = features.contains(wgpu::Features::SHADER_F64);
        let widths: &[u32] = if f64_used { &[32, 64] } else { &[32] };
        let keeps = |width: u32, by32: vk::Bool32, by64: vk::Bool32| {
            float_controls_known && (if width == 32 { by32 } else { by64 }) == vk::TRUE
        };
        let independence = |chosen: Vec<u32>, mode: vk::ShaderFloatControlsIndependence| {
            // Widths set apart from 32 bits must move together where the device says so:
            // only 32 bits may be set alone (`32_BIT_ONLY`), or none (`NONE`). With 16-bit
            // floats unused, 64 bits alone would differ from 16: leave 64 out then.
            match mode {
                vk::ShaderFloatControlsIndependence::ALL => chosen,
                vk::ShaderFloatControlsIndependence::TYPE_32_ONLY => {
                    chosen.into_iter().filter(|&width| width == 32).collect()
                }
                _ => Vec::new(),
            }
        };
        let denorm_widths = independence(
            widths
                .iter()
                .copied()
                .filter(|&width| {
                    keeps(
                        width,
                        controls.shader_denorm_preserve_float32,
                        controls.shader_denorm_preserve_float64,
                    )
                })
                .collect(),
            controls.denorm_behavior_independence,
        );
        let special_widths: Vec<u32> = widths
            .iter()
            .copied()
            .filter(|&width| {
                keeps(
                    width,
                    controls.shader_signed_zero_inf_nan_preserve_float32,
                    controls.shader_signed_zero_inf_nan_preserve_float64,
                )
            })
            .collect();
        let fused_fma = !capabilities.is_driver(vk::DriverId::MESA_LLVMPIPE);
        let marked = kernels == WgpuKernels::StrictSpirv;
        let strict = marked && fused_fma && denorm_widths == widths && special_widths == widths;
        let lang_version = match api {
            v if v >= vk::API_VERSION_1_3 => (1, 6),
            v if v >= vk::API_VERSION_1_2 => (1, 5),
            v if v >= vk::API_VERSION_1_1 => (1, 3),
            _ => (1, 0),
        };
        Some(Self {
            lang_version,
            robust_buffers: has_robustness && robustness.robust_buffer_access2 == vk::TRUE,
            native_zero_init: has_zero_init
                && zero_init.shader_zero_initialize_workgroup_memory == vk::TRUE,
            denorm_widths,
            special_widths,
            strict,
            marked,
            features,
            downlevel: adapter.get_downlevel_capabilities().flags,
        })
    }

    /// Elsewhere (Apple's and WebAssembly's targets) kernels stay WGSL.
    #[cfg(not(any(
        windows,
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd"
    )))]
    fn of_vulkan(
        _adapter: &wgpu::Adapter,
        _features: wgpu::Features,
        _kernels: WgpuKernels,
    ) -> Option<Self> {
        None
    }

    /// The target of wgpu device `index` ([`crate::adapters`]) as its servers use it with
    /// the process's configuration, or `None` where its kernels stay WGSL (see
    /// [`Self::of`]).
    pub fn of_device(index: u32) -> Option<Self> {
        let adapter = crate::adapters().get(index as usize)?;
        Self::of(
            adapter,
            crate::properties::wanted_features(adapter),
            cubert_runtime::config::global_config().wgpu.kernels,
        )
    }

    /// The WGSL target of the same device, whose output [`Self::compile`] takes: the
    /// generator's input is the same either way.
    pub fn wgsl_target(&self, checked: bool) -> crate::lang::WgslTarget {
        crate::properties::wgsl_target(self.features, checked)
    }

    /// The Vulkan environment the SPIR-V is written for (`vulkan1.3` for SPIR-V 1.6, as
    /// `spirv-val --target-env` names it).
    pub fn vulkan_env(&self) -> &'static str {
        match self.lang_version {
            (1, 6) => "vulkan1.3",
            (1, 5) => "vulkan1.2",
            (1, 3) => "vulkan1.1",
            _ => "vulkan1.0",
        }
    }

    /// Whether kernels compiled for this target follow the language's strict float rules
    /// (see the module docs).
    pub fn strict_float_math(&self) -> bool {
        self.strict
    }

    /// What the target marks, in words (`WgpuInfo::kernels`, shown by `cubert info`).
    pub fn describe(&self) -> String {
        if !self.marked {
            return format!(
                "SPIR-V {}.{} without markings ([wgpu] kernels = \"spirv\")",
                self.lang_version.0, self.lang_version.1
            );
        }
        let widths = |widths: &[u32]| {
            if widths.is_empty() {
                "none".to_string()
            } else {
                let names: Vec<String> = widths.iter().map(|width| format!("f{width}")).collect();
                names.join(" ")
            }
        };
        format!(
            "strict SPIR-V {}.{} (NoContraction; subnormals kept: {}; signed zeros, infinities, NaNs kept: {}; {})",
            self.lang_version.0,
            self.lang_version.1,
            widths(&self.denorm_widths),
            widths(&self.special_widths),
            if self.strict {
                "strict float math"
            } else {
                "float math not strict"
            }
        )
    }

    /// The SPIR-V of the WGSL `source`, with its float operations marked (see the module
    /// docs).
    ///
    /// # Errors
    /// naga's message where it refuses the WGSL or can't write it as SPIR-V.
    pub fn compile(&self, source: &str) -> Result<Vec<u32>, String> {
        use naga::back::spv;
        let module =
            naga::front::wgsl::parse_str(source).map_err(|error| error.emit_to_string(source))?;
        let info = wgpu_naga_bridge::create_validator(
            self.features,
            self.downlevel,
            naga::valid::ValidationFlags::all(),
        )
        .validate(&module)
        .map_err(|error| error.emit_to_string(source))?;
        let policy = naga::proc::BoundsCheckPolicy::Restrict;
        let options = spv::Options {
            lang_version: self.lang_version,
            flags: spv::WriterFlags::empty(),
            // Group `g`, binding `b` is descriptor set `g`, binding `b`: wgpu's Vulkan
            // backend numbers a layout's entries in order, and the backend's layouts are
            // bindings 0, 1, 2, ... in order (`pipeline`).
            fake_missing_bindings: true,
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: policy,
                buffer: if self.robust_buffers {
                    naga::proc::BoundsCheckPolicy::Unchecked
                } else {
                    policy
                },
                image_load: policy,
                binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
            },
            zero_initialize_workgroup_memory: if self.native_zero_init {
                spv::ZeroInitializeWorkgroupMemoryMode::Native
            } else {
                spv::ZeroInitializeWorkgroupMemoryMode::Polyfill
            },
            force_loop_bounding: true,
            use_storage_input_output_16: false,
            ..spv::Options::default()
        };
        let words = spv::write_vec(&module, &info, &options, None)
            .map_err(|error| format!("naga can't write the kernel as SPIR-V: {error}"))?;
        if !self.marked {
            return Ok(words);
        }
        harden(
            &words,
            &self.denorm_widths,
            &self.special_widths,
            self.lang_version < (1, 4),
        )
    }
}

/// One instruction of a SPIR-V module: its opcode and its words (the first included).
struct Instruction<'a> {
    opcode: u32,
    words: &'a [u32],
}

/// Splits `words` (a module after its 5-word header) into instructions.
fn instructions(words: &[u32]) -> Result<Vec<Instruction<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = words;
    while let Some(&first) = rest.first() {
        let count = (first >> 16) as usize;
        if count == 0 || count > rest.len() {
            return Err(format!(
                "malformed SPIR-V: an instruction of {count} words with {} left",
                rest.len()
            ));
        }
        let (words, tail) = rest.split_at(count);
        out.push(Instruction {
            opcode: first & 0xffff,
            words,
        });
        rest = tail;
    }
    Ok(out)
}

/// The words of a string literal: UTF-8, NUL-terminated, padded to whole words.
fn string_words(text: &str) -> Vec<u32> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    bytes
        .chunks_exact(4)
        .map(|chunk| u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect()
}

/// Pushes an instruction of `opcode` with `operands`.
fn push(out: &mut Vec<u32>, opcode: u32, operands: &[u32]) {
    out.push(((operands.len() as u32 + 1) << 16) | opcode);
    out.extend_from_slice(operands);
}

/// `module` with every float arithmetic result decorated `NoContraction` and, on each entry
/// point, `DenormPreserve` for `denorm_widths` and `SignedZeroInfNanPreserve` for
/// `special_widths` (with their capabilities, and the `SPV_KHR_float_controls` extension
/// where `extension`: SPIR-V before 1.4). The ids and everything else stay as they were.
///
/// # Errors
/// A module too short for its header or whose instructions overrun it.
pub fn harden(
    module: &[u32],
    denorm_widths: &[u32],
    special_widths: &[u32],
    extension: bool,
) -> Result<Vec<u32>, String> {
    let Some((header, body)) = module.split_at_checked(5) else {
        return Err("malformed SPIR-V: shorter than its header".to_string());
    };
    let all = instructions(body)?;
    // Float scalar and vector types, then the results of float arithmetic.
    let mut float_types = std::collections::HashSet::new();
    for instruction in &all {
        match instruction.opcode {
            op::TYPE_FLOAT => {
                float_types.insert(instruction.words[1]);
            }
            op::TYPE_VECTOR if float_types.contains(&instruction.words[2]) => {
                float_types.insert(instruction.words[1]);
            }
            _ => {}
        }
    }
    let results: Vec<u32> = all
        .iter()
        .filter(|instruction| {
            op::FLOAT_ARITHMETIC.contains(&instruction.opcode)
                && instruction.words.len() > 2
                && float_types.contains(&instruction.words[1])
        })
        .map(|instruction| instruction.words[2])
        .collect();
    let entry_points: Vec<u32> = all
        .iter()
        .filter(|instruction| instruction.opcode == op::ENTRY_POINT && instruction.words.len() > 2)
        .map(|instruction| instruction.words[2])
        .collect();
    let modes = !denorm_widths.is_empty() || !special_widths.is_empty();

    let mut out = header.to_vec();
    let mut capabilities_done = false;
    let mut extension_done = !(modes && extension);
    let mut modes_done = !modes;
    let mut decorations_done = false;
    for (index, instruction) in all.iter().enumerate() {
        let opcode = instruction.opcode;
        // The logical layout (SPIR-V 2.4): capabilities, extensions, imports, memory model,
        // entry points, execution modes, debug, annotations, then types and code. Each new
        // instruction goes at the end of its section.
        if !capabilities_done && opcode != op::CAPABILITY {
            if !denorm_widths.is_empty() {
                push(&mut out, op::CAPABILITY, &[op::DENORM_PRESERVE_CAPABILITY]);
            }
            if !special_widths.is_empty() {
                push(
                    &mut out,
                    op::CAPABILITY,
                    &[op::SIGNED_ZERO_INF_NAN_PRESERVE_CAPABILITY],
                );
            }
            capabilities_done = true;
        }
        if !extension_done && opcode != op::CAPABILITY && opcode != op::EXTENSION {
            push(
                &mut out,
                op::EXTENSION,
                &string_words(op::FLOAT_CONTROLS_EXTENSION),
            );
            extension_done = true;
        }
        let before_modes_end = matches!(
            opcode,
            op::CAPABILITY
                | op::EXTENSION
                | 11 // OpExtInstImport
                | op::MEMORY_MODEL
                | op::ENTRY_POINT
                | op::EXECUTION_MODE
                | op::EXECUTION_MODE_ID
        );
        if !modes_done && !before_modes_end {
            for &entry in &entry_points {
                for &width in denorm_widths {
                    push(
                        &mut out,
                        op::EXECUTION_MODE,
                        &[entry, op::DENORM_PRESERVE_MODE, width],
                    );
                }
                for &width in special_widths {
                    push(
                        &mut out,
                        op::EXECUTION_MODE,
                        &[entry, op::SIGNED_ZERO_INF_NAN_PRESERVE_MODE, width],
                    );
                }
            }
            modes_done = true;
        }
        if !decorations_done && !before_modes_end && !is_debug_or_annotation(opcode) {
            for &result in &results {
                push(&mut out, op::DECORATE, &[result, op::NO_CONTRACTION]);
            }
            decorations_done = true;
        }
        out.extend_from_slice(instruction.words);
        if index + 1 == all.len() && !decorations_done {
            return Err("malformed SPIR-V: a module without types or code".to_string());
        }
    }
    Ok(out)
}

/// Whether `opcode` belongs to the debug or annotation sections (SPIR-V 2.4, 7 and 8).
fn is_debug_or_annotation(opcode: u32) -> bool {
    matches!(
        opcode,
        // OpSourceContinued, OpSource, OpSourceExtension, OpName, OpMemberName, OpString,
        // OpModuleProcessed
        2 | 3 | 4 | 5 | 6 | 7 | 330
        // OpDecorate, OpMemberDecorate, OpDecorationGroup, OpGroupDecorate,
        // OpGroupMemberDecorate, OpDecorateId, OpDecorateString, OpMemberDecorateString
        | 71 | 72 | 73 | 74 | 75 | 332 | 5632 | 5633
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// naga's SPIR-V of `source`, as the backend writes it before [`harden`].
    fn spirv(source: &str) -> Vec<u32> {
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap();
        let options = naga::back::spv::Options {
            lang_version: (1, 3),
            flags: naga::back::spv::WriterFlags::empty(),
            ..naga::back::spv::Options::default()
        };
        naga::back::spv::write_vec(&module, &info, &options, None).unwrap()
    }

    const KERNEL: &str = r"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<storage, read_write> ints: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let a = data[id.x];
    let v = vec2<f32>(a, a * 2.0);
    data[id.x] = (a * a + 1.0) - a / 3.0 + dot(v, v) - (-a);
    ints[id.x] = ints[id.x] * 3u + 1u;
}";

    /// An instruction as (opcode, operands).
    type Decoded = (u32, Vec<u32>);

    /// The (opcode, operands) of each instruction of `module` after its header.
    fn decoded(module: &[u32]) -> Vec<Decoded> {
        instructions(&module[5..])
            .unwrap()
            .into_iter()
            .map(|instruction| (instruction.opcode, instruction.words[1..].to_vec()))
            .collect()
    }

    #[test]
    fn every_float_operation_result_is_decorated_no_contraction_and_nothing_else() {
        let before = spirv(KERNEL);
        let after = harden(&before, &[], &[], false).unwrap();
        let instructions = decoded(&after);
        let decorated: Vec<u32> = instructions
            .iter()
            .filter(|(opcode, operands)| {
                *opcode == op::DECORATE && operands.get(1) == Some(&op::NO_CONTRACTION)
            })
            .map(|(_, operands)| operands[0])
            .collect();
        let float_ops: Vec<u32> = instructions
            .iter()
            .filter(|(opcode, _)| op::FLOAT_ARITHMETIC.contains(opcode))
            .map(|(_, operands)| operands[1])
            .collect();
        // a*a, +1, a/3, -, dot, -a, -, and a*2: every one of them, the integer ones not.
        assert!(float_ops.len() >= 7, "{float_ops:?}");
        assert_eq!(decorated, float_ops);
        let integer_ops = instructions
            .iter()
            .filter(|(opcode, _)| *opcode == 132)
            .count();
        assert_eq!(integer_ops, 1, "OpIMul stays undecorated");
        // Nothing else changed: the hardened module less its decorations is the original.
        let stripped: Vec<(u32, Vec<u32>)> = instructions
            .into_iter()
            .filter(|(opcode, operands)| {
                !(*opcode == op::DECORATE && operands.get(1) == Some(&op::NO_CONTRACTION))
            })
            .collect();
        assert_eq!(stripped, decoded(&before));
        assert_eq!(after[..5], before[..5], "the header, id bound included");
    }

    #[test]
    fn float_controls_are_declared_in_their_sections() {
        let before = spirv(KERNEL);
        let after = harden(&before, &[32, 64], &[32], true).unwrap();
        let instructions = decoded(&after);
        let position =
            |wanted: &dyn Fn(&Decoded) -> bool| instructions.iter().position(wanted).unwrap();
        let entry = instructions
            .iter()
            .find(|(opcode, _)| *opcode == op::ENTRY_POINT)
            .map(|(_, operands)| operands[1])
            .unwrap();
        let denorm = |width: u32| {
            position(&|(opcode, operands)| {
                *opcode == op::EXECUTION_MODE
                    && operands == &vec![entry, op::DENORM_PRESERVE_MODE, width]
            })
        };
        let special = position(&|(opcode, operands)| {
            *opcode == op::EXECUTION_MODE
                && operands == &vec![entry, op::SIGNED_ZERO_INF_NAN_PRESERVE_MODE, 32]
        });
        let last_capability = instructions
            .iter()
            .rposition(|(opcode, _)| *opcode == op::CAPABILITY)
            .unwrap();
        let extension = position(&|(opcode, operands)| {
            *opcode == op::EXTENSION && operands == &string_words("SPV_KHR_float_controls")
        });
        let entry_point = position(&|(opcode, _)| *opcode == op::ENTRY_POINT);
        let first_decoration = position(&|(opcode, _)| *opcode == op::DECORATE);
        assert!(
            instructions[..=last_capability]
                .iter()
                .all(|(opcode, _)| *opcode == op::CAPABILITY)
        );
        for capability in [
            op::DENORM_PRESERVE_CAPABILITY,
            op::SIGNED_ZERO_INF_NAN_PRESERVE_CAPABILITY,
        ] {
            assert!(instructions[..=last_capability].contains(&(op::CAPABILITY, vec![capability])));
        }
        assert!(last_capability < extension && extension < entry_point);
        assert!(entry_point < denorm(32) && denorm(32) < denorm(64) && denorm(64) < special);
        assert!(special < first_decoration);
        // Without modes, neither capabilities nor the extension are added.
        let plain = decoded(&harden(&before, &[], &[], true).unwrap());
        assert!(!plain.iter().any(|(opcode, _)| {
            *opcode == op::EXTENSION
                && plain
                    .iter()
                    .any(|(_, operands)| operands == &string_words("SPV_KHR_float_controls"))
        }));
        assert_eq!(
            plain
                .iter()
                .filter(|(opcode, _)| *opcode == op::CAPABILITY)
                .count(),
            decoded(&before)
                .iter()
                .filter(|(opcode, _)| *opcode == op::CAPABILITY)
                .count()
        );
    }

    #[test]
    fn malformed_modules_are_refused_not_read_past_their_end() {
        let module = spirv(KERNEL);
        assert!(harden(&module[..3], &[], &[], false).is_err());
        let mut overrun = module[..6].to_vec();
        overrun[5] |= 0xff00_0000;
        assert!(harden(&overrun, &[], &[], false).is_err());
        let mut zero = module.clone();
        zero[5] &= 0xffff;
        assert!(harden(&zero, &[], &[], false).is_err());
    }

    #[test]
    fn string_literals_are_nul_terminated_and_padded() {
        assert_eq!(string_words("abc"), vec![u32::from_le_bytes(*b"abc\0")]);
        assert_eq!(string_words("abcd"), vec![u32::from_le_bytes(*b"abcd"), 0]);
    }
}
