"""Hand experiment (not a recorded step): the fp32 NT line's joint-staging tip with each k-step's
global loads issued after that step's first slice of fragments has been read from shared memory,
instead of before. In the tip the loads sit in a branch of their own (interior tile or edge), so
ptxas cannot move the first slice's shared loads above it: every warp leaves the barrier, runs the
branch, then waits for shared memory at the first FFMA (bench/results/h200-gemm-profile-f32-joint-staging.json).
The square NN case-study kernel, whose loads are predicated and branch-free, has its first FFMA
22+ instructions after its shared loads.
Usage: python3 first-slice.py CONTEXT_DIR (rewrites CONTEXT_DIR/kernel.cu)."""
import sys

path = f"{sys.argv[1]}/kernel.cu"
k = open(path).read()
head = "    for (int t = 0; t < KT; ++t) {\n        if (t + 1 < KT) {\n"
assert k.count(head) == 1
start = k.index(head) + len("    for (int t = 0; t < KT; ++t) {\n")
end = k.index("        const int stage = t % NUM_STAGES;\n", start)
loads = k[start:end]
k = k[:start] + k[end:]
fma = "            #pragma unroll\n            for (int i = 0; i < TRD_Y; ++i) {\n                #pragma unroll\n                for (int j = 0; j < TRD_X; ++j) {\n                    acc[i][j] += a_reg[i] * b_reg[j];"
assert k.count(fma) == 1
moved = "            // The next step's global loads, once this step's first slice is on its way from\n            // shared memory: they fill the wait before its first multiply-adds.\n" + \
    "".join("    " + l + "\n" if l else "\n" for l in loads.replace("        if (t + 1 < KT) {", "        if (kk == 0 && t + 1 < KT) {", 1).rstrip("\n").split("\n"))
k = k.replace(fma, moved + fma)
open(path, "w").write(k)
print(f"rewrote {path}")
