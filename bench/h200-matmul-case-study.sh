#!/usr/bin/env bash
# The MatMul case study on the H200: replay each recorded CUDA workflow from its bundle
# (every step validated, with compute-sanitizer, and tuned again on this GPU), then time
# every step's best configuration and cuBLAS in the same process on the same inputs at
# n = 2048 and 4096 (`peak baseline`), and write bench/results/h200-matmul-case-study.json.
#
# Here (a CPU machine with Rust):   bash bench/h200-matmul-case-study.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-matmul-case-study.sh run
# Settings: BUDGET (tuning evaluations per input size and step, default 96), WORKFLOWS
# (default: the fp32 workflow's main line, the fp16 workflow's `tma-multicast` line, which
# ends in TMA-Store, and its `paper` branch), SANITIZE_SAMPLES (validation samples run under compute-sanitizer, default 16),
# PEAK_COMMIT (the commit the binary was built from); SANITIZE_AT (e.g. n=512: the size the
# sanitizer runs at); REPLAY_ARGS (more `peak replay` flags); RETUNE (a budget, default 512, empty for none: after the
# replay, `peak retune` tunes each line's tip again from its top-K and records it as a
# Retune checkpoint); FINAL_ONLY=1 tunes and times
# only the last checkpoint of each line, without replaying it (little device time).
# A device call has a time limit: REPLAY_TIMEOUT stops a replay after that many seconds and
# packs it into OUT as replayed-NAME-BRANCH.bundle; a later run with RESUME=<that folder>
# continues it. `python3 bench/case_study.py --merge OUT.json RUN1.json RUN2.json ...` joins
# the runs of one resumed replay into one result.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/case
  ls -la carry/case
}

run() {
  OUT="${OUT:-h200-case-study}"
  mkdir -p "$OUT"
  export PEAK="${PEAK:-carry/case/peak}"
  export PEAK_COMMIT="${PEAK_COMMIT:-$(cat carry/case/commit 2>/dev/null || git rev-parse --short HEAD)}"
  export BUDGET="${BUDGET:-96}"
  # The README's table: each tip retuned with 512 evaluations per size (RETUNE= turns it off).
  export RETUNE="${RETUNE-512}"
  export SANITIZE_SAMPLES="${SANITIZE_SAMPLES:-16}"
  export WORKFLOWS="${WORKFLOWS:-matmul-cuda-f32:main matmul-cuda-f16:tma-multicast matmul-cuda-f16:paper}"
  python3 bench/case_study.py "$OUT" 2>&1 | tee "$OUT/case-study.log"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
