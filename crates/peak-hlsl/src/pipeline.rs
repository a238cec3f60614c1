//! One compute pipeline per (module, entry point), and the rules that tie a launch's
//! arguments to the shader's interface.
//!
//! Buffers: binding `N` of descriptor set 0 receives the launch's `N`-th buffer argument
//! (0-based, counting buffer arguments only). glslang maps `register(tN)` and
//! `register(uN)` both to binding `N` (and a buffer with no register to binding 0), so t
//! and u registers share one numbering; two resources on one binding are rejected here,
//! naming both. Scalars: the members of the `[[vk::push_constant]]` block, in order,
//! receive the launch's scalar arguments, in order, at the offsets the compiler chose.

use std::ffi::CString;
use std::sync::Arc;

use ash::vk;
use peak_backend::{BackendError, KernelArg};

use crate::compiler::CompiledEntry;
use crate::gpu::{Gpu, check};
use crate::reflect::{Binding, DescriptorKind, Reflection, Scalar, reflect};

/// The binding rule, quoted in every error about bindings.
pub const BINDING_RULE: &str = "binding N receives the launch's N-th buffer argument (0-based, buffers only); write `register(uN)` or `register(tN)` with N that position: t and u registers share one numbering, e.g. `StructuredBuffer<float> A : register(t0); StructuredBuffer<float> B : register(t1); RWStructuredBuffer<float> C : register(u2);`";

/// The declaration scalars need, quoted in errors about push constants.
pub const PUSH_RULE: &str = "scalars travel as push constants: declare `struct Params { int n; ... }; [[vk::push_constant]] ConstantBuffer<Params> p;` with one member per scalar argument, in launch order (glslang ignores [[vk::push_constant]] on a plain `Params p;` and puts it in a uniform buffer)";

/// Check that the module's resources follow the binding convention: storage buffers
/// only, all in set 0, one resource per binding.
pub fn check_interface(r: &Reflection) -> Result<(), String> {
    for b in &r.bindings {
        let problem = match b.kind {
            DescriptorKind::StorageBuffer => None,
            DescriptorKind::UniformBuffer if b.name == "$Global" => Some(format!(
                "a global variable outside any buffer landed in glslang's `$Global` uniform block; {PUSH_RULE}; global constants must be `static const`"
            )),
            DescriptorKind::UniformBuffer => Some(format!("`{}` is a uniform buffer (cbuffer); {PUSH_RULE}", b.name)),
            DescriptorKind::TexelBuffer => Some(format!("`{}` is a typed Buffer/RWBuffer; use StructuredBuffer<T> or RWStructuredBuffer<T>", b.name)),
            DescriptorKind::Image | DescriptorKind::Sampler => {
                Some(format!("`{}` is a texture or sampler; peak binds storage buffers only (StructuredBuffer, RWStructuredBuffer, ByteAddressBuffer)", b.name))
            }
        };
        if let Some(p) = problem {
            return Err(p);
        }
        if b.set != 0 {
            return Err(format!("`{}` is in descriptor set {} (register space{}); use space0, the default", b.name, b.set, b.set));
        }
    }
    for pair in r.bindings.windows(2) {
        if pair[0].binding == pair[1].binding {
            return Err(format!("`{}` and `{}` both have binding {}: {BINDING_RULE}", pair[0].name, pair[1].name, pair[0].binding));
        }
    }
    Ok(())
}

/// Lay the scalar arguments out as the push-constant block expects them.
pub fn pack_push(r: &Reflection, scalars: &[&KernelArg]) -> Result<Vec<u8>, String> {
    let Some(push) = &r.push else {
        // No block, or one the compiler removed because the shader never reads it: the
        // scalars have nowhere to go and nothing reads them.
        return Ok(Vec::new());
    };
    if push.members.len() != scalars.len() {
        let members = push.members.iter().map(|m| format!("{} {}", m.ty.describe(), m.name)).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "the push-constant block has {} member(s) ({members}) but the launch passes {} scalar argument(s); {PUSH_RULE}",
            push.members.len(),
            scalars.len()
        ));
    }
    let mut bytes = vec![0u8; push.size as usize];
    for (i, (member, arg)) in push.members.iter().zip(scalars).enumerate() {
        let value: Vec<u8> = match (member.ty, arg) {
            (Scalar::Int { width: 32, .. }, KernelArg::I32(v)) => v.to_le_bytes().to_vec(),
            (Scalar::Int { width: 32, .. }, KernelArg::U32(v)) => v.to_le_bytes().to_vec(),
            (Scalar::Int { width: 64, .. }, KernelArg::I64(v)) => v.to_le_bytes().to_vec(),
            (Scalar::Int { width: 64, .. }, KernelArg::I32(v)) => i64::from(*v).to_le_bytes().to_vec(),
            (Scalar::Int { width: 64, .. }, KernelArg::U32(v)) => u64::from(*v).to_le_bytes().to_vec(),
            (Scalar::Float { width: 32 }, KernelArg::F32(v)) => v.to_le_bytes().to_vec(),
            (ty, arg) => {
                let hint = match (ty, arg) {
                    (Scalar::Float { .. }, KernelArg::I32(_) | KernelArg::U32(_) | KernelArg::I64(_)) => "; pass f32(x) for a float member",
                    (Scalar::Int { .. }, KernelArg::F32(_)) => "; pass i32(x) or u32(x) for an integer member",
                    (Scalar::Int { width: 32, .. }, KernelArg::I64(_)) => "; the member is 32-bit, pass i32(x)",
                    _ => "",
                };
                return Err(format!("scalar argument {i} ({}) does not fit push-constant member `{}` ({}){hint}", arg_name(arg), member.name, ty.describe()));
            }
        };
        let at = member.offset as usize;
        bytes.get_mut(at..at + value.len()).ok_or_else(|| format!("push-constant member `{}` lies outside the block", member.name))?.copy_from_slice(&value);
    }
    Ok(bytes)
}

