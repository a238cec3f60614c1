#ifndef PEAK_ZERO_DEFINED
#define PEAK_ZERO_DEFINED
// A zero of the same type as the argument. glslang's HLSL front end converts no literal to
// half implicitly, so zero-filling goes through these overloads, picked by the type of
// the destination element.
float peak_zero(float x) { return 0.0f; }
float2 peak_zero(float2 x) { return (float2)0.0f; }
float4 peak_zero(float4 x) { return (float4)0.0f; }
half peak_zero(half x) { return (half)0.0f; }
half2 peak_zero(half2 x) { return (half2)(half)0.0f; }
half4 peak_zero(half4 x) { return (half4)(half)0.0f; }
int peak_zero(int x) { return 0; }
uint peak_zero(uint x) { return 0u; }
#endif

// Global -> groupshared copies for multi-stage pipelines, with the same interface as the
// CUDA cp.async version. HLSL has no asynchronous copy, so the copy happens at once and
// commit/wait do nothing; the pipeline still overlaps the loads of later stages with the
// current math.
//   PEAK_ASYNC_COPY(dst, src, index, in_bounds)  dst = src[index], or zero when !in_bounds
//   PEAK_ASYNC_COMMIT()  close the group of copies started since the last commit
//   PEAK_ASYNC_WAIT(N)   wait until at most N committed groups are in flight; follow it
//       with a barrier before reading the data
#define PEAK_ASYNC_COPY(dst, src, index, in_bounds) ((dst) = (in_bounds) ? (src)[(in_bounds) ? (index) : 0] : peak_zero(dst))
#define PEAK_ASYNC_COMMIT()
#define PEAK_ASYNC_WAIT(N)
