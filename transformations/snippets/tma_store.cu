// Hopper bulk tensor stores (TMA, sm_90): a tile staged in shared memory is written to
// global memory by the copy engine in whole 128-byte lines, clipped at the matrix edges.
// Needs the tma snippet (PeakTensorMap, peak_smem_u32, peak_fence_proxy_async).
//
//   peak_bar_sync(id, threads)          a barrier of `threads` threads (a multiple of 32) on
//                                       hardware barrier `id` (1..15; 0 is __syncthreads)
//   peak_swizzle_128b(row, byte)        where byte `byte` (0..127) of row `row` of a box of
//                                       128-byte rows lies in shared memory under the
//                                       128-byte swizzle ("128b" tensor maps): the 16-byte
//                                       chunk index is XORed with row % 8. The box starts
//                                       1024-byte aligned.
//   peak_tma_store_2d(&tmap, x, y, src) the issuing thread: one box from shared memory `src`
//                                       to (x = column, y = row) of its top-left element
//   peak_tma_store_wait()               the issuing thread: commit its stores and wait until
//                                       they have finished reading shared memory (before
//                                       the block exits or the buffer is written again)
// Every thread that wrote the staged tile with ordinary stores calls
// peak_fence_proxy_async(), then a barrier of the writers, before the store is issued.
__device__ __forceinline__ void peak_bar_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ unsigned peak_swizzle_128b(unsigned row, unsigned byte) {
    return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
}

__device__ __forceinline__ void peak_tma_store_2d(const PeakTensorMap* tmap, int x, int y, const void* src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(reinterpret_cast<unsigned long long>(tmap)), "r"(x), "r"(y), "r"(peak_smem_u32(src))
                 : "memory");
}

__device__ __forceinline__ void peak_tma_store_wait() {
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
