// Hopper bulk tensor copies (TMA, sm_90) completing on shared-memory mbarriers.
//
// The host builds one tensor map per matrix with the launch-script function
// cuda_tensor_map(...) and passes it as a kernel argument, received by value as
// `const __grid_constant__ PeakTensorMap tmap` (it must stay in parameter space: never
// copy it to a local variable). TMA writes each box densely in row-major order, 2-D boxes
// given as (x = column, y = row) of its top-left element; elements outside the matrix
// arrive as zeros. A destination in shared memory must be 128-byte aligned (1024-byte
// aligned with the 128-byte swizzle).
//
// A stage's barrier works in phases: one thread announces the bytes to expect and issues
// the copies; every consumer waits for the phase to complete, then flips its parity.
//   peak_mbar_init(bar, 1)                   once, by one thread, then peak_fence_mbar_init()
//                                            and a block-wide __syncthreads()
//   peak_mbar_arrive_expect_tx(bar, bytes)   the issuing thread, before or after its copies
//   peak_tma_load_2d(dst, &tmap, x, y, bar)  the issuing thread, once per box
//   peak_mbar_wait(bar, parity)              every consumer; parity starts at 0 and flips
//                                            each time this barrier's phase is waited for
struct __align__(64) PeakTensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned peak_smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void peak_mbar_init(unsigned long long* bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(peak_smem_u32(bar)), "r"(arrivals) : "memory");
}

// Make initialised barriers visible to the copy engine before any copy uses them.
__device__ __forceinline__ void peak_fence_mbar_init() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void peak_mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(peak_smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void peak_mbar_wait(unsigned long long* bar, unsigned parity) {
    const unsigned addr = peak_smem_u32(bar);
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    }
}

__device__ __forceinline__ void peak_tma_load_2d(void* dst, const PeakTensorMap* tmap, int x, int y, unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(peak_smem_u32(dst)), "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(x), "r"(y), "r"(peak_smem_u32(bar))
        : "memory");
}

// Shared memory written by ordinary stores that TMA or wgmma read next needs this in each
// writing thread before the barrier that publishes it.
__device__ __forceinline__ void peak_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A plain arrival (no bytes expected): a consumer tells the producer it has finished with
// a stage, on an "empty" barrier initialised with one arrival per consumer.
__device__ __forceinline__ void peak_mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(peak_smem_u32(bar)) : "memory");
}
