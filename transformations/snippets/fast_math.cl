// Fast-Math: the f32 functions the kernel calls, precise (FAST_MATH 0: tanh, exp, ... as
// before) or the device's native approximations (FAST_MATH 1: native_exp, native_log,
// native_sin, native_cos; tanh from native_exp on an argument clamped to +-9, where tanh
// is 1 to f32 precision).
#ifndef PEAK_FAST_MATH
#define PEAK_FAST_MATH
#if FAST_MATH
inline float peak_tanhf(float x) {
    const float e = native_exp(2.0f * clamp(x, -9.0f, 9.0f));
    return native_divide(e - 1.0f, e + 1.0f);
}
inline float peak_expf(float x) { return native_exp(x); }
inline float peak_logf(float x) { return native_log(x); }
inline float peak_sinf(float x) { return native_sin(x); }
inline float peak_cosf(float x) { return native_cos(x); }
inline float peak_powf(float x, float y) { return pow(x, y); }
#else
inline float peak_tanhf(float x) { return tanh(x); }
inline float peak_expf(float x) { return exp(x); }
inline float peak_logf(float x) { return log(x); }
inline float peak_sinf(float x) { return sin(x); }
inline float peak_cosf(float x) { return cos(x); }
inline float peak_powf(float x, float y) { return pow(x, y); }
#endif
#endif
