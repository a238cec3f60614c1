#!/usr/bin/env bash
# Every checkpoint's yardstick on the H200 (issue 26, item 4): the NT GEMM with a bias
# replayed at one shape (every step records cuBLASLt doing the same work) and the CUDA
# softmax's root (a copy of the bytes it moves); `peak log` shows the percentages, and the
# tip's are checked against `peak baseline` in the same device call (bench/yardstick.py).
#
# Here (a CPU machine with Rust):   bash bench/h200-yardstick.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-yardstick.sh run
# (carry carry/yardstick). Settings: SHAPE (8192x3072x768), BUDGET (16 per step),
# SANITIZE_SAMPLES (2), REPS (20), REPLAY_TIMEOUT (420 s), PEAK, PEAK_COMMIT.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/yardstick
  ls -la carry/yardstick
}

run() {
  OUT="${OUT:-h200-yardstick}"
  mkdir -p "$OUT"
  export PEAK="${PEAK:-carry/yardstick/peak}"
  export PEAK_COMMIT="${PEAK_COMMIT:-$(cat carry/yardstick/commit 2>/dev/null || git rev-parse --short HEAD)}"
  "$PEAK" info > "$OUT/info.txt" 2>&1
  PYTHONUNBUFFERED=1 python3 bench/yardstick.py "$OUT" 2>&1 | tee -a "$OUT/yardstick.log"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