fn arg_name(arg: &KernelArg) -> &'static str {
    match arg {
        KernelArg::Buffer(_) => "buffer",
        KernelArg::I32(_) => "i32",
        KernelArg::U32(_) => "u32",
        KernelArg::I64(_) => "i64",
        KernelArg::F32(_) => "f32",
        KernelArg::Bytes(_) => "bytes",
    }
}

/// A compute pipeline for one entry point, with its layout.
pub(crate) struct EntryPipeline {
    gpu: Arc<Gpu>,
    pub reflection: Reflection,
    shader: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    pub layout: vk::PipelineLayout,
    pub pipeline: vk::Pipeline,
}

impl EntryPipeline {
    /// Reflect, check against the binding convention and the device's limits, and build
    /// the pipeline.
    pub fn new(gpu: &Arc<Gpu>, compiled: &CompiledEntry) -> Result<EntryPipeline, BackendError> {
        let options = &compiled.options;
        let compile_error =
            |message: String| BackendError::Compile { log: format!("{}\n{message}", compiled.log).trim_start().to_string(), options: options.clone() };
        let reflection = reflect(&compiled.spirv).map_err(|m| compile_error(format!("peak cannot read the SPIR-V of `{}`: {m}", compiled.name)))?;
        check_interface(&reflection).map_err(|m| compile_error(format!("`{}`: {m}", compiled.name)))?;
        let device_name = gpu.name();
        for f in &reflection.features {
            if !gpu.features.enabled.contains(f) {
                return Err(BackendError::Unsupported(format!(
                    "`{}` needs the Vulkan feature {} (for f16 kernels: shaderFloat16 and storageBuffer16BitAccess), which {device_name} does not have",
                    compiled.name,
                    f.vulkan_name()
                )));
            }
        }
        let limits = &gpu.limits;
        if let Some(size) = reflection.local_size {
            let threads: u64 = size.iter().map(|&s| u64::from(s)).product();
            if threads > u64::from(limits.max_compute_work_group_invocations) {
                return Err(BackendError::InvalidConfig(format!(
                    "[numthreads({}, {}, {})] of `{}` is {threads} threads, over the device's {}",
                    size[0], size[1], size[2], compiled.name, limits.max_compute_work_group_invocations
                )));
            }
            for (dim, (s, max)) in size.iter().zip(limits.max_compute_work_group_size).enumerate() {
                if *s > max {
                    return Err(BackendError::InvalidConfig(format!("numthreads dimension {dim} of `{}` is {s}, over the device's {max}", compiled.name)));
                }
            }
        }
        if let Some(bytes) = reflection.workgroup_bytes
            && bytes > u64::from(limits.max_compute_shared_memory_size)
        {
            return Err(BackendError::InvalidConfig(format!(
                "`{}` declares {bytes} bytes of groupshared memory, the device has {}",
                compiled.name, limits.max_compute_shared_memory_size
            )));
        }
        let push_size = reflection.push.as_ref().map_or(0, |p| p.size);
        if push_size > limits.max_push_constants_size {
            return Err(compile_error(format!(
                "the push-constant block of `{}` is {push_size} bytes; the device allows {}",
                compiled.name, limits.max_push_constants_size
            )));
        }

        let d = &gpu.device;
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = reflection
            .bindings
            .iter()
            .map(|b: &Binding| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b.binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let entry_name = CString::new(reflection.entry_point.clone()).map_err(|_| compile_error("entry point name contains a nul byte".into()))?;
        let mut built = EntryPipeline {
            gpu: gpu.clone(),
            reflection,
            shader: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        // Each object is stored as soon as it exists, so Drop cleans up after a failure.
        // SAFETY: all create infos point at data that lives until the calls return.
        unsafe {
            built.shader =
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&compiled.spirv), None).map_err(check("creating the shader module"))?;
            built.set_layout = d
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .map_err(check("creating the descriptor set layout"))?;
            let ranges = [vk::PushConstantRange { stage_flags: vk::ShaderStageFlags::COMPUTE, offset: 0, size: push_size }];
            let set_layouts = [built.set_layout];
            let layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(if push_size > 0 { &ranges } else { &[] });
            built.layout = d.create_pipeline_layout(&layout_info, None).map_err(check("creating the pipeline layout"))?;
            let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(built.shader).name(&entry_name);
            let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(built.layout);
            built.pipeline = d
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
                .map_err(|(_, e)| compile_error(format!("the Vulkan driver could not build a pipeline for `{}`: {e}", compiled.name)))?[0];
        }
        Ok(built)
    }

