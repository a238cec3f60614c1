// Named barriers without waiting (sm_70+): a warpgroup tells another it may go on, and goes
// on itself. Pairs with peak_bar_sync(id, threads) of the tma_store snippet on the same id
// and the same count: the barrier completes when `threads` threads (a multiple of 32, whole
// warps: every thread of each warp executes it) have arrived or synced, and releases only
// those that synced. Ids 1..15 (0 is __syncthreads); each id is one hardware barrier.
//
//   peak_bar_arrive(id, threads)        arrive on hardware barrier `id` of `threads`
//                                       threads and continue at once
//
// The usual pairing, warpgroup P letting warpgroup Q go: Q calls peak_bar_sync(id, 256)
// (its 128 threads wait), P calls peak_bar_arrive(id, 256) (its 128 threads do not).
// One id must not be arrived on again before the sync it pairs with has completed.
__device__ __forceinline__ void peak_bar_arrive(unsigned id, unsigned threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
