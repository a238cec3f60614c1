//! The Vulkan device: loading the loader, choosing a physical device, creating the
//! logical device with the features HLSL kernels need, and device buffers.
//!
//! Vulkan is loaded at run time (ash's `loaded` feature), so peak builds and starts on a
//! machine without it; every failure to find a loader, a driver or a suitable device is a
//! [`BackendError::Unavailable`] with a hint.

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;
use peak_backend::BackendError;

use crate::reflect::Feature;

/// Environment variable choosing the Vulkan device by its index in [`list_devices`].
pub const DEVICE_ENV: &str = "PEAK_VULKAN_DEVICE";

/// Number of timestamp queries; events are recycled, so this bounds only how many are
/// outstanding at once.
pub(crate) const TIMESTAMP_QUERIES: u32 = 4096;

/// A Vulkan device as `peak info` would list it.
#[derive(Debug, Clone, PartialEq)]
pub struct VulkanDevice {
    pub index: usize,
    pub name: String,
    /// "discrete GPU", "integrated GPU", "CPU", ...
    pub kind: String,
    pub api_version: String,
    /// Why peak cannot use it, if it cannot.
    pub unusable: Option<String>,
}

pub(crate) fn unavailable(reason: impl Into<String>, hint: impl Into<String>) -> BackendError {
    BackendError::Unavailable { what: "Vulkan".into(), reason: reason.into(), hint: hint.into() }
}

const LOADER_HINT: &str = "install the Vulkan loader and a driver: on Debian/Ubuntu `apt-get install libvulkan1 mesa-vulkan-drivers` gives lavapipe, a CPU device; on a machine with NVIDIA's driver but no loader, unpack Debian's libvulkan1 and set VK_DRIVER_FILES to NVIDIA's ICD json (crates/peak-hlsl/README.md)";

fn vk_error(what: &str, e: vk::Result) -> BackendError {
    match e {
        vk::Result::ERROR_DEVICE_LOST => BackendError::Fault(format!("{what}: the Vulkan device was lost ({e})")),
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => BackendError::Internal(format!("{what}: out of memory ({e})")),
        _ => BackendError::Internal(format!("{what}: {e}")),
    }
}

pub(crate) fn check(what: &str) -> impl Fn(vk::Result) -> BackendError + '_ {
    move |e| vk_error(what, e)
}

fn load() -> Result<(ash::Entry, ash::Instance), BackendError> {
    // SAFETY: loading libvulkan runs its initialisers; the loader is designed for that.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| unavailable(format!("cannot load the Vulkan loader (libvulkan.so.1): {e}"), LOADER_HINT))?;
    let app = vk::ApplicationInfo::default().application_name(c"peak").engine_name(c"peak").api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: the create info and everything it points to outlive the call.
    let instance =
        unsafe { entry.create_instance(&info, None) }.map_err(|e| unavailable(format!("creating a Vulkan 1.2 instance failed: {e}"), LOADER_HINT))?;
    Ok((entry, instance))
}

fn kind_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete GPU",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated GPU",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual GPU",
        vk::PhysicalDeviceType::CPU => "CPU",
        _ => "other",
    }
}

fn version(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}

fn c_str(r: Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    r.map(|s| s.to_string_lossy().trim().to_string()).unwrap_or_default()
}

