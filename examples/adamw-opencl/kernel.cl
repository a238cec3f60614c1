// @peak macros
// AdamW update, ported from llm.c's dev/cuda/adamw.cu (adamw_kernel2) to OpenCL C.
// One work-item per parameter; m and v updated in place, params updated in place.
// Brought in by `peak new` from adamw.cl:
// @peak device
float lerp_(float start, float end, float weight) {
    return fma(weight, end, fma(-weight, start, start));
}

__kernel void adamw_kernel2(__global float* params_memory, __global const float* grads_memory,
                            __global float* m_memory, __global float* v_memory, long num_parameters,
                            float learning_rate, float beta1, float beta2, float beta1_correction,
                            float beta2_correction, float eps, float weight_decay) {
    int i = get_global_id(0);
    if (i >= num_parameters) return;
    float grad = grads_memory[i];
    float m = m_memory[i];
    float v = v_memory[i];
    // update the first moment (momentum)
    m = lerp_(grad, m, beta1);
    m_memory[i] = m;
    // update the second moment (RMSprop)
    v = lerp_(grad * grad, v, beta2);
    v_memory[i] = v;
    m /= beta1_correction;  // m_hat
    v /= beta2_correction;  // v_hat
    params_memory[i] -= learning_rate * (m / (sqrt(v) + eps) + weight_decay * params_memory[i]);
}
// @peak host
// Proposed by `peak new` from how `adamw_kernel2` indexes its threads:
//   i = get_global_id(0), guarded by `i >= num_parameters`
// so one thread per `i` below num_parameters, BLOCK_X threads per block.
// Float parameters, passed by name from [scalars] in peak.toml (given with --scalar): learning_rate = 0.001, beta1 = 0.9, beta2 = 0.999, beta1_correction = 0.1, beta2_correction = 0.001, eps = 1.0e-8, weight_decay = 0.01.
launch("adamw_kernel2", ceil_div(num_parameters, BLOCK_X), BLOCK_X, 0, params_memory, grads_memory, m_memory, v_memory, i64(num_parameters), learning_rate, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay);
