// Blocks of one cluster exchanging results through global memory (sm_90): the writers'
// stores are released at cluster scope with their arrival, and the readers acquire them
// with their wait, so a block reads another block's stores only once they are visible.
//
//   peak_fence_cluster()                  every writing thread, after its stores: orders them
//                                         before its later operations at cluster scope
//   peak_mbar_arrive_release(bar, rank)   arrive on the barrier at offset `bar` in the block
//                                         of that rank (this block's rank included),
//                                         releasing at cluster scope
//   peak_mbar_wait_acquire(bar, parity)   every reading thread: wait until the phase of that
//                                         parity of this block's barrier completed, acquiring
//                                         at cluster scope; then read with __ldcg (from L2,
//                                         never a stale L1 line)
__device__ __forceinline__ void peak_fence_cluster() {
    asm volatile("fence.acq_rel.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void peak_mbar_arrive_release(unsigned long long* bar, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

__device__ __forceinline__ void peak_mbar_wait_acquire(unsigned long long* bar, unsigned parity) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    }
}
