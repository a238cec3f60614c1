// @peak macros
// @peak device
// Fused softmax + cross-entropy forward, as llm.c's naive fused_classifier: for row i of
// the logits (BT rows of V), loss[i] = logsumexp(logits[i, :]) - logits[i, targets[i]],
// i.e. -log(softmax(logits[i, :])[targets[i]]) without writing the probabilities. One
// work-item per row: a loop for the maximum, a loop for the sum of exponentials, then
// the gather of the target's logit.
__kernel void fused_classifier(__global float* losses, __global const float* logits, __global const int* targets, int BT, int V) {
    int i = get_global_id(0);
    if (i < BT) {
        __global const float* x = logits + (long)i * V;
        float m = -INFINITY;
        for (int v = 0; v < V; v++) {
            m = fmax(m, x[v]);
        }
        float sum = 0.0f;
        for (int v = 0; v < V; v++) {
            sum += exp(x[v] - m);
        }
        losses[i] = log(sum) + m - x[targets[i]];
    }
}
// @peak host
// One work-item per row, BLOCK_X rows per work-group.
launch("fused_classifier", ceil_div(BT, BLOCK_X), BLOCK_X, 0, losses, logits, targets, BT, V);