/// A queue family that runs compute work and can time it.
fn compute_family(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Option<(u32, u32)> {
    // SAFETY: `physical` came from this instance.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    families
        .iter()
        .enumerate()
        .find(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.timestamp_valid_bits > 0)
        .map(|(i, f)| (i as u32, f.timestamp_valid_bits))
}

fn describe(instance: &ash::Instance, index: usize, physical: vk::PhysicalDevice) -> VulkanDevice {
    // SAFETY: `physical` came from this instance.
    let props = unsafe { instance.get_physical_device_properties(physical) };
    let unusable = if props.api_version < vk::API_VERSION_1_2 {
        Some(format!("supports Vulkan {} only; peak needs 1.2", version(props.api_version)))
    } else if compute_family(instance, physical).is_none() {
        Some("has no compute queue with timestamps".to_string())
    } else {
        None
    };
    VulkanDevice {
        index,
        name: c_str(props.device_name_as_c_str()),
        kind: kind_name(props.device_type).to_string(),
        api_version: version(props.api_version),
        unusable,
    }
}

/// Every Vulkan device the loader finds, usable or not.
pub fn list_devices() -> Result<Vec<VulkanDevice>, BackendError> {
    let (_entry, instance) = load()?;
    // SAFETY: the instance is valid until destroyed below, after its last use.
    let result = unsafe { instance.enumerate_physical_devices() }
        .map(|devices| devices.iter().enumerate().map(|(i, p)| describe(&instance, i, *p)).collect())
        .map_err(|e| unavailable(format!("listing Vulkan devices failed: {e}"), LOADER_HINT));
    // SAFETY: nothing created from the instance is still alive.
    unsafe { instance.destroy_instance(None) };
    result
}

/// The physical device to open: the one [`DEVICE_ENV`] names, else the best usable one.
fn choose_device(instance: &ash::Instance) -> Result<vk::PhysicalDevice, BackendError> {
    // SAFETY: the instance is valid.
    let physicals = unsafe { instance.enumerate_physical_devices() }.map_err(|e| unavailable(format!("listing Vulkan devices failed: {e}"), LOADER_HINT))?;
    if physicals.is_empty() {
        return Err(unavailable("the Vulkan loader found no device (no driver / ICD)", LOADER_HINT));
    }
    let described: Vec<VulkanDevice> = physicals.iter().enumerate().map(|(i, p)| describe(instance, i, *p)).collect();
    let index = match std::env::var(DEVICE_ENV) {
        Ok(spec) => named_device(&spec, &described)?,
        Err(_) => best_device(&described)?,
    };
    Ok(physicals[index])
}

/// The index `spec` (the value of [`DEVICE_ENV`]) names, refused unless peak can use
/// that device: a person who names a device wants that one or an error, not another.
fn named_device(spec: &str, described: &[VulkanDevice]) -> Result<usize, BackendError> {
    let i: usize =
        spec.trim().parse().map_err(|_| unavailable(format!("{DEVICE_ENV}={spec} is not a device index"), "run `vulkaninfo --summary` to see the indices"))?;
    let d = described
        .get(i)
        .ok_or_else(|| unavailable(format!("{DEVICE_ENV}={i}, but there are {} devices", described.len()), "run `vulkaninfo --summary` to see the indices"))?;
    if let Some(why) = &d.unusable {
        return Err(unavailable(format!("device {i} ({}) {why}", d.name), "choose another device"));
    }
    Ok(i)
}

/// The first usable device of the fastest kind: discrete, integrated, virtual, CPU.
fn best_device(described: &[VulkanDevice]) -> Result<usize, BackendError> {
    let rank = |kind: &str| ["discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other"].iter().position(|k| *k == kind).unwrap_or(5);
    let best = described.iter().filter(|d| d.unusable.is_none()).min_by_key(|d| (rank(&d.kind), d.index));
    match best {
        Some(d) => Ok(d.index),
        None => {
            let why = described.iter().map(|d| format!("{}: {}", d.name, d.unusable.as_deref().unwrap_or(""))).collect::<Vec<_>>().join("; ");
            Err(unavailable(format!("no usable Vulkan device ({why})"), LOADER_HINT))
        }
    }
}

/// The optional features a device has, with the uniform-buffer companions of the 16- and
/// 8-bit storage features, which are enabled alongside those where the device has them.
struct Supported {
    enabled: Vec<Feature>,
    uniform_and_storage16: bool,
    uniform_and_storage8: bool,
}

/// Which optional features the device has.
fn supported_features(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Supported {
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut v11).push_next(&mut v12);
    // SAFETY: the structure chain lives until the call returns.
    unsafe { instance.get_physical_device_features2(physical, &mut f2) };
    let base = f2.features;
    let have = |f: Feature| match f {
        Feature::Float16 => v12.shader_float16 == vk::TRUE,
        Feature::Float64 => base.shader_float64 == vk::TRUE,
        Feature::Int64 => base.shader_int64 == vk::TRUE,
        Feature::Int16 => base.shader_int16 == vk::TRUE,
        Feature::Int8 => v12.shader_int8 == vk::TRUE,
        Feature::StorageBuffer16Bit => v11.storage_buffer16_bit_access == vk::TRUE,
        Feature::PushConstant16Bit => v11.storage_push_constant16 == vk::TRUE,
        Feature::StorageBuffer8Bit => v12.storage_buffer8_bit_access == vk::TRUE,
    };
    let all = [
        Feature::Float16,
        Feature::Float64,
        Feature::Int64,
        Feature::Int16,
        Feature::Int8,
        Feature::StorageBuffer16Bit,
        Feature::PushConstant16Bit,
        Feature::StorageBuffer8Bit,
    ];
    let enabled: Vec<Feature> = all.into_iter().filter(|f| have(*f)).collect();
    Supported {
        enabled,
        uniform_and_storage16: v11.uniform_and_storage_buffer16_bit_access == vk::TRUE,
        uniform_and_storage8: v12.uniform_and_storage_buffer8_bit_access == vk::TRUE,
    }
}

/// The logical device with one compute queue in `queue_family` and every supported
/// optional feature enabled (kernels that need one compile only where it is on).
fn create_device(instance: &ash::Instance, physical: vk::PhysicalDevice, queue_family: u32, supported: &Supported) -> Result<ash::Device, BackendError> {
    let on = |f: Feature| if supported.enabled.contains(&f) { vk::TRUE } else { vk::FALSE };
    let mut want11 = vk::PhysicalDeviceVulkan11Features::default()
        .storage_buffer16_bit_access(on(Feature::StorageBuffer16Bit) == vk::TRUE)
        .uniform_and_storage_buffer16_bit_access(on(Feature::StorageBuffer16Bit) == vk::TRUE && supported.uniform_and_storage16)
        .storage_push_constant16(on(Feature::PushConstant16Bit) == vk::TRUE);
    let mut want12 = vk::PhysicalDeviceVulkan12Features::default()
        .shader_float16(on(Feature::Float16) == vk::TRUE)
        .shader_int8(on(Feature::Int8) == vk::TRUE)
        .storage_buffer8_bit_access(on(Feature::StorageBuffer8Bit) == vk::TRUE)
        .uniform_and_storage_buffer8_bit_access(on(Feature::StorageBuffer8Bit) == vk::TRUE && supported.uniform_and_storage8);
    let want = vk::PhysicalDeviceFeatures::default()
        .shader_float64(on(Feature::Float64) == vk::TRUE)
        .shader_int64(on(Feature::Int64) == vk::TRUE)
        .shader_int16(on(Feature::Int16) == vk::TRUE);
    let mut want2 = vk::PhysicalDeviceFeatures2::default().features(want).push_next(&mut want11).push_next(&mut want12);
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
    let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).push_next(&mut want2);
    // SAFETY: every structure the create info points to outlives the call.
    unsafe { instance.create_device(physical, &info, None) }.map_err(check("creating the Vulkan device"))
}

