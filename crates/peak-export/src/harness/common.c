/* ---- peak's input generation, so the harness's inputs are the ones peak used ---- */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PEAK_F32 = 0, PEAK_F16 = 1, PEAK_BF16 = 2, PEAK_I32 = 3, PEAK_U32 = 4, PEAK_E4M3 = 5, PEAK_E5M2 = 6 };
enum { PEAK_ZEROS = 0, PEAK_ONES = 1, PEAK_RANDOM = 2, PEAK_ARANGE = 3, PEAK_UNIFORM = 4, PEAK_NORMAL = 5, PEAK_INTEGERS = 6 };

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

/* a * b rounded on its own. A compiler may fuse a product into the addition after it (an
 * FMA, under -ffp-contract, the default on some targets), which changes the last bit; a
 * product read back from a volatile cannot be fused, so the values below are peak's. */
static double peak_mul(double a, double b) {
    volatile double p = a * b;
    return p;
}

/* Uniform in [0, 1): the top 53 bits as a multiple of 2^-53. */
static double peak_unit_f64(uint64_t *s) { return (double)(peak_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ln(x) for a positive normal x, as peak_spec::rng computes it (no libm, whose log may round
 * differently): x = m 2^e with m in (sqrt(1/2), sqrt(2)], ln m = 2 atanh((m - 1) / (m + 1)). */
static double peak_ln(double x) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    int64_t e = (int64_t)((bits >> 52) & 0x7ffu) - 1023;
    bits = (bits & 0xfffffffffffffull) | (1023ull << 52);
    double m;
    memcpy(&m, &bits, 8);
    if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
    double f = m - 1.0, s = f / (2.0 + f), z = peak_mul(s, s), p = 0.0;
    for (int k = 11; k >= 0; --k) p = peak_mul(p, z) + 1.0 / (double)(2 * k + 1);
    return peak_mul((double)e, 0.6931471805599453) + peak_mul(2.0 * s, p);
}

/* A standard normal value by the ratio of uniforms, as peak_spec::rng::SplitMix64::normal. */
static double peak_normal(uint64_t *s) {
    for (;;) {
        double u = (double)((peak_next(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
        double v = 0.8577638849607068 * ((double)(peak_next(s) >> 11) * (1.0 / 4503599627370496.0) - 1.0);
        double x = v / u;
        if (peak_mul(x, x) <= -4.0 * peak_ln(u)) return x;
    }
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

/* double to bfloat16 as peak converts the original inits (zeros, ones, random, arange): the
 * `half` crate's from_f64, which rounds to nearest even on the top 20 bits of the mantissa,
 * so a value just above a halfway point can round down. Other inits round from float. */
static uint16_t peak_f64_to_bf16_legacy(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    uint32_t x = (uint32_t)(bits >> 32), sign = x & 0x80000000u, exp = x & 0x7ff00000u, man = x & 0x000fffffu;
    if (exp == 0x7ff00000u) return (uint16_t)((sign >> 16) | 0x7f80u | ((man || (uint32_t)bits) ? 0x40u : 0u) | (man >> 13));
    uint32_t hsign = sign >> 16;
    int64_t hexp = (int64_t)(exp >> 20) - 1023 + 127;
    if (hexp >= 0xff) return (uint16_t)(hsign | 0x7f80u);
    if (hexp <= 0) {
        if (7 - hexp > 21) return (uint16_t)hsign;
        man |= 0x00100000u;
        uint32_t hman = man >> (14 - hexp), round = 1u << (13 - hexp);
        if ((man & round) && (man & (3u * round - 1u))) hman++;
        return (uint16_t)(hsign | hman);
    }
    uint32_t h = hsign | ((uint32_t)hexp << 7) | (man >> 13);
    if ((man & 0x1000u) && (man & 0x2fffu)) h++;
    return (uint16_t)h;
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

/* 2^k as a double, exactly (no libm: the OpenCL harness links none). */
static double peak_pow2(int k) {
    double p = 1.0;
    for (; k > 0; --k) p *= 2.0;
    for (; k < 0; ++k) p *= 0.5;
    return p;
}

/* float to OCP FP8 (E4M3: 3 mantissa bits, bias 7, no infinities; E5M2: 2 bits, bias 15),
 * rounding to nearest even and saturating to the largest finite value (infinities too) as
 * cvt.rn.satfinite does; NaN to 0x7F. As peak_spec::fp8. */
static uint8_t peak_f32_to_fp8(float f, int man, int bias, uint8_t max_bits, float max) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7Fu;
    x &= 0x7fffffffu;
    float a;
    memcpy(&a, &x, 4);
    if (a >= max) return (uint8_t)(sign | max_bits);
    int e = (int)(x >> 23) - 127;
    if (e < 1 - bias) e = 1 - bias;
    double qd = (double)a * peak_pow2(man - e); /* exact: a power-of-two scaling */
    uint32_t q = (uint32_t)qd;
    double rem = qd - (double)q;
    if (rem > 0.5 || (rem == 0.5 && (q & 1u))) q++;
    uint32_t biased = q >= (1u << man) ? (uint32_t)(e + bias) : 0u;
    uint32_t bits = biased ? (biased << man) + (q - (1u << man)) : q;
    return (uint8_t)(sign | bits);
}

static float peak_fp8_to_f32(uint8_t b, int man, int bias, int ieee) {
    int exp = (b & 0x7F) >> man, top = (1 << (7 - man)) - 1;
    double m = (double)(b & ((1 << man) - 1)), s = (b & 0x80) ? -1.0 : 1.0;
    uint32_t nan = 0x7fc00000u, inf = 0x7f800000u | ((uint32_t)(b & 0x80) << 24);
    float special;
    if ((ieee && exp == top) || (!ieee && (b & 0x7F) == 0x7F)) {
        memcpy(&special, (ieee && m == 0.0) ? &inf : &nan, 4);
        return special;
    }
    double v = exp == 0 ? m * peak_pow2(1 - bias - man) : (1.0 + m * peak_pow2(-man)) * peak_pow2(exp - bias);
    return (float)(s * v);
}

static size_t peak_elem_size(int dtype) {
    if (dtype == PEAK_E4M3 || dtype == PEAK_E5M2) return 1;
    return (dtype == PEAK_F16 || dtype == PEAK_BF16) ? 2 : 4;
}

static void peak_store(void *dst, int dtype, size_t i, double v) {
    switch (dtype) {
    case PEAK_F32: { float f = (float)v; memcpy((char *)dst + 4 * i, &f, 4); break; }
    case PEAK_F16: { uint16_t h = peak_f32_to_f16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case PEAK_BF16: { uint16_t h = peak_f32_to_bf16((float)v); memcpy((char *)dst + 2 * i, &h, 2); break; }
    case PEAK_I32: { int32_t n = (int32_t)v; memcpy((char *)dst + 4 * i, &n, 4); break; }
    case PEAK_E4M3: ((uint8_t *)dst)[i] = peak_f32_to_fp8((float)v, 3, 7, 0x7Eu, 448.0f); break;
    case PEAK_E5M2: ((uint8_t *)dst)[i] = peak_f32_to_fp8((float)v, 2, 15, 0x7Bu, 57344.0f); break;
    default: { uint32_t n = (uint32_t)v; memcpy((char *)dst + 4 * i, &n, 4); break; }
    }
}

static double peak_load(const void *src, int dtype, size_t i) {
    switch (dtype) {
    case PEAK_F32: { float f; memcpy(&f, (const char *)src + 4 * i, 4); return f; }
    case PEAK_F16: { uint16_t h; memcpy(&h, (const char *)src + 2 * i, 2); return peak_f16_to_f32(h); }
    case PEAK_BF16: { uint16_t h; memcpy(&h, (const char *)src + 2 * i, 2); return peak_bf16_to_f32(h); }
    case PEAK_I32: { int32_t n; memcpy(&n, (const char *)src + 4 * i, 4); return n; }
    case PEAK_E4M3: return peak_fp8_to_f32(((const uint8_t *)src)[i], 3, 7, 0);
    case PEAK_E5M2: return peak_fp8_to_f32(((const uint8_t *)src)[i], 2, 15, 1);
    default: { uint32_t n; memcpy(&n, (const char *)src + 4 * i, 4); return n; }
    }
}

/* Element i's value before outliers, as peak_spec's HostArray::init draws it. */
static double peak_draw(int dtype, int init, size_t i, uint64_t *s, double scale, double offset, int64_t lo, int64_t hi) {
    switch (init) {
    case PEAK_ONES: return 1.0;
    case PEAK_ARANGE: return (double)i;
    case PEAK_RANDOM:
        if (dtype == PEAK_I32) return (double)((int64_t)(peak_next(s) % 201u) - 100);
        if (dtype == PEAK_U32) return (double)(peak_next(s) % 101u);
        return (double)peak_unit_f32(s);
    /* Distributions are rounded to float first, as peak does. */
    case PEAK_UNIFORM: return (double)(float)(offset + peak_mul(scale, peak_unit_f64(s)));
    case PEAK_NORMAL: return (double)(float)(offset + peak_mul(scale, peak_normal(s)));
    case PEAK_INTEGERS: return (double)(lo + (int64_t)(peak_next(s) % (uint64_t)(hi - lo)));
    default: return 0.0;
    }
}

/* Choose a row's outlier entries: the first `count` places of a partial Fisher-Yates shuffle. */
static void peak_choose_outliers(uint64_t *o, size_t *order, unsigned char *chosen, size_t row, size_t count) {
    for (size_t j = 0; j < row; ++j) { order[j] = j; chosen[j] = 0; }
    for (size_t j = 0; j < count; ++j) {
        size_t pick = j + (size_t)(peak_next(o) % (uint64_t)(row - j)), t = order[j];
        order[j] = order[pick];
        order[pick] = t;
        chosen[order[j]] = 1;
    }
}

/* The manifest's init, its expressions evaluated by peak: uniform and normal take scale and
 * offset, integers are drawn from [lo, hi), and row > 0 multiplies `outliers` entries of
 * every row of `row` elements by outlier_scale (their places drawn from a second stream). */
static void *peak_host_array_fill(int dtype, size_t count, int init, uint64_t seed, double scale, double offset,
                                  int64_t lo, int64_t hi, size_t row, size_t outliers, double outlier_scale) {
    void *p = malloc(count * peak_elem_size(dtype) + 1);
    size_t *order = (size_t *)malloc(row * sizeof(size_t) + 1);
    unsigned char *chosen = (unsigned char *)malloc(row + 1);
    if (!p || !order || !chosen) { fprintf(stderr, "error: out of host memory\n"); exit(1); }
    uint64_t s = seed, o = seed ^ 0x6F75746C69657273ull; /* "outliers" */
    for (size_t i = 0; i < count; ++i) {
        double v = peak_draw(dtype, init, i, &s, scale, offset, lo, hi);
        if (row) {
            if (i % row == 0) peak_choose_outliers(&o, order, chosen, row, outliers);
            if (chosen[i % row]) v = (double)(float)(v * outlier_scale);
        }
        if (dtype == PEAK_BF16 && init <= PEAK_ARANGE && !row) {
            uint16_t h = peak_f64_to_bf16_legacy(v);
            memcpy((char *)p + 2 * i, &h, 2);
        } else {
            peak_store(p, dtype, i, v);
        }
    }
    free(order);
    free(chosen);
    return p;
}

/* The four original inits: zeros, ones, random (peak's values for this seed) or arange. */
static void *peak_host_array(int dtype, size_t count, int init, uint64_t seed) {
    return peak_host_array_fill(dtype, count, init, seed, 1.0, 0.0, 0, 0, 0, 0, 1.0);
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

/* `nvcc`: a CUDA harness (PEAK_NVRTC) launches nvcc's build of the kernels rather than the
   one NVRTC makes as peak does. */
typedef struct { int warmup, reps; const char *dump; const char *kernel; int nvcc; } peak_options;

static peak_options peak_parse(int argc, char **argv) {
    peak_options o = { 3, 20, NULL, NULL, 0 };
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--warmup") && i + 1 < argc) o.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) o.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) o.dump = argv[++i];
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) o.kernel = argv[++i];
#ifdef PEAK_NVRTC
        else if (!strcmp(argv[i], "--nvcc")) o.nvcc = 1;
#endif
        else {
#ifdef PEAK_NVRTC
            fprintf(stderr, "usage: %s [--warmup N] [--reps N] [--dump DIR] [--kernel FILE] [--nvcc]\n"
                            "  --dump DIR   write each output array after the first run to DIR/NAME.bin (raw little-endian)\n"
                            "  --nvcc       time nvcc's build of the kernel file, not NVRTC's (the one peak times)\n", argv[0]);
#else
            fprintf(stderr, "usage: %s [--warmup N] [--reps N] [--dump DIR] [--kernel FILE]\n"
                            "  --dump DIR   write each output array after the first run to DIR/NAME.bin (raw little-endian)\n", argv[0]);
#endif
            exit(2);
        }
    }
    if (o.reps < 1) o.reps = 1;
    if (o.warmup < 0) o.warmup = 0;
    return o;
}

/* The whole text file at `path` (the kernel file the harness compiles at run time). */
static char *peak_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "error: cannot open the kernel file %s (pass --kernel FILE)\n", path); exit(1); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = (char *)malloc((size_t)size + 1);
    if (fread(text, 1, (size_t)size, f) != (size_t)size) { fprintf(stderr, "error: cannot read %s\n", path); exit(1); }
    text[size] = 0;
    fclose(f);
    return text;
}

/* The path of `file` in the folder of the program `argv0`. */
static const char *peak_next_to(const char *argv0, const char *file) {
    static char path[4096];
    const char *slash = strrchr(argv0, '/');
    if (!slash) return file;
    snprintf(path, sizeof path, "%.*s/%s", (int)(slash - argv0), argv0, file);
    return path;
}
