"""Hand experiment (not a recorded step, and its variants compute wrong outputs on purpose):
what the tile switch of the 16-bit Hopper tip costs, part by part. The rows short of 95% at
K = 768 fit a fixed cost a tile of about 3.6 us against cuBLASLt's 2.5 (notes of
gemm-nt-bias-cuda-bf16, Steps 19-21). A tuning parameter ABLATE (0 is the tip unchanged)
takes one part of the epilogue away at a time, so that timing each against cuBLASLt in one
process bounds what that part costs:
  1  no bias: the per-column operands are zero (no loads of bias at the tile's end, from global
     memory or, after Column-Stage, from the stage's slot);
  2  the tile staged through the ring but never stored (no TMA store, no wait on one);
  3  no epilogue at all: the accumulators are drained and the tile's last stage released,
     then the next tile starts.
Usage: python3 tile-switch.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu and peak.toml)."""
import sys

from source_edit import Source, add_tuning

ctx = sys.argv[1]
k = Source(f"{ctx}/kernel.cu")
# The per-column operands, loaded from global memory (before Column-Stage) or from the stage's slot (after).
read = "EPILOGUE_COL_STAGED(col_slot, gc - bx * TILE_N)" if "EPILOGUE_COL_STAGED(col_slot, gc - bx * TILE_N)" in k.text else "EPILOGUE_COL(gc)"
k.sub(f"colv[j][e] = (gc < GEMM_N) ? {read} : 0.0f;", f"colv[j][e] = (ABLATE != 1 && gc < GEMM_N) ? {read} : 0.0f;")
# The whole epilogue loop (boxes of this warpgroup's rows) sits under `if (ABLATE != 3)`.
head = "            const bool interior = by * TILE_M + 64 * (wg * FRAG_M) + 64 * FRAG_M <= GEMM_M && bx * TILE_N + TILE_N <= GEMM_N;\n"
k.sub(head, head + "            if (ABLATE != 3) {\n")
tail = """                    ++boxes;
                }
            }
"""
k.sub(tail, tail + "            }\n")
k.sub("if (WG_THREAD == 0) peak_tma_store_wait_read<EPI_BOXES - 1>();",
      "if (ABLATE != 2 && WG_THREAD == 0) peak_tma_store_wait_read<EPI_BOXES - 1>();")
k.sub("""                    if (WG_THREAD == 0) {
                        peak_tma_store_2d(""", """                    if (ABLATE != 2 && WG_THREAD == 0) {
                        peak_tma_store_2d(""")
k.save()
add_tuning(f"{ctx}/peak.toml", "ABLATE", [0, 1, 2, 3], before="[tuning.NUM_STAGES]")