/// What [`Gpu`] keeps of the device's properties, read in one chained query.
struct DeviceProperties {
    properties: vk::PhysicalDeviceProperties,
    driver_name: String,
    driver_info: String,
    subgroup_size: u32,
    /// NVIDIA's SM count, where the device reports it (`VK_NV_shader_sm_builtins`).
    sm_count: Option<u32>,
}

fn device_properties(instance: &ash::Instance, physical: vk::PhysicalDevice) -> DeviceProperties {
    // SAFETY: `physical` came from this instance; the chains live until the calls return.
    unsafe {
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let has_sm = instance
            .enumerate_device_extension_properties(physical)
            .map(|exts| exts.iter().any(|e| c_str(e.extension_name_as_c_str()) == "VK_NV_shader_sm_builtins"))
            .unwrap_or(false);
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver).push_next(&mut subgroup);
        if has_sm {
            p2 = p2.push_next(&mut sm);
        }
        instance.get_physical_device_properties2(physical, &mut p2);
        let properties = p2.properties;
        DeviceProperties {
            properties,
            driver_name: c_str(driver.driver_name_as_c_str()),
            driver_info: c_str(driver.driver_info_as_c_str()),
            subgroup_size: subgroup.subgroup_size,
            sm_count: has_sm.then_some(sm.shader_sm_count),
        }
    }
}

/// Vulkan has no portable count of compute units: NVIDIA reports its SMs; a CPU device
/// (lavapipe) runs one thread per core; other GPUs report 1.
fn compute_units(sm_count: Option<u32>, properties: &vk::PhysicalDeviceProperties) -> u32 {
    match sm_count {
        Some(n) if n > 0 => n,
        _ if properties.device_type == vk::PhysicalDeviceType::CPU => std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        _ => 1,
    }
}

/// The device features peak enables when the device has them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Features {
    pub enabled: Vec<Feature>,
}

/// A logical device with one compute queue. Shared (`Arc`) by the backend, its modules
/// and its buffers, so whichever is dropped last destroys the device.
pub(crate) struct Gpu {
    _entry: ash::Entry,
    pub instance: ash::Instance,
    pub device: ash::Device,
    pub queue: vk::Queue,
    pub queue_family: u32,
    pub limits: vk::PhysicalDeviceLimits,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub features: Features,
    pub timestamp_mask: u64,
    pub properties: vk::PhysicalDeviceProperties,
    pub driver: String,
    pub subgroup_size: u32,
    pub compute_units: u32,
}

