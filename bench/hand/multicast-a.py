"""Hand experiment (not a recorded step): the 16-bit Hopper line's tip with the cluster laid
along N, so that its blocks share A's tile (multicast) instead of B's. cuBLASLt's kernel at
8192 x 3072 x 768 (nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT: 256 x 128 tiles, 4
stages, clusters 1 x 2) shares the 256-row operand; the tip's CLUSTER_M shares weight's
128-row tile, so each block issues A whole (32 KB a k-step) and half of B (8 KB): 40 KB against
32 KB. In ncu's source counters (h200-gemm-profile-sass.json) the tip's most stalled line after
the wgmma is the consumers' wait on a full stage (long scoreboard), cuBLASLt's the wait for its
own wgmma: the tip's consumers wait for data.

MCAST_A = 1 (a new tuning parameter, 0 or 1; 0 is the tip unchanged): units of one tile-row
and CLUSTER_M tile-columns; block `rank` of a cluster takes tile-column unit * CLUSTER_M + rank;
A's TILE_M rows are CLUSTER_M boxes, box `rank` copied by that block into every block of the
cluster; each block loads its own B. The stage barriers are unchanged: every block's stage is
still written by every block of the cluster, so each producer still waits for every consumer
of the cluster to release it.
Usage: python3 multicast-a.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu and peak.toml)."""
import re
import sys

ctx = sys.argv[1]
path = f"{ctx}/kernel.cu"
k = open(path).read()


def sub(old, new, count=1):
    global k
    assert k.count(old) == count, (old, k.count(old))
    k = k.replace(old, new)


# The schedule: units along N when A is shared.
sub("""    const int tiles_n = (GEMM_N + TILE_N - 1) / TILE_N;                  // tile-columns of C
    const int unit_rows = ((GEMM_M + TILE_M - 1) / TILE_M) / CLUSTER_M;   // the host makes this whole
    const int units = unit_rows * tiles_n;""",
"""#if MCAST_A
    // Units of one tile-row and CLUSTER_M tile-columns: the blocks of a cluster share A's tile.
    const int tiles_m = (GEMM_M + TILE_M - 1) / TILE_M;                  // tile-rows of C
    const int unit_cols = ((GEMM_N + TILE_N - 1) / TILE_N) / CLUSTER_M;   // the host makes this whole
    const int units = tiles_m * unit_cols;
#else
    const int tiles_n = (GEMM_N + TILE_N - 1) / TILE_N;                  // tile-columns of C
    const int unit_rows = ((GEMM_M + TILE_M - 1) / TILE_M) / CLUSTER_M;   // the host makes this whole
    const int units = unit_rows * tiles_n;
#endif""")
# Both loops place the unit the same way: the producer's at 16 spaces, the consumers' at 12.
for pad in (" " * 16, " " * 12):
    old = f"int ur, bx;\n{pad}peak_grouped_tile(u, unit_rows, tiles_n, 8, ur, bx);\n{pad}const int by = ur * CLUSTER_M + rank;"
    sub(old, f"#if MCAST_A\n{pad}int by, uc;\n{pad}peak_grouped_tile(u, tiles_m, unit_cols, 8, by, uc);\n{pad}const int bx = uc * CLUSTER_M + rank;\n#else\n{pad}{old}\n#endif")
# The producer's copies.
m = re.search(r"( *)peak_tma_load_2d\(a_stage, &tma_a, t \* 64, by \* TILE_M, &full\[s\]\);\n(.*?\n)( *)for \(int c = 0; c < WGMMA_N / 64; \+\+c\)\n *if \(c % CLUSTER_M == rank\)\n *peak_tma_load_2d_multicast\(b_stage \+ c \* 8192, &tma_b, t \* 64, bx \* TILE_N \+ 64 \* c, &full\[s\], \(unsigned short\)\(\(1 << CLUSTER_M\) - 1\)\);\n", k, re.S)
assert m, "the producer's copies"
ind = m.group(1)
k = k[:m.start()] + f"""#if MCAST_A
{ind}// A's tile as CLUSTER_M boxes of TILE_M / CLUSTER_M rows, box `rank` copied by this block
{ind}// into every block of the cluster; weight's [WGMMA_N][64] tile loaded by each block itself.
{ind}peak_tma_load_2d_multicast(a_stage + rank * (A_STAGE_BYTES / CLUSTER_M), &tma_a, t * 64, by * TILE_M + rank * (TILE_M / CLUSTER_M), &full[s], (unsigned short)((1 << CLUSTER_M) - 1));
#pragma unroll
{ind}for (int c = 0; c < WGMMA_N / 64; ++c) peak_tma_load_2d(b_stage + c * 8192, &tma_b, t * 64, bx * TILE_N + 64 * c, &full[s]);
#else
{m.group(0)}#endif
""" + k[m.end():]
# Host: whole clusters along N, units along N, A's box a cluster's share of the rows.
sub('if ceil_div(M, tile_m) % CLUSTER_M != 0 { invalid("the row blocks do not form whole clusters of CLUSTER_M"); }',
    'if MCAST_A == 0 && ceil_div(M, tile_m) % CLUSTER_M != 0 { invalid("the row blocks do not form whole clusters of CLUSTER_M"); }\n'
    'if MCAST_A == 1 && ceil_div(N, WGMMA_N) % CLUSTER_M != 0 { invalid("the column blocks do not form whole clusters of CLUSTER_M"); }')
sub("let units = ceil_div(N, WGMMA_N) * (ceil_div(M, tile_m) / CLUSTER_M);",
    "let units = if MCAST_A == 1 { ceil_div(M, tile_m) * (ceil_div(N, WGMMA_N) / CLUSTER_M) } else { ceil_div(N, WGMMA_N) * (ceil_div(M, tile_m) / CLUSTER_M) };")
sub('cuda_tensor_map(inp, "bf16", [K, M], [K * 2], [64, tile_m], "128b")',
    'cuda_tensor_map(inp, "bf16", [K, M], [K * 2], [64, if MCAST_A == 1 { tile_m / CLUSTER_M } else { tile_m }], "128b")')
open(path, "w").write(k)
toml = f"{ctx}/peak.toml"
t = open(toml).read()
assert "[tuning.MCAST_A]" not in t
t = t.replace("[tuning.NUM_STAGES]", "[tuning.MCAST_A]\nvalues = [0, 1]\n\n[tuning.NUM_STAGES]", 1)
open(toml, "w").write(t)
