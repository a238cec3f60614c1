// stmatrix (sm_90): one warp stores four 8 x 8 matrices of 16-bit elements to shared memory
// in one instruction, where 4-byte stores take sixteen.
//
//   peak_stmatrix_x4(row, r0, r1, r2, r3)  every lane of the warp, together (a warp-wide
//                                          instruction: never under a branch on the lane):
//                                          `row` is where row lane % 8 of matrix lane / 8
//                                          goes, 16 contiguous bytes, 16-byte aligned;
//                                          register ri holds this lane's two elements of
//                                          matrix i, row lane / 4, columns 2 (lane % 4) and
//                                          2 (lane % 4) + 1, the first in the low half. That
//                                          is the layout of an 8 x 8 block of an mma or
//                                          wgmma accumulator.
//   peak_pack_16x2(v)                      the 32 bits of a two-element vector of 16-bit
//                                          elements (__half2, __nv_bfloat162), as a register
//                                          of peak_stmatrix_x4
__device__ __forceinline__ void peak_stmatrix_x4(const void* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(row))), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

template <typename Vec2>
__device__ __forceinline__ unsigned peak_pack_16x2(Vec2 v) {
    static_assert(sizeof(Vec2) == 4, "two 16-bit elements");
    return *reinterpret_cast<const unsigned*>(&v);
}
