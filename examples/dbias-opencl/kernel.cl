// @peak macros
// @peak device
// Bias gradient of a linear layer, as llm.c's naive matmul_backward_bias: dbias[c] is
// the sum of column c of dout (BT rows, OC columns, row-major). One work-item per column,
// a loop down the rows.
__kernel void matmul_backward_bias(__global float* dbias, __global const float* dout, int BT, int OC) {
    int c = get_global_id(0);
    if (c < OC) {
        float sum = 0.0f;
        for (int r = 0; r < BT; r++) {
            sum += dout[r * OC + c];
        }
        dbias[c] = sum;
    }
}
// @peak host
// One work-item per column, BLOCK_X columns per work-group.
launch("matmul_backward_bias", ceil_div(OC, BLOCK_X), BLOCK_X, 0, dbias, dout, BT, OC);
