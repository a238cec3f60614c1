// @peak macros
#include <cuda_bf16.h>
// @peak device
extern "C" __global__ void gelu(__nv_bfloat16* out, const __nv_bfloat16* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float x = __bfloat162float(inp[i]);
        float cube = 0.044715f * x * x * x;
        out[i] = __float2bfloat16(0.5f * x * (1.0f + tanhf(0.7978845608f * (x + cube))));
    }
}
// @peak host
// One thread per element; BLOCK_X threads per block.
launch("gelu", ceil_div(N, BLOCK_X), BLOCK_X, 0, out, inp, N);
