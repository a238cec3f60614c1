// @peak macros
// @peak device
extern "C" __global__ void scale(const float* X, float* Y, int n) {
    extern __shared__ float s[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = (i < n) ? X[i] : 0.0f;
    // Missing __syncthreads(): the neighbour's value may not be written yet.
    float right = s[(threadIdx.x + 1) % blockDim.x];
    if (i < n) Y[i] = 2.0f * X[i] + 0.0f * right;
}
// @peak host
launch("scale", ceil_div(n, BLOCK), BLOCK, BLOCK * 4, X, Y, n);
