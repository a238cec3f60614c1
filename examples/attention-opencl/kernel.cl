// @peak macros
// @peak device
__kernel void attention(__global const float* Q, __global const float* K, __global const float* V, __global float* O,
                        int batch, int seq, int dim) {
    int row = get_global_id(0);
    if (row < batch * seq) {
        int b = row / seq;
        __global const float* q = Q + row * dim;
        __global const float* k = K + b * seq * dim;
        __global const float* v = V + b * seq * dim;
        __global float* o = O + row * dim;
        float scale = 1.0f / sqrt((float)dim);

        float m = -INFINITY;
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            m = fmax(m, s * scale);
        }
        float sum = 0.0f;
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            sum += exp(s * scale - m);
        }
        for (int d = 0; d < dim; ++d) {
            o[d] = 0.0f;
        }
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            float p = exp(s * scale - m) / sum;
            for (int d = 0; d < dim; ++d) {
                o[d] += p * v[j * dim + d];
            }
        }
    }
}
// @peak host
// One work-item per (b, i) output row; BLOCK_X rows per work-group.
launch("attention", [ceil_div(batch * seq, BLOCK_X)], [BLOCK_X], 0, Q, K, V, O, batch, seq, dim);
