// @peak macros
// @peak device
extern "C" __global__ void scale(const float* X, float* Y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) Y[i] = 2.0f * X[i];
    if (i == n - 1) Y[n] = 0.0f;
}
// @peak host
launch("scale", ceil_div(n, BLOCK), BLOCK, 0, X, Y, n);
