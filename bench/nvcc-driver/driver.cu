// The "one nvcc executable per variant" way of tuning, as Python autotuners that shell
// out to nvcc do it, for comparison with peak's in-process NVRTC + worker pipeline on the
// same kernel and the same space. bench/h200-tuning.sh builds this once per variant:
//
//   nvcc -O3 -arch=sm_90 -DBX=.. -DBY=.. ... -include kernel.inc driver.cu -o variant
//   ./variant N REFERENCE_FILE
//
// where kernel.inc is the context's macros and device regions. Each run does what peak
// does per variant: fill the inputs, run once, check the output (the first variant writes
// the reference, the others compare with it), one warm-up run, seven timed runs with
// events; it prints one JSON line.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { printf("{\"error\": \"%s: %s\"}\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

static float next_value(uint64_t& state) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((state >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s N REFERENCE_FILE\n", argv[0]); return 2; }
    const int n = atoi(argv[1]);
    const size_t elems = (size_t)n * n;
    std::vector<float> hA(elems), hB(elems), hC(elems);
    uint64_t state = 1;
    for (auto& v : hA) v = next_value(state);
    for (auto& v : hB) v = next_value(state);
    float *A, *B, *C;
    CHECK(cudaMalloc(&A, elems * sizeof(float)));
    CHECK(cudaMalloc(&B, elems * sizeof(float)));
    CHECK(cudaMalloc(&C, elems * sizeof(float)));
    CHECK(cudaMemcpy(A, hA.data(), elems * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(B, hB.data(), elems * sizeof(float), cudaMemcpyHostToDevice));
    const dim3 block(BX, BY), grid(n / (BX * TX), n / (BY * TY));

    sgemm<<<grid, block>>>(A, B, C, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(hC.data(), C, elems * sizeof(float), cudaMemcpyDeviceToHost));
    double rel_error = 0.0;
    if (FILE* f = fopen(argv[2], "rb")) {
        std::vector<float> ref(elems);
        size_t got = fread(ref.data(), sizeof(float), elems, f);
        fclose(f);
        if (got != elems) { printf("{\"error\": \"short reference\"}\n"); return 1; }
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < elems; ++i) { double d = (double)hC[i] - ref[i]; num += d * d; den += (double)ref[i] * ref[i]; }
        rel_error = std::sqrt(num / den);
    } else if (FILE* out = fopen(argv[2], "wb")) {
        fwrite(hC.data(), sizeof(float), elems, out);
        fclose(out);
    }

    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    sgemm<<<grid, block>>>(A, B, C, n);
    std::vector<float> times;
    for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaEventRecord(start));
        sgemm<<<grid, block>>>(A, B, C, n);
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    printf("{\"median_ms\": %.6f, \"rel_error\": %.3e}\n", times[times.size() / 2], rel_error);
    return 0;
}
