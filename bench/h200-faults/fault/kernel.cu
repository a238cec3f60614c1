// @peak macros
// @peak device
extern "C" __global__ void scale(const float* X, float* Y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (MODE == 1 && i == 0) { *(volatile float*)(0x10) = 1.0f; }
    if (i < n) Y[i] = 2.0f * X[i];
}
// @peak host
launch("scale", ceil_div(n, BLOCK), BLOCK, 0, X, Y, n);