impl Gpu {
    /// Open the device chosen by [`DEVICE_ENV`], else the first discrete GPU, else the
    /// first integrated GPU, else the first usable device (lavapipe on a CPU machine).
    pub fn open() -> Result<Arc<Gpu>, BackendError> {
        let (entry, instance) = load()?;
        match Self::open_on(entry.clone(), instance.clone()) {
            Ok(gpu) => Ok(gpu),
            Err(e) => {
                // SAFETY: open_on failed before creating a device, so nothing uses the
                // instance; `entry` keeps the loader loaded until after this call.
                unsafe { instance.destroy_instance(None) };
                Err(e)
            }
        }
    }

    fn open_on(entry: ash::Entry, instance: ash::Instance) -> Result<Arc<Gpu>, BackendError> {
        let physical = choose_device(&instance)?;
        let (queue_family, valid_bits) = compute_family(&instance, physical).expect("checked by describe");
        let supported = supported_features(&instance, physical);
        let device = create_device(&instance, physical, queue_family, &supported)?;
        // SAFETY: the device was created with one queue in this family.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        let DeviceProperties { properties, driver_name, driver_info, subgroup_size, sm_count } = device_properties(&instance, physical);
        // SAFETY: `physical` came from this instance.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let timestamp_mask = if valid_bits >= 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
        let driver = format!("Vulkan {} / {} {} / driver {:#x}", version(properties.api_version), driver_name, driver_info, properties.driver_version);
        Ok(Arc::new(Gpu {
            _entry: entry,
            instance,
            device,
            queue,
            queue_family,
            limits: properties.limits,
            memory,
            features: Features { enabled: supported.enabled },
            timestamp_mask,
            properties,
            driver,
            subgroup_size: subgroup_size.max(1),
            compute_units: compute_units(sm_count, &properties),
        }))
    }

    pub fn name(&self) -> String {
        c_str(self.properties.device_name_as_c_str())
    }

    /// Bytes of the largest device-local heap.
    pub fn device_memory_bytes(&self) -> u64 {
        self.memory.memory_heaps_as_slice().iter().filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL)).map(|h| h.size).max().unwrap_or(0)
    }

    /// The first memory type allowed by `bits` that has every flag of `want` and none of
    /// `avoid`.
    fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags, avoid: vk::MemoryPropertyFlags) -> Option<(u32, vk::MemoryPropertyFlags)> {
        self.memory
            .memory_types_as_slice()
            .iter()
            .enumerate()
            .find(|(i, t)| bits & (1 << i) != 0 && t.property_flags.contains(want) && !t.property_flags.intersects(avoid))
            .map(|(i, t)| (i as u32, t.property_flags))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: the Gpu is dropped last (buffers and pipelines hold an Arc to it), so
        // nothing created from the device is left; wait for the queue before destroying.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Device-local memory the host cannot map (a discrete GPU): copies go through a
    /// staging buffer.
    DeviceOnly,
    /// Memory both sides see coherently (lavapipe, integrated GPUs, staging buffers).
    Mapped,
}

/// A host pointer into mapped device memory.
struct MappedPtr(*mut u8);
// SAFETY: the pointer is only dereferenced under the backend's state lock, while no
// queued device work uses the buffer (the backend waits for the queue first).
unsafe impl Send for MappedPtr {}
// SAFETY: as above.
unsafe impl Sync for MappedPtr {}

/// One `VkBuffer` with its own memory. Destroyed when the last `Arc` goes: the backend's
/// table holds one, and every command batch that uses the buffer holds one until it ends.
pub(crate) struct DeviceBuffer {
    gpu: Arc<Gpu>,
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Bytes the caller asked for.
    pub len: usize,
    /// Bytes allocated: `len` rounded up to 4, since vkCmdFillBuffer works in words.
    pub capacity: usize,
    mapped: Option<MappedPtr>,
}

/// What a buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Usage {
    /// Kernel data: device-local memory, mapped when the host can see it coherently.
    Device,
    /// Kernel data never mapped, even where it could be: reads and writes go through
    /// staging, as on a discrete GPU (see [`crate::HlslOptions::always_stage`]).
    DeviceUnmapped,
    /// Host-visible memory for copies to and from `DeviceOnly` buffers.
    Staging,
}

