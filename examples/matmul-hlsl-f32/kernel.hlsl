// @peak macros
// @peak device
// Buffers bind by position among the launch's buffer arguments (register number = binding;
// t and u registers share one numbering). Scalars arrive in the push-constant block.
StructuredBuffer<float> A : register(t0);
StructuredBuffer<float> B : register(t1);
RWStructuredBuffer<float> C : register(u2);

struct Params {
    int n;
};
[[vk::push_constant]] ConstantBuffer<Params> p;

[numthreads(BLOCK_X, BLOCK_Y, 1)]
void main(uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID) {
    int n = p.n;
    int col = (int)(gid.x * BLOCK_X + gtid.x);
    int row = (int)(gid.y * BLOCK_Y + gtid.y);
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += A[row * n + k] * B[k * n + col];
        }
        C[row * n + col] = acc;
    }
}
// @peak host
// One thread per element of C; BLOCK_X x BLOCK_Y threads per group, fixed by [numthreads].
launch("main", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
