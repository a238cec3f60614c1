// @peak macros
// @peak device
extern "C" __global__ void attention(const float* Q, const float* K, const float* V, float* O, int batch, int seq, int dim) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < batch * seq) {
        int b = row / seq;
        const float* q = Q + row * dim;
        const float* k = K + b * seq * dim;
        const float* v = V + b * seq * dim;
        float* o = O + row * dim;
        float scale = 1.0f / sqrtf((float)dim);

        float m = -__int_as_float(0x7f800000);
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            m = fmaxf(m, s * scale);
        }
        float sum = 0.0f;
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            sum += expf(s * scale - m);
        }
        for (int d = 0; d < dim; ++d) {
            o[d] = 0.0f;
        }
        for (int j = 0; j < seq; ++j) {
            float s = 0.0f;
            for (int d = 0; d < dim; ++d) {
                s += q[d] * k[j * dim + d];
            }
            float p = expf(s * scale - m) / sum;
            for (int d = 0; d < dim; ++d) {
                o[d] += p * v[j * dim + d];
            }
        }
    }
}
// @peak host
// One work-item per (b, i) output row; BLOCK_X rows per work-group.
launch("attention", [ceil_div(batch * seq, BLOCK_X)], [BLOCK_X], 0, Q, K, V, O, batch, seq, dim);
