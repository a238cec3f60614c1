// Global -> groupshared copies for multi-stage pipelines, with the same interface as the
// CUDA cp.async version. HLSL has no asynchronous copy, so the copy happens at once and
// commit/wait do nothing; the pipeline still overlaps the loads of later stages with the
// current math.
//   PEAK_ASYNC_COPY(dst, src, index, in_bounds)  dst = src[index], or zero when !in_bounds
//   PEAK_ASYNC_COMMIT()  close the group of copies started since the last commit
//   PEAK_ASYNC_WAIT(N)   wait until at most N committed groups are in flight; follow it
//       with a barrier before reading the data
#define PEAK_ASYNC_COPY(dst, src, index, in_bounds) ((dst) = (in_bounds) ? (src)[(in_bounds) ? (index) : 0] : 0)
#define PEAK_ASYNC_COMMIT()
#define PEAK_ASYNC_WAIT(N)