impl DeviceBuffer {
    /// A storage buffer of `len` bytes. Device buffers prefer device-local memory,
    /// host-visible only where the device has no other; staging buffers are host-visible.
    pub fn new(gpu: &Arc<Gpu>, len: usize, usage: Usage) -> Result<DeviceBuffer, BackendError> {
        let staging = usage == Usage::Staging;
        let capacity = len.max(4).div_ceil(4) * 4;
        let flags_usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let info = vk::BufferCreateInfo::default().size(capacity as u64).usage(flags_usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        let d = &gpu.device;
        // SAFETY: a plain buffer create info.
        let buffer = unsafe { d.create_buffer(&info, None) }.map_err(|_| BackendError::OutOfMemory { bytes: len })?;
        // SAFETY: the buffer was just created on this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        use vk::MemoryPropertyFlags as M;
        let coherent = M::HOST_VISIBLE | M::HOST_COHERENT;
        let choice = if staging {
            gpu.memory_type(req.memory_type_bits, coherent | M::HOST_CACHED, M::empty()).or_else(|| gpu.memory_type(req.memory_type_bits, coherent, M::empty()))
        } else {
            // On a discrete GPU, host-visible device memory (ReBAR) is slow to read from
            // the host and scarce; prefer memory only the device sees.
            gpu.memory_type(req.memory_type_bits, M::DEVICE_LOCAL, M::HOST_VISIBLE)
                .or_else(|| gpu.memory_type(req.memory_type_bits, M::DEVICE_LOCAL, M::empty()))
                .or_else(|| gpu.memory_type(req.memory_type_bits, M::empty(), M::empty()))
        };
        let destroy_buffer = || {
            // SAFETY: the buffer is unused and unbound.
            unsafe { d.destroy_buffer(buffer, None) }
        };
        let Some((type_index, flags)) = choice else {
            destroy_buffer();
            return Err(BackendError::Internal("no Vulkan memory type fits a storage buffer".into()));
        };
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index);
        // SAFETY: a plain allocation of a memory type this device lists.
        let memory = match unsafe { d.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(_) => {
                destroy_buffer();
                return Err(BackendError::OutOfMemory { bytes: len });
            }
        };
        let placement = if flags.contains(coherent) && usage != Usage::DeviceUnmapped { Placement::Mapped } else { Placement::DeviceOnly };
        // SAFETY: the memory was allocated for this buffer's requirements; mapping a
        // host-visible allocation whole is allowed and it stays mapped until freed.
        let mapped = unsafe {
            let bound = d.bind_buffer_memory(buffer, memory, 0);
            let mapped = match (bound, placement) {
                (Err(e), _) => Err(e),
                (Ok(()), Placement::Mapped) => d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()).map(|p| Some(MappedPtr(p.cast()))),
                (Ok(()), Placement::DeviceOnly) => Ok(None),
            };
            if mapped.is_err() {
                d.destroy_buffer(buffer, None);
                d.free_memory(memory, None);
            }
            mapped.map_err(check("binding buffer memory"))?
        };
        Ok(DeviceBuffer { gpu: gpu.clone(), buffer, memory, len, capacity, mapped })
    }

    pub fn placement(&self) -> Placement {
        if self.mapped.is_some() { Placement::Mapped } else { Placement::DeviceOnly }
    }

    /// Copy `data` into the mapped buffer at offset 0.
    ///
    /// # Safety
    /// No queued device work may access the buffer.
    pub unsafe fn write_mapped(&self, data: &[u8]) {
        let p = self.mapped.as_ref().expect("write_mapped on a device-only buffer");
        assert!(data.len() <= self.capacity);
        // SAFETY: the mapping covers `capacity` bytes; the caller guarantees no device access.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.0, data.len()) };
    }

    /// Copy the first `out.len()` bytes of the mapped buffer into `out`.
    ///
    /// # Safety
    /// No queued device work may access the buffer, and device writes must have been made
    /// visible to the host (a barrier to HOST_READ before the fence the caller waited on).
    pub unsafe fn read_mapped(&self, out: &mut [u8]) {
        let p = self.mapped.as_ref().expect("read_mapped on a device-only buffer");
        assert!(out.len() <= self.capacity);
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(p.0, out.as_mut_ptr(), out.len()) };
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone, so no batch that used the buffer is pending.
        unsafe {
            self.gpu.device.destroy_buffer(self.buffer, None);
            self.gpu.device.free_memory(self.memory, None);
        }
    }
}
