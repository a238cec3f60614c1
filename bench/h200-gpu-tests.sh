#!/usr/bin/env bash
# The GPU-gated tests, run where the GPU is (issue 16): every test binary that holds a
# CUDA, sanitizer or Nsight Compute test is built here, carried to the GPU machine and run
# there, and `peak profile` is run once; bench/gpu_tests.py writes h200-gpu-tests.json
# (tests run, passed, failed, skipped, each test's name and outcome, commit, date).
#
# Here (a CPU machine with Rust):   bash bench/h200-gpu-tests.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-gpu-tests.sh run
#
# `run` then runs bench/h200-export.sh (exported CUDA harness vs peak run; SKIP_EXPORT=1 skips).
#
# Test binaries find the repository (examples, fixtures) and the peak binary through the
# absolute paths they were built with; `run` makes those paths lead to this checkout.
set -uo pipefail
cd "$(dirname "$0")/.."
# The test targets that hold GPU-gated tests: crate/target.
TARGETS="peak-cuda/gpu peak-cuda/cublaslt peak-cuda/fault peak-cuda/nvrtc peak-eval/cuda peak-cli/sanitize peak-cli/cuda_commands"

build() {
  set -e
  rm -rf carry/gpu-tests
  source bench/carry.sh
  carry_peak carry/gpu-tests
  local packages=""
  for t in $TARGETS; do packages="$packages -p ${t%/*}"; done
  cargo test --release --no-run $packages --message-format=json 2>/dev/null \
    | python3 bench/gpu_tests.py executables "$TARGETS" \
    | while read -r name path; do cp "$path" "carry/gpu-tests/$name"; strip "carry/gpu-tests/$name"; done
  pwd > carry/gpu-tests/built-in
  du -sh carry/gpu-tests && ls carry/gpu-tests
}

run() {
  OUT="${OUT:-h200-gpu-tests}"
  mkdir -p "$OUT"
  local built_in; built_in="$(cat carry/gpu-tests/built-in)"
  if [ "$built_in" != "$PWD" ] && [ ! -e "$built_in" ]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"
  fi
  mkdir -p target/release && cp carry/gpu-tests/peak target/release/peak
  python3 bench/gpu_tests.py run "$TARGETS" carry/gpu-tests "$OUT" 2>&1 | tee "$OUT/gpu-tests.log"
  # peak export's round trip (issue 13): the exported CUDA harness, built with nvcc, against
  # peak run on the same configuration; writes $OUT/h200-export.json. Needs nvcc.
  if [ -z "${SKIP_EXPORT:-}" ]; then
    # The device's copy of the tree has no usable git history: name the build's commit.
    PEAK_COMMIT="$(cat carry/gpu-tests/commit)" PEAK=carry/gpu-tests/peak OUT="$OUT" bash bench/h200-export.sh 2>&1 | tee "$OUT/export.log" || echo "h200-export: failed (see $OUT/export.log)" >&2
  fi
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
