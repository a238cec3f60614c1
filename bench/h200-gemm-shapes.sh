#!/usr/bin/env bash
# The fp32 GEMM line in roles (out = inp . W^T + bias, f32, no TF32) against cuBLASLt on
# the H200 at the shapes of issue 25: replays examples/workflows/gemm-nt-bias-cuda-deferred.bundle
# once (validated at 61 x 47 x 33, sanitized small, the design configuration pinned), then
# retunes its tip at each shape and times it with that shape's best configuration and
# cuBLASLt in one `peak baseline --against cublaslt` call, merging the rows into
# bench/results/h200-gemm-shapes.json (bench/gemm_shapes.py says more).
#
# Here (a CPU machine with Rust):   bash bench/h200-gemm-shapes.sh build
# There (the GPU machine, no Rust): OUT=some/folder SHAPES="8192x3072x768 8192x768x3072" bash bench/h200-gemm-shapes.sh run
# (carry carry/gemm-shapes). A later call retunes the same workflow at more shapes when
# given WF= the folder an earlier call replayed into (brought back as a tar and carried).
# Settings: SHAPES, WF, PIN, REPLAY_ONCE, BUDGET, STEP_TIME, RETUNE_BUDGET, RETUNE_TIME, SANITIZE_SAMPLES,
# SANITIZE_AT, REPS, REPLAY_TIMEOUT, PEAK, PEAK_COMMIT.
# DTYPE=bf16 (or f16): the 16-bit Hopper line (examples/workflows/gemm-nt-bias-cuda-<dtype>-deferred.bundle,
# Refactor ... TMA-Store) replayed at EACH shape into WF/<shape> (validated at 200 x 136 x 88,
# sanitized once at 256 x 256 x 128, tuned at the shape: BUDGET 12, STEP_TIME 12 s per step),
# the tip retuned there (RETUNE_BUDGET 90, RETUNE_TIME 90 s) and timed against cuBLASLt (same
# types, NT, bias fused); rows of that dtype merged beside the f32 rows. One shape per call:
#   OUT=some/folder DTYPE=bf16 SHAPES="8192x3072x768" bash bench/h200-gemm-shapes.sh run
# DTYPE=e4m3: the fp8 Hopper line (examples/workflows/gemm-nt-bias-cuda-e4m3-deferred.bundle: e4m3
# inp and weight, bf16 bias and out) the same way, against cuBLASLt's fp8 GEMM (NT only: both
# operands K-major; so its square shape is NT with the bias too), one shape per call:
#   OUT=some/folder DTYPE=e4m3 SHAPES="4096x4096x4096" bash bench/h200-gemm-shapes.sh run
# SQUARE=1: the square case study's replayed tips (fp32, f16; NN, n = 4096) against cuBLASLt,
# the table's NN rows.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/gemm-shapes
  ls -la carry/gemm-shapes
}

run() {
  OUT="${OUT:-h200-gemm-shapes}"
  mkdir -p "$OUT"
  export PEAK="${PEAK:-carry/gemm-shapes/peak}"
  export PEAK_COMMIT="${PEAK_COMMIT:-$(cat carry/gemm-shapes/commit 2>/dev/null || git rev-parse --short HEAD)}"
  "$PEAK" info > "$OUT/info.txt" 2>&1
  PYTHONUNBUFFERED=1 python3 bench/gemm_shapes.py "$OUT" 2>&1 | tee -a "$OUT/gemm-shapes.log"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
