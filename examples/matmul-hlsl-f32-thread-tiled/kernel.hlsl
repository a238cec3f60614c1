// @peak macros
// HAND-WRITTEN stage of the paper's HLSL sequence (Refactor -> TB-Tiling -> Thread-Tiling),
// not produced by an LLM: a person wrote it as a reference for what those transformations
// yield.
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
// Thread-Tiling: a group covers TILE_M x TILE_N outputs of C.
#define TILE_M (BLOCK_Y * TRD_Y_DIM)
#define TILE_N (BLOCK_X * TRD_X_DIM)
// @peak device
StructuredBuffer<float> A : register(t0);
StructuredBuffer<float> B : register(t1);
RWStructuredBuffer<float> C : register(u2);

struct Params {
    int n;
};
[[vk::push_constant]] ConstantBuffer<Params> p;

// TB-Tiling stages TILE_M x TILE_K_SIZE of A and TILE_K_SIZE x TILE_N of B per step along K.
groupshared float As[TILE_M][TILE_K_SIZE];
groupshared float Bs[TILE_K_SIZE][TILE_N];

// Thread-Tiling: each thread accumulates TRD_Y_DIM x TRD_X_DIM outputs in registers, at
// rows THREAD_Y + y * BLOCK_Y and columns THREAD_X + x * BLOCK_X, so neighbouring threads
// read neighbouring Bs columns and write neighbouring C columns.
[numthreads(BLOCK_X, BLOCK_Y, 1)]
void main(uint3 gid : SV_GroupID, uint3 gtid : SV_GroupThreadID, uint gi : SV_GroupIndex) {
    int n = p.n;
    int row0 = (int)BLOCK_IDX_Y * TILE_M;
    int col0 = (int)BLOCK_IDX_X * TILE_N;
    float acc[TRD_Y_DIM][TRD_X_DIM];
    [unroll]
    for (int y0 = 0; y0 < TRD_Y_DIM; ++y0) {
        [unroll]
        for (int x0 = 0; x0 < TRD_X_DIM; ++x0) {
            acc[y0][x0] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < n; k0 += TILE_K_SIZE) {
        for (int i = (int)LINEAR_THREAD; i < TILE_M * TILE_K_SIZE; i += NUM_THREADS) {
            As[i / TILE_K_SIZE][i % TILE_K_SIZE] = A_AT(row0 + i / TILE_K_SIZE, k0 + i % TILE_K_SIZE);
        }
        for (int j = (int)LINEAR_THREAD; j < TILE_K_SIZE * TILE_N; j += NUM_THREADS) {
            Bs[j / TILE_N][j % TILE_N] = B_AT(k0 + j / TILE_N, col0 + j % TILE_N);
        }
        GroupMemoryBarrierWithGroupSync();
        [unroll]
        for (int k = 0; k < TILE_K_SIZE; ++k) {
            float a[TRD_Y_DIM];
            float b[TRD_X_DIM];
            [unroll]
            for (int y = 0; y < TRD_Y_DIM; ++y) {
                a[y] = As[THREAD_Y + y * BLOCK_Y][k];
            }
            [unroll]
            for (int x = 0; x < TRD_X_DIM; ++x) {
                b[x] = Bs[k][THREAD_X + x * BLOCK_X];
            }
            [unroll]
            for (int y2 = 0; y2 < TRD_Y_DIM; ++y2) {
                [unroll]
                for (int x2 = 0; x2 < TRD_X_DIM; ++x2) {
                    acc[y2][x2] = mad(a[y2], b[x2], acc[y2][x2]);
                }
            }
        }
        GroupMemoryBarrierWithGroupSync();
    }
    [unroll]
    for (int y3 = 0; y3 < TRD_Y_DIM; ++y3) {
        [unroll]
        for (int x3 = 0; x3 < TRD_X_DIM; ++x3) {
            C_AT(row0 + (int)THREAD_Y + y3 * BLOCK_Y, col0 + (int)THREAD_X + x3 * BLOCK_X) = acc[y3][x3];
        }
    }
}
// @peak host
// One group per TILE_M x TILE_N tile of C, BLOCK_X x BLOCK_Y threads each; the tiles
// divide n (constraints).
let tile_m = BLOCK_Y * TRD_Y_DIM;
let tile_n = BLOCK_X * TRD_X_DIM;
launch("main", [n / tile_n, n / tile_m], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
