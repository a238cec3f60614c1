// Stream-Hints: global accesses to data this kernel touches once. STREAM 0: plain accesses;
// 1: such loads marked non-temporal (kept out of the caches where the device can); 2: such
// stores marked so too. LOAD_STREAM(p) reads *p, STORE_STREAM(p, v) writes v to *p, p a
// __global pointer to a scalar or vector type (float, float4, ushort8, ...).
#ifndef PEAK_STREAM_HINTS
#define PEAK_STREAM_HINTS
#if STREAM >= 1
#define LOAD_STREAM(p) __builtin_nontemporal_load(p)
#else
#define LOAD_STREAM(p) (*(p))
#endif
#if STREAM >= 2
#define STORE_STREAM(p, v) __builtin_nontemporal_store((v), (p))
#else
#define STORE_STREAM(p, v) ((void)(*(p) = (v)))
#endif
#endif
