// AMD matrix-core MMA (MFMA) for one 64-lane wavefront, CDNA GPUs (gfx90a / MI200 and
// newer). D is a 16x16 f32 tile held as 4 floats per lane; for lane l, with
// col = l % 16 and quad = l / 16:
//   d[i] = D[4 * quad + i][col]                       (i = 0..3)
//
// f16 inputs, k = 16 per instruction:
//   a (4 halves) = A[row = l % 16][k = 4 * quad + 0..3]
//   b (4 halves) = B[k = 4 * quad + 0..3][col = l % 16]
// f32 inputs, k = 4 per instruction:
//   a (1 float)  = A[row = l % 16][k = quad]
//   b (1 float)  = B[k = quad][col = l % 16]
typedef _Float16 peak_half4 __attribute__((ext_vector_type(4)));
typedef float peak_float4 __attribute__((ext_vector_type(4)));

#define PEAK_MFMA_F16(d, a, b) ((d) = __builtin_amdgcn_mfma_f32_16x16x16f16((a), (b), (d), 0, 0, 0))
#define PEAK_MFMA_F32(d, a, b) ((d) = __builtin_amdgcn_mfma_f32_16x16x4f32((a), (b), (d), 0, 0, 0))
#define PEAK_MFMA_K_F16 16
#define PEAK_MFMA_K_F32 4
