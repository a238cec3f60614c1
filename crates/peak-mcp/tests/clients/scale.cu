#include <stdio.h>
__global__ void scale(const float* x, float* y, int n, float k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = k * x[i];
}
