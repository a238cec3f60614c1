// Uses every HLSL snippet once. glslang does not follow #include here, so
// compile_snippets.sh prepends the snippet files instead.
StructuredBuffer<float> A : register(t0);
StructuredBuffer<half> H : register(t1);
RWStructuredBuffer<float> C : register(u2);
groupshared float t[8][16];
groupshared float tt[16][8];
groupshared half th[8][16];
groupshared float ta[16];
groupshared half tha[16];
groupshared float tl[8][16];
groupshared float tc[16][8];
groupshared half tlh[8][16];
#define A_AT(r, c) A[(r) * n + (c)]
#define W_AT(r, c) A[(c) * n + (r)]
#define H_AT(r, c) H[(r) * n + (c)]
[numthreads(64, 1, 1)]
void main(uint3 gtid : SV_GroupThreadID, uint gi : SV_GroupIndex) {
    int n = 100;
    PEAK_TILE_COPY(t, A, n, 0, 0, 8, 16, n, n, gi, 64);
    PEAK_TILE_COPY_T(tt, A, n, 0, 0, 8, 16, n, n, gi, 64);
    PEAK_TILE_COPY(th, H, n, 0, 0, 8, 16, n, n, gi, 64);
    PEAK_TILE_LOAD(tl, A_AT, 0, 0, 8, 16, n, n, gi, 64);
    PEAK_TILE_LOAD_COLMAJOR(tc, W_AT, 0, 0, 16, 8, n, n, gi, 64);
    PEAK_TILE_LOAD(tlh, H_AT, 0, 0, 8, 16, n, n, gi, 64);
    PEAK_ASYNC_COPY(ta[gi % 16], A, gi, gi < (uint)n);
    PEAK_ASYNC_COPY(tha[gi % 16], H, gi, gi < (uint)n);
    PEAK_ASYNC_COMMIT();
    PEAK_ASYNC_WAIT(0);
    GroupMemoryBarrierWithGroupSync();
    C[gi] = t[0][0] + tt[0][0] + (float)th[0][0] + ta[0] + (float)tha[0] + tl[0][0] + tc[0][0] + (float)tlh[0][0];
}
