"""Hand experiment (not a recorded step): the fp32 NT line's Interior-Loop tip with its epilogue
rewritten. In the tip every output element is `if (row < M && col < N) out[...] = acc + bias[col]`:
nvdisasm of NVRTC's cubin shows each of a thread's 128 stores preceded by its own load of bias
(the compiler cannot keep bias in a register across stores to `out`, which may alias it), the
store waiting on that load, and a bounds test and branch per element. Here the per-column
operand is read once per column into registers, a block wholly inside C (N a multiple of
CHUNK_X) stores without tests, and each run of CHUNK_X consecutive columns as one float2/float4.
Usage: python3 epilogue-vector.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu)."""
import sys

path = f"{sys.argv[1]}/kernel.cu"
k = open(path).read()
epi = "#define EPILOGUE(acc, r, c) ((acc) + bias[(c)]) // the value stored at C[r, c] from the sum acc\n"
assert k.count(epi) == 1
k = k.replace(epi, epi + "#define EPILOGUE_COL(c) (bias[(c)])\n#define EPILOGUE_WITH(acc, col, r, c) ((acc) + (col))\n")
old = """#if K_SPLITS == 1
                if (C_ROW(i) < GEMM_M && C_COL(j) < GEMM_N) C_AT(C_ROW(i), C_COL(j)) = EPILOGUE(acc[i][j], C_ROW(i), C_COL(j));
#else"""
assert k.count(old) == 1
# The tip's store loop, kept for blocks on an edge: the per-column operand from registers.
k = k.replace(old, """#if K_SPLITS == 1
                if (C_ROW(i) < GEMM_M && C_COL(j) < GEMM_N) C_AT(C_ROW(i), C_COL(j)) = EPILOGUE_WITH(acc[i][j], colv[j], C_ROW(i), C_COL(j));
#else""")
loop = "    #pragma unroll\n    for (int i = 0; i < TRD_Y; ++i) {\n        #pragma unroll\n        for (int cj = 0; cj < TRD_X / CHUNK_X; ++cj) {"
assert k.count(loop) == 1
head = """#if K_SPLITS == 1
    float colv[TRD_X];   // the per-column operand of EPILOGUE, once per column
    #pragma unroll
    for (int j = 0; j < TRD_X; ++j) colv[j] = (C_COL(j) < GEMM_N) ? EPILOGUE_COL(C_COL(j)) : 0.0f;
    const bool c_inside = tile_row0 + TILE_M <= GEMM_M && tile_col0 + TILE_N <= GEMM_N
        && (CHUNK_X == 2 || CHUNK_X == 4) && GEMM_N % CHUNK_X == 0 && ((size_t)out) % (CHUNK_X * sizeof(float)) == 0;
    if (c_inside) {
        #pragma unroll
        for (int i = 0; i < TRD_Y; ++i) {
            #pragma unroll
            for (int cj = 0; cj < TRD_X / CHUNK_X; ++cj) {
                const int j0 = cj * CHUNK_X;
                float* dst = &C_AT(C_ROW(i), C_COL(j0));
#if CHUNK_X == 4
                *reinterpret_cast<float4*>(dst) = make_float4(EPILOGUE_WITH(acc[i][j0], colv[j0], C_ROW(i), C_COL(j0)), EPILOGUE_WITH(acc[i][j0 + 1], colv[j0 + 1], C_ROW(i), C_COL(j0 + 1)),
                                                              EPILOGUE_WITH(acc[i][j0 + 2], colv[j0 + 2], C_ROW(i), C_COL(j0 + 2)), EPILOGUE_WITH(acc[i][j0 + 3], colv[j0 + 3], C_ROW(i), C_COL(j0 + 3)));
#elif CHUNK_X == 2
                *reinterpret_cast<float2*>(dst) = make_float2(EPILOGUE_WITH(acc[i][j0], colv[j0], C_ROW(i), C_COL(j0)), EPILOGUE_WITH(acc[i][j0 + 1], colv[j0 + 1], C_ROW(i), C_COL(j0 + 1)));
#endif
            }
        }
    } else
#endif
    {
"""
k = k.replace(loop, head + loop)
# The tip's loop closes the else: the function's last brace closes the kernel.
end = """            }
        }
    }
}
"""
at = k.index(loop) + len(loop)
close = k.index(end, at) + len(end) - 2
k = k[:close] + "    }\n" + k[close:]
open(path, "w").write(k)
