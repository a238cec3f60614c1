//! Just enough SPIR-V reflection to bind a compute shader: its entry point and workgroup
//! size, its descriptor bindings, the layout of its push-constant block, its groupshared
//! bytes and the capabilities it needs.
//!
//! SPIR-V is a flat stream of instructions (word count and opcode in the first word), so
//! one pass over the module collects names, decorations, types and variables; a second
//! step puts them together. Anything this module does not recognise is reported as such
//! rather than guessed.

use std::collections::HashMap;

const MAGIC: u32 = 0x0723_0203;

mod op {
    pub const NAME: u32 = 5;
    pub const MEMBER_NAME: u32 = 6;
    pub const ENTRY_POINT: u32 = 15;
    pub const EXECUTION_MODE: u32 = 16;
    pub const CAPABILITY: u32 = 17;
    pub const TYPE_INT: u32 = 21;
    pub const TYPE_FLOAT: u32 = 22;
    pub const TYPE_VECTOR: u32 = 23;
    pub const TYPE_MATRIX: u32 = 24;
    pub const TYPE_IMAGE: u32 = 25;
    pub const TYPE_SAMPLER: u32 = 26;
    pub const TYPE_SAMPLED_IMAGE: u32 = 27;
    pub const TYPE_ARRAY: u32 = 28;
    pub const TYPE_RUNTIME_ARRAY: u32 = 29;
    pub const TYPE_STRUCT: u32 = 30;
    pub const TYPE_POINTER: u32 = 32;
    pub const CONSTANT: u32 = 43;
    pub const VARIABLE: u32 = 59;
    pub const DECORATE: u32 = 71;
    pub const MEMBER_DECORATE: u32 = 72;
    pub const EXECUTION_MODE_ID: u32 = 331;
}

mod decoration {
    pub const BLOCK: u32 = 2;
    pub const BUFFER_BLOCK: u32 = 3;
    pub const BINDING: u32 = 33;
    pub const DESCRIPTOR_SET: u32 = 34;
    pub const OFFSET: u32 = 35;
}

mod storage {
    pub const UNIFORM_CONSTANT: u32 = 0;
    pub const UNIFORM: u32 = 2;
    pub const WORKGROUP: u32 = 4;
    pub const PUSH_CONSTANT: u32 = 9;
    pub const STORAGE_BUFFER: u32 = 12;
}

const EXECUTION_MODEL_GLCOMPUTE: u32 = 5;
const MODE_LOCAL_SIZE: u32 = 17;
const MODE_LOCAL_SIZE_ID: u32 = 38;
const IMAGE_DIM_BUFFER: u32 = 5;

/// What kind of descriptor a resource needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptorKind {
    StorageBuffer,
    UniformBuffer,
    TexelBuffer,
    Image,
    Sampler,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub set: u32,
    pub binding: u32,
    /// The resource's name in the source (`$Global` for glslang's default uniform block).
    pub name: String,
    pub kind: DescriptorKind,
}

/// The type of one push-constant member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Int {
        width: u32,
        signed: bool,
    },
    Float {
        width: u32,
    },
    /// A vector, matrix, array or struct member: scalars from the launch cannot fill it.
    Aggregate,
}

