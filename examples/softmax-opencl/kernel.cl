// @peak macros
// @peak device
__kernel void softmax(__global const float* X, __global float* Y, int rows, int cols) {
    int row = get_global_id(0);
    if (row < rows) {
        float m = -INFINITY;
        for (int c = 0; c < cols; ++c) {
            m = fmax(m, X[row * cols + c]);
        }
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
            sum += exp(X[row * cols + c] - m);
        }
        for (int c = 0; c < cols; ++c) {
            Y[row * cols + c] = exp(X[row * cols + c] - m) / sum;
        }
    }
}
// @peak host
// One work-item per row; BLOCK_X rows per work-group.
launch("softmax", [ceil_div(rows, BLOCK_X)], [BLOCK_X], 0, X, Y, rows, cols);
