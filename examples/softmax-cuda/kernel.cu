// @peak macros
// @peak device
extern "C" __global__ void softmax(const float* X, float* Y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float m = -__int_as_float(0x7f800000);
        for (int c = 0; c < cols; ++c) {
            m = fmaxf(m, X[row * cols + c]);
        }
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
            sum += expf(X[row * cols + c] - m);
        }
        for (int c = 0; c < cols; ++c) {
            Y[row * cols + c] = expf(X[row * cols + c] - m) / sum;
        }
    }
}
// @peak host
// One work-item per row; BLOCK_X rows per work-group.
launch("softmax", [ceil_div(rows, BLOCK_X)], [BLOCK_X], 0, X, Y, rows, cols);