impl Scalar {
    pub fn describe(self) -> String {
        match self {
            Scalar::Int { width, signed: true } => format!("int{width}"),
            Scalar::Int { width, signed: false } => format!("uint{width}"),
            Scalar::Float { width } => format!("float{width}"),
            Scalar::Aggregate => "aggregate".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub offset: u32,
    pub ty: Scalar,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushBlock {
    pub members: Vec<Member>,
    /// Bytes from 0 to the end of the last member, rounded up to 4 as Vulkan requires.
    pub size: u32,
}

/// Capabilities a module may declare that need a device feature to be enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    Float16,
    Float64,
    Int64,
    Int16,
    Int8,
    StorageBuffer16Bit,
    PushConstant16Bit,
    StorageBuffer8Bit,
}

impl Feature {
    fn from_capability(cap: u32) -> Option<Feature> {
        Some(match cap {
            9 => Feature::Float16,
            10 => Feature::Float64,
            11 => Feature::Int64,
            22 => Feature::Int16,
            39 => Feature::Int8,
            4433 | 4434 => Feature::StorageBuffer16Bit,
            4435 => Feature::PushConstant16Bit,
            4448 | 4449 => Feature::StorageBuffer8Bit,
            _ => return None,
        })
    }

    /// The Vulkan feature name, for error messages.
    pub fn vulkan_name(self) -> &'static str {
        match self {
            Feature::Float16 => "shaderFloat16",
            Feature::Float64 => "shaderFloat64",
            Feature::Int64 => "shaderInt64",
            Feature::Int16 => "shaderInt16",
            Feature::Int8 => "shaderInt8",
            Feature::StorageBuffer16Bit => "storageBuffer16BitAccess",
            Feature::PushConstant16Bit => "storagePushConstant16",
            Feature::StorageBuffer8Bit => "storageBuffer8BitAccess",
        }
    }
}

/// What a compiled compute shader needs from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflection {
    pub entry_point: String,
    /// `[numthreads(x, y, z)]`, when it is a literal (always, for glslang and DXC output).
    pub local_size: Option<[u32; 3]>,
    /// Every descriptor the module declares, sorted by (set, binding).
    pub bindings: Vec<Binding>,
    pub push: Option<PushBlock>,
    /// Bytes of groupshared memory, when every groupshared type has a known size.
    pub workgroup_bytes: Option<u64>,
    pub features: Vec<Feature>,
}

#[derive(Debug, Clone)]
enum Type {
    Int { width: u32, signed: bool },
    Float { width: u32 },
    Vector { component: u32, count: u32 },
    Matrix { column: u32, count: u32 },
    Image { dim: u32 },
    Sampler,
    SampledImage,
    Array { element: u32, length: u32 },
    RuntimeArray,
    Struct { members: Vec<u32> },
    Pointer { ty: u32 },
}

#[derive(Default)]
struct Module {
    names: HashMap<u32, String>,
    member_names: HashMap<(u32, u32), String>,
    entry_points: Vec<(u32, u32, String)>,
    local_sizes: HashMap<u32, [u32; 3]>,
    local_size_ids: HashMap<u32, [u32; 3]>,
    capabilities: Vec<u32>,
    types: HashMap<u32, Type>,
    constants: HashMap<u32, u32>,
    /// (result id, pointer type, storage class)
    variables: Vec<(u32, u32, u32)>,
    decorations: HashMap<(u32, u32), Vec<u32>>,
    member_offsets: HashMap<(u32, u32), u32>,
}

/// Read a SPIR-V module with one compute entry point.
pub fn reflect(words: &[u32]) -> Result<Reflection, String> {
    if words.len() < 5 || words[0] != MAGIC {
        return Err("not a SPIR-V module (bad magic number)".into());
    }
    let mut m = Module::default();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return Err(format!("truncated SPIR-V instruction at word {at}"));
        }
        m.record(opcode, &words[at + 1..at + count]);
        at += count;
    }
    m.finish()
}

