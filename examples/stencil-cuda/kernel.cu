// @peak macros
// @peak device
extern "C" __global__ void blur3x3(const float* In, float* Out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (y < h && x < w) {
        float acc = 0.0f;
        for (int dy = -1; dy <= 1; ++dy) {
            for (int dx = -1; dx <= 1; ++dx) {
                int yy = min(max(y + dy, 0), h - 1);
                int xx = min(max(x + dx, 0), w - 1);
                float weight = (float)((2 - abs(dy)) * (2 - abs(dx))) / 16.0f;
                acc += weight * In[yy * w + xx];
            }
        }
        Out[y * w + x] = acc;
    }
}
// @peak host
// One work-item per output pixel; BLOCK_X x BLOCK_Y work-items per work-group.
launch("blur3x3", [ceil_div(w, BLOCK_X), ceil_div(h, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, In, Out, h, w);
