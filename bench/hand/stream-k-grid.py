"""Hand experiment (not a recorded step): does the GEMM launch's grid shape, not the share-out,
make the replayed Stream-K step's STREAM_K = 0 slower than Warp-Tiling's tip? The Stream-K step
launches a 1-D grid; at STREAM_K = 0 it ran 3.00 ms where the Warp-Tiling tip (same SASS here,
2-D grid) ran 2.78 ms. Four contexts timed against cuBLASLt at the square fp32 tip's
configuration (WARP_X = 4), two rounds:
  warp-tiling 2-D  the replayed Warp-Tiling tip as it is;
  warp-tiling 1-D  the same kernel launched as one row of blocks (BLOCK_LIN = blockIdx.x);
  stream-k 1-D     the replayed Stream-K tip, STREAM_K = 0 and 1;
  stream-k 2-D     its launch as rows of grid_x blocks, the blocks past the last item leaving.
Usage (on the GPU machine, carry carry/gemm-shapes): OUT=dir python3 bench/hand/stream-k-grid.py"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from against_cublaslt import SQUARE_F32_TIP, timed, write  # noqa: E402
from source_edit import Source  # noqa: E402

PEAK = "carry/gemm-shapes/peak"
out = os.environ["OUT"]


def checkout(bundle, ref, into):
    subprocess.run(["rm", "-rf", into], check=True)
    subprocess.run(["git", "clone", "-q", bundle, into], check=True)
    subprocess.run(["git", "-C", into, "checkout", "-q", ref], check=True)
    return os.path.join(into, "context")


wt2 = checkout("bench/results/h200-replayed-matmul-cuda-f32-warp-tiling.bundle", "HEAD", "/tmp/skg-wt2")
wt1 = checkout("bench/results/h200-replayed-matmul-cuda-f32-warp-tiling.bundle", "HEAD", "/tmp/skg-wt1")
k = Source(f"{wt1}/matmul.cu")
k.sub('launch("matmul", [grid_x, grid_y, 1]', 'launch("matmul", [grid_x * grid_y, 1, 1]')
k.save()
sk1 = checkout("bench/results/h200-replayed-matmul-cuda-f32-stream-k.bundle", "HEAD", "/tmp/skg-sk1")
sk2 = checkout("bench/results/h200-replayed-matmul-cuda-f32-stream-k.bundle", "HEAD", "/tmp/skg-sk2")
k = Source(f"{sk2}/matmul.cu")
k.sub("    if (BLOCK_LIN >= sk_blocks) {",
      "    if (BLOCK_LIN >= sk_blocks + TILES - sk_tiles) return;   // past the last item of a whole row of blocks\n"
      "    if (BLOCK_LIN >= sk_blocks) {")
k.sub("let blocks = sk_blocks + tiles - sk_tiles;\n", "let blocks = sk_blocks + tiles - sk_tiles;\nlet rows = ceil_div(blocks, grid_x);\n")
k.sub('launch("matmul", [blocks, 1, 1]', 'launch("matmul", [grid_x, rows, 1]')
k.save()

tip = dict(SQUARE_F32_TIP, WARP_X=4)
rows = []
for rnd in range(2):
    rows.append(timed(PEAK, wt2, tip, variant="warp-tiling 2-D", round=rnd))
    rows.append(timed(PEAK, wt1, tip, variant="warp-tiling 1-D", round=rnd))
    for sk in (0, 1):
        rows.append(timed(PEAK, sk1, dict(tip, STREAM_K=sk), variant=f"stream-k 1-D STREAM_K={sk}", round=rnd))
        rows.append(timed(PEAK, sk2, dict(tip, STREAM_K=sk), variant=f"stream-k 2-D STREAM_K={sk}", round=rnd))
write(os.path.join(out, "h200-compare-stream-k-grid-hand.json"), "h200-compare-stream-k-grid-hand",
      "OUT=dir python3 bench/hand/stream-k-grid.py", rows)