    pub fn set_layout(&self) -> vk::DescriptorSetLayout {
        self.set_layout
    }

    pub fn name(&self) -> &str {
        &self.reflection.entry_point
    }

    /// Whether the pipeline was built on this device (a module must not cross backends).
    pub fn built_on(&self, gpu: &Arc<Gpu>) -> bool {
        Arc::ptr_eq(&self.gpu, gpu)
    }
}

impl Drop for EntryPipeline {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone, so no pending batch uses these objects;
        // destroying a null handle is a no-op.
        unsafe {
            let d = &self.gpu.device;
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.shader, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reflect::{Member, PushBlock};

    fn reflection(bindings: Vec<Binding>, push: Option<PushBlock>) -> Reflection {
        Reflection { entry_point: "main".into(), local_size: Some([64, 1, 1]), bindings, push, workgroup_bytes: Some(0), features: vec![] }
    }

    fn buffer(binding: u32, name: &str) -> Binding {
        Binding { set: 0, binding, name: name.into(), kind: DescriptorKind::StorageBuffer }
    }

    #[test]
    fn colliding_registers_are_named() {
        let err = check_interface(&reflection(vec![buffer(0, "A"), buffer(0, "C"), buffer(1, "B")], None)).unwrap_err();
        assert!(err.contains("`A` and `C` both have binding 0"), "{err}");
        assert!(err.contains("share one numbering"), "{err}");
        assert!(check_interface(&reflection(vec![buffer(0, "A"), buffer(1, "B"), buffer(2, "C")], None)).is_ok());
    }

    #[test]
    fn uniform_blocks_point_at_push_constants() {
        let global = Binding { set: 0, binding: 0, name: "$Global".into(), kind: DescriptorKind::UniformBuffer };
        let err = check_interface(&reflection(vec![global], None)).unwrap_err();
        assert!(err.contains("[[vk::push_constant]] ConstantBuffer<Params>"), "{err}");
        assert!(err.contains("static const"), "{err}");
        let mut spaced = buffer(0, "A");
        spaced.set = 1;
        assert!(check_interface(&reflection(vec![spaced], None)).unwrap_err().contains("space1"));
    }

    fn block() -> PushBlock {
        PushBlock {
            members: vec![
                Member { name: "n".into(), offset: 0, ty: Scalar::Int { width: 32, signed: true } },
                Member { name: "x".into(), offset: 4, ty: Scalar::Float { width: 32 } },
                Member { name: "big".into(), offset: 8, ty: Scalar::Int { width: 64, signed: true } },
            ],
            size: 16,
        }
    }

    #[test]
    fn scalars_land_at_member_offsets() {
        let r = reflection(vec![], Some(block()));
        let bytes = pack_push(&r, &[&KernelArg::I32(7), &KernelArg::F32(1.5), &KernelArg::I64(-2)]).unwrap();
        assert_eq!(bytes.len(), 16);
        assert_eq!(i32::from_le_bytes(bytes[0..4].try_into().unwrap()), 7);
        assert_eq!(f32::from_le_bytes(bytes[4..8].try_into().unwrap()), 1.5);
        assert_eq!(i64::from_le_bytes(bytes[8..16].try_into().unwrap()), -2);
    }

    #[test]
    fn scalar_mismatches_say_what_to_pass() {
        let r = reflection(vec![], Some(block()));
        let err = pack_push(&r, &[&KernelArg::I32(7)]).unwrap_err();
        assert!(err.contains("3 member(s) (int32 n, float32 x, int64 big)") && err.contains("passes 1"), "{err}");
        let err = pack_push(&r, &[&KernelArg::I32(7), &KernelArg::I32(1), &KernelArg::I64(0)]).unwrap_err();
        assert!(err.contains("member `x`") && err.contains("f32(x)"), "{err}");
        assert_eq!(pack_push(&reflection(vec![], None), &[&KernelArg::I32(1)]).unwrap(), Vec::<u8>::new());
    }
}