/// A literal string operand: UTF-8, nul-terminated, packed little-endian into words.
fn string(operands: &[u32]) -> String {
    let bytes: Vec<u8> = operands.iter().flat_map(|w| w.to_le_bytes()).take_while(|b| *b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Module {
    fn record(&mut self, opcode: u32, o: &[u32]) {
        let get = |i: usize| o.get(i).copied().unwrap_or(0);
        match opcode {
            op::NAME if !o.is_empty() => {
                self.names.insert(o[0], string(&o[1..]));
            }
            op::MEMBER_NAME if o.len() > 2 => {
                self.member_names.insert((o[0], o[1]), string(&o[2..]));
            }
            op::ENTRY_POINT if o.len() > 2 => {
                self.entry_points.push((o[0], o[1], string(&o[2..])));
            }
            op::EXECUTION_MODE if o.len() >= 5 && o[1] == MODE_LOCAL_SIZE => {
                self.local_sizes.insert(o[0], [o[2], o[3], o[4]]);
            }
            op::EXECUTION_MODE_ID if o.len() >= 5 && o[1] == MODE_LOCAL_SIZE_ID => {
                self.local_size_ids.insert(o[0], [o[2], o[3], o[4]]);
            }
            op::CAPABILITY if !o.is_empty() => self.capabilities.push(o[0]),
            op::TYPE_INT => {
                self.types.insert(get(0), Type::Int { width: get(1), signed: get(2) == 1 });
            }
            op::TYPE_FLOAT => {
                self.types.insert(get(0), Type::Float { width: get(1) });
            }
            op::TYPE_VECTOR => {
                self.types.insert(get(0), Type::Vector { component: get(1), count: get(2) });
            }
            op::TYPE_MATRIX => {
                self.types.insert(get(0), Type::Matrix { column: get(1), count: get(2) });
            }
            op::TYPE_IMAGE => {
                self.types.insert(get(0), Type::Image { dim: get(2) });
            }
            op::TYPE_SAMPLER => {
                self.types.insert(get(0), Type::Sampler);
            }
            op::TYPE_SAMPLED_IMAGE => {
                self.types.insert(get(0), Type::SampledImage);
            }
            op::TYPE_ARRAY => {
                self.types.insert(get(0), Type::Array { element: get(1), length: get(2) });
            }
            op::TYPE_RUNTIME_ARRAY => {
                self.types.insert(get(0), Type::RuntimeArray);
            }
            op::TYPE_STRUCT if !o.is_empty() => {
                self.types.insert(o[0], Type::Struct { members: o[1..].to_vec() });
            }
            op::TYPE_POINTER => {
                self.types.insert(get(0), Type::Pointer { ty: get(2) });
            }
            // Only 32-bit constants matter here (array lengths, workgroup sizes).
            op::CONSTANT if o.len() >= 3 => {
                self.constants.insert(o[1], o[2]);
            }
            op::VARIABLE if o.len() >= 3 => self.variables.push((o[1], o[0], o[2])),
            op::DECORATE if o.len() >= 2 => {
                self.decorations.insert((o[0], o[1]), o[2..].to_vec());
            }
            op::MEMBER_DECORATE if o.len() >= 4 && o[2] == decoration::OFFSET => {
                self.member_offsets.insert((o[0], o[1]), o[3]);
            }
            _ => {}
        }
    }

    fn decorated(&self, id: u32, decoration: u32) -> Option<&[u32]> {
        self.decorations.get(&(id, decoration)).map(Vec::as_slice)
    }

    fn pointee(&self, pointer_type: u32) -> Option<u32> {
        match self.types.get(&pointer_type) {
            Some(Type::Pointer { ty }) => Some(*ty),
            _ => None,
        }
    }

    /// Bytes of a type laid out tightly; None for opaque or runtime-sized types.
    fn size_of(&self, id: u32) -> Option<u64> {
        Some(match self.types.get(&id)? {
            Type::Int { width, .. } | Type::Float { width } => u64::from(*width / 8),
            Type::Vector { component, count } => self.size_of(*component)? * u64::from(*count),
            Type::Matrix { column, count } => self.size_of(*column)? * u64::from(*count),
            Type::Array { element, length } => self.size_of(*element)? * u64::from(*self.constants.get(length)?),
            Type::Struct { members } => members.iter().map(|m| self.size_of(*m)).sum::<Option<u64>>()?,
            _ => return None,
        })
    }

    fn scalar(&self, id: u32) -> Scalar {
        match self.types.get(&id) {
            Some(Type::Int { width, signed }) => Scalar::Int { width: *width, signed: *signed },
            Some(Type::Float { width }) => Scalar::Float { width: *width },
            _ => Scalar::Aggregate,
        }
    }

    fn name(&self, variable: u32, ty: u32) -> String {
        match self.names.get(&variable).filter(|n| !n.is_empty()) {
            Some(n) => n.clone(),
            None => self.names.get(&ty).cloned().unwrap_or_else(|| format!("%{variable}")),
        }
    }

    fn finish(self) -> Result<Reflection, String> {
        let compute: Vec<_> = self.entry_points.iter().filter(|(model, ..)| *model == EXECUTION_MODEL_GLCOMPUTE).collect();
        let (_, function, entry_point) = match compute.as_slice() {
            [one] => (*one).clone(),
            [] => return Err("the module has no compute entry point".into()),
            more => return Err(format!("the module has {} compute entry points; expected one", more.len())),
        };
        let local_size = self.local_sizes.get(&function).copied().or_else(|| {
            let ids = self.local_size_ids.get(&function)?;
            Some([self.constants.get(&ids[0]).copied()?, self.constants.get(&ids[1]).copied()?, self.constants.get(&ids[2]).copied()?])
        });

        let mut bindings = Vec::new();
        let mut push = None;
        let mut workgroup_bytes = Some(0u64);
        for &(id, pointer_type, class) in &self.variables {
            let Some(ty) = self.pointee(pointer_type) else { continue };
            match class {
                storage::WORKGROUP => {
                    workgroup_bytes = workgroup_bytes.zip(self.size_of(ty)).map(|(a, b)| a + b);
                }
                storage::PUSH_CONSTANT => {
                    let Some(Type::Struct { members: member_types }) = self.types.get(&ty) else {
                        return Err("the push-constant variable is not a struct".into());
                    };
                    let mut members = Vec::with_capacity(member_types.len());
                    let mut end = 0u64;
                    for (i, &member_type) in member_types.iter().enumerate() {
                        let key = (ty, i as u32);
                        let offset = self.member_offsets.get(&key).copied().unwrap_or(0);
                        let bytes = self.size_of(member_type).ok_or_else(|| format!("push-constant member {i} has a type of unknown size"))?;
                        end = end.max(u64::from(offset) + bytes);
                        let name = self.member_names.get(&key).cloned().unwrap_or_else(|| format!("member {i}"));
                        members.push(Member { name, offset, ty: self.scalar(member_type) });
                    }
                    let size = u32::try_from(end.div_ceil(4) * 4).map_err(|_| "push-constant block too large".to_string())?;
                    push = Some(PushBlock { members, size });
                }
                storage::UNIFORM | storage::STORAGE_BUFFER | storage::UNIFORM_CONSTANT => {
                    let (Some(set), Some(binding)) = (self.decorated(id, decoration::DESCRIPTOR_SET), self.decorated(id, decoration::BINDING)) else {
                        continue;
                    };
                    let kind = match (class, self.types.get(&ty)) {
                        (storage::STORAGE_BUFFER, _) => DescriptorKind::StorageBuffer,
                        (storage::UNIFORM, _) if self.decorated(ty, decoration::BUFFER_BLOCK).is_some() => DescriptorKind::StorageBuffer,
                        (storage::UNIFORM, _) if self.decorated(ty, decoration::BLOCK).is_some() => DescriptorKind::UniformBuffer,
                        (_, Some(Type::Image { dim })) if *dim == IMAGE_DIM_BUFFER => DescriptorKind::TexelBuffer,
                        (_, Some(Type::Image { .. } | Type::SampledImage)) => DescriptorKind::Image,
                        (_, Some(Type::Sampler)) => DescriptorKind::Sampler,
                        _ => continue,
                    };
                    bindings.push(Binding {
                        set: set.first().copied().unwrap_or(0),
                        binding: binding.first().copied().unwrap_or(0),
                        name: self.name(id, ty),
                        kind,
                    });
                }
                _ => {}
            }
        }
        bindings.sort_by(|a, b| (a.set, a.binding, &a.name).cmp(&(b.set, b.binding, &b.name)));
        let mut features: Vec<Feature> = self.capabilities.iter().filter_map(|c| Feature::from_capability(*c)).collect();
        features.dedup();
        Ok(Reflection { entry_point, local_size, bindings, push, workgroup_bytes, features })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Assemble a module from (opcode, operands) pairs.
    fn module(instructions: &[(u32, Vec<u32>)]) -> Vec<u32> {
        let mut words = vec![MAGIC, 0x0001_0500, 0, 100, 0];
        for (opcode, operands) in instructions {
            words.push(((operands.len() as u32 + 1) << 16) | opcode);
            words.extend(operands);
        }
        words
    }

    fn text(s: &str) -> Vec<u32> {
        let mut bytes = s.as_bytes().to_vec();
        bytes.resize(s.len() / 4 * 4 + 4, 0);
        bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn reads_entry_bindings_push_block_and_shared_bytes() {
        let mut entry = vec![EXECUTION_MODEL_GLCOMPUTE, 1];
        entry.extend(text("vadd"));
        let mut member_n = vec![20, 0];
        member_n.extend(text("n"));
        let words = module(&[
            (op::CAPABILITY, vec![1]),
            (op::CAPABILITY, vec![9]),
            (op::ENTRY_POINT, entry),
            (op::EXECUTION_MODE, vec![1, MODE_LOCAL_SIZE, 16, 4, 1]),
            (op::NAME, [vec![31], text("outp")].concat()),
            (op::MEMBER_NAME, member_n),
            (op::DECORATE, vec![30, decoration::BUFFER_BLOCK]),
            (op::DECORATE, vec![31, decoration::DESCRIPTOR_SET, 0]),
            (op::DECORATE, vec![31, decoration::BINDING, 2]),
            (op::DECORATE, vec![20, decoration::BLOCK]),
            (op::MEMBER_DECORATE, vec![20, 0, decoration::OFFSET, 0]),
            (op::MEMBER_DECORATE, vec![20, 1, decoration::OFFSET, 4]),
            (op::TYPE_INT, vec![10, 32, 1]),
            (op::TYPE_FLOAT, vec![11, 32]),
            (op::CONSTANT, vec![10, 12, 17]),
            (op::TYPE_ARRAY, vec![13, 11, 12]),
            (op::TYPE_POINTER, vec![14, storage::WORKGROUP, 13]),
            (op::VARIABLE, vec![14, 15, storage::WORKGROUP]),
            (op::TYPE_STRUCT, vec![20, 10, 11]),
            (op::TYPE_POINTER, vec![21, storage::PUSH_CONSTANT, 20]),
            (op::VARIABLE, vec![21, 22, storage::PUSH_CONSTANT]),
            (op::TYPE_RUNTIME_ARRAY, vec![29, 11]),
            (op::TYPE_STRUCT, vec![30, 29]),
            (op::TYPE_POINTER, vec![32, storage::UNIFORM, 30]),
            (op::VARIABLE, vec![32, 31, storage::UNIFORM]),
        ]);
        let r = reflect(&words).unwrap();
        assert_eq!(r.entry_point, "vadd");
        assert_eq!(r.local_size, Some([16, 4, 1]));
        assert_eq!(r.bindings, vec![Binding { set: 0, binding: 2, name: "outp".into(), kind: DescriptorKind::StorageBuffer }]);
        let push = r.push.unwrap();
        assert_eq!(push.size, 8);
        assert_eq!(push.members[0], Member { name: "n".into(), offset: 0, ty: Scalar::Int { width: 32, signed: true } });
        assert_eq!(push.members[1].ty, Scalar::Float { width: 32 });
        assert_eq!(r.workgroup_bytes, Some(17 * 4));
        assert_eq!(r.features, vec![Feature::Float16]);
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(reflect(&[1, 2, 3, 4, 5]).unwrap_err().contains("magic"));
        let mut words = module(&[]);
        words.push(10 << 16);
        assert!(reflect(&words).unwrap_err().contains("truncated"));
        assert!(reflect(&module(&[])).unwrap_err().contains("no compute entry point"));
    }
}
