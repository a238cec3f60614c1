#!/usr/bin/env bash
# The scratch contexts of the hand experiments recorded in bench/results/h200-compare-*-hand.json
# (not recorded steps: copies of replayed tips changed by hand, to decide whether a step is
# worth writing). Here: bash bench/hand/prepare.sh, then carry carry/exp and the peak binary
# the script names (carry/gpu-tests for the row-box runs, carry/gemm-shapes, from
# `bash bench/h200-gemm-shapes.sh build`, for the f32 and async-fill runs) and run
# bench/hand/<experiment>.sh on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
tip() {  # tip BUNDLE DIR: the context of a replayed bundle's HEAD
  local tmp; tmp="$(mktemp -d)"
  git clone -q "$1" "$tmp/wf" && rm -rf "$2" && mkdir -p "$(dirname "$2")" && cp -r "$tmp/wf/context" "$2" && rm -rf "$tmp"
}
# Three consumer warpgroups (192-row tiles): WG_M = 3 allowed, and the register split of
# 128 producer + 384 consumer threads within 64 K registers (32 / 160 instead of 40 / 232).
tip bench/results/h200-replayed-gemm-nt-bias-cuda-bf16-pair-round.bundle carry/exp/wg3
python3 - <<'PY'
p = "carry/exp/wg3/peak.toml"; s = open(p).read()
for name in ("BLOCK_Y", "WG_M"):
    s = s.replace(f"[tuning.{name}]\nvalues = [1, 2]", f"[tuning.{name}]\nvalues = [1, 2, 3]")
open(p, "w").write(s)
p = "carry/exp/wg3/kernel.cu"; k = open(p).read()
k = k.replace("peak_setmaxnreg_dec<40>()", "peak_setmaxnreg_dec<(WG_M > 2 ? 32 : 40)>()").replace("peak_setmaxnreg_inc<232>()", "peak_setmaxnreg_inc<(WG_M > 2 ? 160 : 232)>()")
open(p, "w").write(k)
PY
# A decode tile's TMA box of inp cut to the rows that exist (M < one tile), beside the tip itself.
tip bench/results/h200-replayed-gemm-nt-bias-cuda-bf16-decode-cluster-split-k.bundle carry/exp/rowbox/orig
cp -r carry/exp/rowbox/orig carry/exp/rowbox/mod.tmp && rm -rf carry/exp/rowbox/mod && mv carry/exp/rowbox/mod.tmp carry/exp/rowbox/mod
python3 - <<'PY'
p = "carry/exp/rowbox/mod/kernel.cu"; k = open(p).read()
old = "peak_mbar_arrive_expect_tx(&full[s], STAGE_BYTES);"
assert k.count(old) == 1
k = k.replace(old, "peak_mbar_arrive_expect_tx(&full[s], min(TILE_M, (GEMM_M + 7) / 8 * 8) * 64 * 2 + B_STAGE_BYTES);")
old = 'cuda_tensor_map(inp, "bf16", [K, M], [K * 2], [64, tile_m], "128b")'
assert k.count(old) == 1
k = k.replace(old, 'cuda_tensor_map(inp, "bf16", [K, M], [K * 2], [64, if M < tile_m { ceil_div(M, 8) * 8 } else { tile_m }], "128b")')
open(p, "w").write(k)
PY
# The fp32 NT tips, and the Fragment-Prefetch tip with its tiles filled by cp.async.
tip bench/results/h200-replayed-gemm-nt-bias-cuda-f32-joint-staging.bundle carry/exp/f32/joint
tip bench/results/h200-replayed-gemm-nt-bias-cuda-f32-fragment-prefetch.bundle carry/exp/f32/fp
rm -rf carry/exp/f32/async && cp -r carry/exp/f32/fp carry/exp/f32/async && python3 bench/hand/async-fill.py carry/exp/f32/async
# The square NN case-study fp32 tip beside them, the joint-staging tip with its global loads
# after the first slice, and two diagnostic copies (wrong results, timing only).
tip bench/results/h200-replayed-matmul-cuda-f32-main.bundle carry/exp/f32/nn
rm -rf carry/exp/f32/first && cp -r carry/exp/f32/joint carry/exp/f32/first && python3 bench/hand/first-slice.py carry/exp/f32/first
for m in rowstore rowload; do rm -rf carry/exp/f32/d-$m && cp -r carry/exp/f32/joint carry/exp/f32/d-$m && python3 bench/hand/f32-diagnose.py carry/exp/f32/d-$m/kernel.cu $m; done
rm -rf carry/exp/f32/inl && cp -r carry/exp/f32/joint carry/exp/f32/inl && python3 bench/hand/interior-loop.py carry/exp/f32/inl
# The Interior-Loop replay's tip, and it with its epilogue's bias in registers and interior stores as vectors.
tip bench/results/h200-replayed-gemm-nt-bias-cuda-f32-interior-loop.bundle carry/exp/f32/il
rm -rf carry/exp/f32/ev && cp -r carry/exp/f32/il carry/exp/f32/ev && python3 bench/hand/epilogue-vector.py carry/exp/f32/ev
# The bf16 Pair-Round tip with MCAST_A (0: the tip; 1: clusters along N sharing A's tile).
tip bench/results/h200-replayed-gemm-nt-bias-cuda-bf16-pair-round.bundle carry/exp/mca
python3 bench/hand/multicast-a.py carry/exp/mca
echo "prepared carry/exp/wg3, carry/exp/rowbox/{orig,mod}, carry/exp/mca and carry/exp/f32/{joint,fp,async,nn,first,d-rowstore,d-rowload,inl,il,ev}"
