"""Hand experiment (not a recorded step): the square fp32 NN tip's k loop unrolled UNROLL_T
times (a new tuning parameter, 1 is the tip unchanged). Its shared tiles are indexed by the
stage `t % NUM_STAGES`, known only at run time, so every shared load of a k-step forms its
address from it; the profile of that tile (h200-gemm-profile-f32-nt-nn.json) has 13% of the
instructions outside the FFMAs and shared loads (LEA, MOV, IADD3, IMAD). With the loop unrolled
NUM_STAGES times the stage of each copy is a constant, so the compiler may fold it into the
loads' immediate offsets.
Usage: python3 f32-unroll-stage.py CONTEXT_DIR (rewrites CONTEXT_DIR/matmul.cu and peak.toml)."""
import sys

ctx = sys.argv[1]
path = f"{ctx}/matmul.cu"
k = open(path).read()
loop = "        for (int t = 0; t < KT; ++t) {\n"
assert k.count(loop) == 2, k.count(loop)
k = k.replace(loop, "#pragma unroll UNROLL_T\n" + loop)
open(path, "w").write(k)
toml = f"{ctx}/peak.toml"
t = open(toml).read()
assert "[tuning.UNROLL_T]" not in t
t = t.replace("[tuning.VEC]", "[tuning.UNROLL_T]\nvalues = [1, 2, 4]\n\n[tuning.VEC]", 1)
open(toml, "w").write(t)
