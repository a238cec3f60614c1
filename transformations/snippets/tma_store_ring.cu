// Bulk stores through a ring of staging buffers (sm_90), with the tma_store snippet's
// peak_tma_store_2d: the issuing thread closes each buffer's stores into a bulk group, and
// before a buffer is written again waits until only the N most recent groups may still be
// reading shared memory (the group that last read it is older than those).
//
//   peak_tma_store_commit()             the issuing thread: close the stores issued since the
//                                       last commit into one bulk group
//   peak_tma_store_wait_read<N>()       the issuing thread: wait until at most N of its bulk
//                                       groups are still reading shared memory
__device__ __forceinline__ void peak_tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void peak_tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
