"""Hand experiment (not a recorded step): the square fp32 NN tip's k loop unrolled UNROLL_T
times (a new tuning parameter, 1 is the tip unchanged). Its shared tiles are indexed by the
stage `t % NUM_STAGES`, known only at run time, so every shared load of a k-step forms its
address from it; the profile of that tile (h200-gemm-profile-f32-nt-nn.json) has 13% of the
instructions outside the FFMAs and shared loads (LEA, MOV, IADD3, IMAD). With the loop unrolled
NUM_STAGES times the stage of each copy is a constant, so the compiler may fold it into the
loads' immediate offsets.
Usage: python3 f32-unroll-stage.py CONTEXT_DIR (rewrites CONTEXT_DIR/matmul.cu and peak.toml)."""
import sys

from source_edit import Source, add_tuning

ctx = sys.argv[1]
k = Source(f"{ctx}/matmul.cu")
loop = "        for (int t = 0; t < KT; ++t) {\n"
k.sub(loop, "#pragma unroll UNROLL_T\n" + loop, count=2)   # the interior blocks' k loop and the edge blocks'
k.save()
add_tuning(f"{ctx}/peak.toml", "UNROLL_T", [1, 2, 4], before="[tuning.VEC]")
