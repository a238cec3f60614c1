// @peak macros
// HAND-WRITTEN stage of the paper's HLSL sequence (Refactor -> TB-Tiling), not produced by
// an LLM: a person wrote it as a reference for what those two transformations yield.
// Refactor: thread and group indices and array accesses as macros.
#define THREAD_X gtid.x
#define THREAD_Y gtid.y
#define LINEAR_THREAD gi
#define BLOCK_IDX_X gid.x
#define BLOCK_IDX_Y gid.y
#define A_AT(r, c) A[(r) * n + (c)]
#define B_AT(r, c) B[(r) * n + (c)]
#define C_AT(r, c) C[(r) * n + (c)]
#define NUM_THREADS (BLOCK_X * BLOCK_Y)
// @peak device
StructuredBuffer<float> A : register(t0);
StructuredBuffer<float> B : register(t1);
RWStructuredBuffer<float> C : register(u2);

struct Params {
    int n;
};
[[vk::push_constant]] ConstantBuffer<Params> p;

// TB-Tiling: each group computes a BLOCK_Y x BLOCK_X tile of C. Per step along K, the
// group stages a BLOCK_Y x TILE_K_SIZE tile of A and a TILE_K_SIZE x BLOCK_X tile of B in
// groupshared memory, loaded cooperatively by all threads (consecutive threads read
// consecutive addresses), and every thread reads its row and column from there.
groupshared float As[BLOCK_Y][TILE_K_SIZE];
groupshared float Bs[TILE_K_SIZE][BLOCK_X];

[numthreads(BLOCK_X, BLOCK_Y, 1)]
void main(uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID, uint gi : SV_GroupIndex) {
    int n = p.n;
    int row0 = (int)BLOCK_IDX_Y * BLOCK_Y;
    int col0 = (int)BLOCK_IDX_X * BLOCK_X;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE_K_SIZE) {
        for (int i = (int)LINEAR_THREAD; i < BLOCK_Y * TILE_K_SIZE; i += NUM_THREADS) {
            As[i / TILE_K_SIZE][i % TILE_K_SIZE] = A_AT(row0 + i / TILE_K_SIZE, k0 + i % TILE_K_SIZE);
        }
        for (int j = (int)LINEAR_THREAD; j < TILE_K_SIZE * BLOCK_X; j += NUM_THREADS) {
            Bs[j / BLOCK_X][j % BLOCK_X] = B_AT(k0 + j / BLOCK_X, col0 + j % BLOCK_X);
        }
        GroupMemoryBarrierWithGroupSync();
        [unroll]
        for (int k = 0; k < TILE_K_SIZE; ++k) {
            acc += As[THREAD_Y][k] * Bs[k][THREAD_X];
        }
        GroupMemoryBarrierWithGroupSync();
    }
    C_AT(row0 + (int)THREAD_Y, col0 + (int)THREAD_X) = acc;
}
// @peak host
// One group per BLOCK_Y x BLOCK_X tile of C; n is a multiple of both (constraints).
launch("main", [n / BLOCK_X, n / BLOCK_Y], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
