// @peak macros
// @peak device
// half is a 16-bit type here (glslang --hlsl-enable-16bit-types / DXC -enable-16bit-types);
// running this needs a device with shaderFloat16 and storageBuffer16BitAccess.
StructuredBuffer<half> A : register(t0);
StructuredBuffer<half> B : register(t1);
RWStructuredBuffer<half> C : register(u2);

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
        // Accumulate in fp32, as tensor-core and vendor fp16 GEMMs do; round once at the end.
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) {
            acc += (float)A[row * n + k] * (float)B[k * n + col];
        }
        C[row * n + col] = (half)acc;
    }
}
// @peak host
// One thread per element of C; BLOCK_X x BLOCK_Y threads per group, fixed by [numthreads].
launch("main", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
