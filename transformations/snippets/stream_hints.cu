// Stream-Hints: global accesses to data this kernel touches once. STREAM 0: plain accesses;
// 1: such loads marked evict-first in the caches (ld.global.cs); 2: such stores marked so too
// (st.global.cs). LOAD_STREAM(p) reads *p, STORE_STREAM(p, v) writes v to *p, p a pointer to
// global memory of a scalar or vector type (float, float2, float4, int, uint, uint2, uint4,
// __half, __half2, __nv_bfloat16, __nv_bfloat162, ...).
#ifndef PEAK_STREAM_HINTS
#define PEAK_STREAM_HINTS
#if STREAM >= 1
#define LOAD_STREAM(p) __ldcs(p)
#else
#define LOAD_STREAM(p) (*(p))
#endif
#if STREAM >= 2
#define STORE_STREAM(p, v) __stcs((p), (v))
#else
#define STORE_STREAM(p, v) ((void)(*(p) = (v)))
#endif
#endif
