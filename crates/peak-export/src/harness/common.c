/* ---- peak's input generation, so the harness's inputs are the ones peak used ---- */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PEAK_F32 = 0, PEAK_F16 = 1, PEAK_BF16 = 2, PEAK_I32 = 3, PEAK_U32 = 4 };
enum { PEAK_ZEROS = 0, PEAK_ONES = 1, PEAK_RANDOM = 2, PEAK_ARANGE = 3 };

/* SplitMix64, as peak_spec::rng. */
static uint64_t peak_next(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 24 bits of mantissa. */
static float peak_unit_f32(uint64_t *s) {
    uint32_t bits = (uint32_t)(peak_next(s) >> 40);
    return (float)bits / (float)(1u << 23) - 1.0f;
}

/* float to IEEE half and to bfloat16, rounding to nearest even. */
static uint16_t peak_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)h;
}

static uint16_t peak_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float peak_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f; /* mant * 2^-24 */
        return sign ? -v : v;
    }
    if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float peak_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static size_t peak_elem_size(int dtype) { return (dtype == PEAK_F16 || dtype == PEAK_BF16) ? 2 : 4; }

static void peak_store(void *dst, int dtype, size_t i, double v) {
    switch (dtype) {
    case PEAK_F32: { float f = (float)v; memcpy((char *)dst + 4 * i, &f, 4); break; }
    case PEAK_F16: { uint16_t h = peak_f32_to_f16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case PEAK_BF16: { uint16_t h = peak_f32_to_bf16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case PEAK_I32: { int32_t n = (int32_t)v; memcpy((char *)dst + 4 * i, &n, 4); break; }
    default: { uint32_t n = (uint32_t)v; memcpy((char *)dst + 4 * i, &n, 4); break; }
    }
}

static double peak_load(const void *src, int dtype, size_t i) {
    switch (dtype) {
    case PEAK_F32: { float f; memcpy(&f, (const char *)src + 4 * i, 4); return f; }
    case PEAK_F16: { uint16_t h; memcpy(&h, (const char *)src + 2 * i, 2); return peak_f16_to_f32(h); }
    case PEAK_BF16: { uint16_t h; memcpy(&h, (const char *)src + 2 * i, 2); return peak_bf16_to_f32(h); }
    case PEAK_I32: { int32_t n; memcpy(&n, (const char *)src + 4 * i, 4); return n; }
    default: { uint32_t n; memcpy(&n, (const char *)src + 4 * i, 4); return n; }
    }
}

/* The manifest's init: zeros, ones, random (peak's values for this seed) or arange. */
static void *peak_host_array(int dtype, size_t count, int init, uint64_t seed) {
    void *p = malloc(count * peak_elem_size(dtype) + 1);
    if (!p) { fprintf(stderr, "error: out of host memory\n"); exit(1); }
    uint64_t s = seed;
    for (size_t i = 0; i < count; ++i) {
        double v = 0.0;
        if (init == PEAK_ONES) v = 1.0;
        else if (init == PEAK_ARANGE) v = (double)i;
        else if (init == PEAK_RANDOM) {
            if (dtype == PEAK_I32) v = (double)((int64_t)(peak_next(&s) % 201u) - 100);
            else if (dtype == PEAK_U32) v = (double)(peak_next(&s) % 101u);
            else v = (double)peak_unit_f32(&s);
        }
        peak_store(p, dtype, i, v);
    }
    return p;
}

static void peak_summary(const char *name, const void *data, int dtype, size_t count) {
    double sum = 0.0;
    size_t nan = 0;
    for (size_t i = 0; i < count; ++i) {
        double v = peak_load(data, dtype, i);
        if (v != v) nan++;
        else sum += v;
    }
    printf("output %s: %zu elements, sum %.6e, %zu NaN\n", name, count, sum, nan);
}

static void peak_dump(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes) { fprintf(stderr, "error: cannot write %s\n", path); exit(1); }
    fclose(f);
}

static int peak_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double peak_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), peak_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct { int warmup, reps; const char *dump; const char *kernel; } peak_options;

static peak_options peak_parse(int argc, char **argv) {
    peak_options o = { 3, 20, NULL, NULL };
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--warmup") && i + 1 < argc) o.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) o.dump = argv[++i];
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) o.kernel = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--warmup N] [--reps N] [--dump DIR] [--kernel FILE]\n"
                            "  --dump DIR   write each output array after the first run to DIR/NAME.bin (raw little-endian)\n", argv[0]);
            exit(2);
        }
    }
    if (o.reps < 1) o.reps = 1;
    if (o.warmup < 0) o.warmup = 0;
    return o;
}
