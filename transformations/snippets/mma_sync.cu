// Warp-level tensor-core MMA for f16 inputs with f32 accumulation (PTX mma.sync, sm_80+;
// no headers needed). Shapes follow PTX m16n8k16, row.col.
//
// peak_mma_16816(d, a, b): d[0..3] += A (16x16, fragment a[0..3]) * B (16x8, fragment b[0..1]).
// Fragment layouts, for lane l of the warp, g = l / 4, q = l % 4 (each register holds two
// consecutive halves, the lower index in the low 16 bits):
//   a[0]: A[g][2q, 2q+1]      a[1]: A[g+8][2q, 2q+1]
//   a[2]: A[g][2q+8, 2q+9]    a[3]: A[g+8][2q+8, 2q+9]
//   b[0]: B[2q, 2q+1][g]      b[1]: B[2q+8, 2q+9][g]          (k rows, column g)
//   d[0]: D[g][2q]  d[1]: D[g][2q+1]  d[2]: D[g+8][2q]  d[3]: D[g+8][2q+1]
__device__ __forceinline__ void peak_mma_16816(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// peak_ldmatrix_a(a, p): load the A fragment of a 16x16 block stored row-major in shared
// memory (m rows, k columns). Lane l passes p = address of the block's element
// (row l % 16, column (l / 16) * 8). Each row's 8 halves must be 16-byte aligned.
__device__ __forceinline__ void peak_ldmatrix_a(unsigned* a, const void* p) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
}

// peak_ldmatrix_b(b, p): load the B fragments of a 16x16 block of B stored row-major in
// shared memory (k rows, n columns), for two adjacent 16x8 MMAs: b[0..1] for columns 0-7,
// b[2..3] for columns 8-15. Lane l passes p = address of the block's element
// (row l % 16, column (l / 16) * 8). Each row's 8 halves must be 16-byte aligned.
__device__ __forceinline__ void peak_ldmatrix_b(unsigned* b, const void* p) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(s));
}

// peak_mma_16816_bf16(d, a, b): the same for bf16 inputs (`__nv_bfloat16`), f32 accumulation:
// the same fragment layouts and the same ldmatrix loads (they move 16-bit elements).
__device__ __forceinline__ void peak_mma_16816_bf16(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 8-bit float inputs (sm_89+): peak_mma_16832_e4m3(d, a, b) and peak_mma_16832_e5m2(d, a, b),
// d[0..3] += A (16 x 32, fragment a[0..3]) * B (32 x 8, fragment b[0..1]), f32 accumulation,
// PTX m16n8k32 row.col. Each register holds four consecutive 8-bit elements along k (the
// lowest k in the low byte), so, with g = l / 4 and q = l % 4:
//   a[0]: A[g][4q .. 4q+3]      a[1]: A[g+8][4q .. 4q+3]
//   a[2]: A[g][4q+16 .. 4q+19]  a[3]: A[g+8][4q+16 .. 4q+19]
//   b[0]: B[4q .. 4q+3][g]      b[1]: B[4q+16 .. 4q+19][g]      (k rows, column g)
//   d: as for m16n8k16.
// ldmatrix moves 16-bit pairs, which cannot transpose 8-bit elements, so both shared tiles
// must hold k contiguous (K-major: As[m][k] and Bs[n][k]); then the same non-transposed
// ldmatrix serves both. A: peak_ldmatrix_a(a, p) on a 16 x 32 block, lane l passing the
// address of element (row l % 16, column (l / 16) * 16). B: peak_ldmatrix_b_k8(b, p) below.
__device__ __forceinline__ void peak_mma_16832_e4m3(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void peak_mma_16832_e5m2(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// peak_ldmatrix_b_k8(b, p): the 8-bit B fragments of two adjacent m16n8k32 MMAs from a
// K-major shared tile (Bs[n][k], 32 k of 16 n): b[0..1] for columns 0-7, b[2..3] for
// columns 8-15. Lane l passes the address of element (n = l % 8 + (l / 16) * 8,
// k = ((l / 8) % 2) * 16). Each 16-element row segment must be 16-byte aligned.
__device__ __forceinline__ void peak_ldmatrix_b_k8(unsigned* b, const void* p) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(s));
}
