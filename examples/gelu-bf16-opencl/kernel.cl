// @peak macros
// @peak device
// bf16 is the top half of an f32; round to nearest even on the way back.
inline float bf16_to_float(ushort h) { return as_float(((uint)h) << 16); }
inline ushort float_to_bf16(float f) {
    uint u = as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

__kernel void gelu(__global ushort* out, __global const ushort* inp, int N) {
    int i = get_global_id(0);
    if (i < N) {
        float x = bf16_to_float(inp[i]);
        float cube = 0.044715f * x * x * x;
        out[i] = float_to_bf16(0.5f * x * (1.0f + tanh(0.7978845608f * (x + cube))));
    }
}
// @peak host
// One work-item per element; BLOCK_X work-items per work-group.
launch("gelu", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, N);
