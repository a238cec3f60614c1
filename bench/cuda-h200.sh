#!/usr/bin/env bash
# The CUDA backend's checks and benchmarks on a GPU machine without Rust, in one go.
#
# Build on a CPU machine, from the repository root (crates/peak-cuda/README.md says more):
#   bench/cuda-h200.sh build      # release binaries and test binaries into carry/cuda/
# then on the GPU machine, from a copy of the repository holding carry/cuda/:
#   OUT=some/folder PEAK_COMMIT=<commit> bench/cuda-h200.sh run
# `run` writes h200.log (every test and command's output), cuda-baseline.json and
# cuda-compile-time.json into $OUT; copy the JSON into bench/results/.
set -uo pipefail

build() {
  set -e
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/cuda}"
  cargo build --release -p peak-cli -p peak-bench --bins
  mkdir -p carry/cuda/tests
  cp "$CARGO_TARGET_DIR/release/peak" "$CARGO_TARGET_DIR/release/peak-cuda-bench" carry/cuda/
  # Test binaries: cargo prints where each lands.
  cargo test --release -p peak-cuda --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], "carry/cuda/tests/" + m["target"]["name"])'
  strip carry/cuda/peak carry/cuda/peak-cuda-bench carry/cuda/tests/*
  ls -la carry carry/cuda/tests
}

run() {
  OUT="${OUT:-h200-out}"
  mkdir -p "$OUT"
  exec > >(tee "$OUT/h200.log") 2>&1
  # The test binaries find the examples at the path they were built at.
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  echo "== tests"
  for t in backend_suite gpu cublaslt fault nvrtc; do
    echo "-- $t"
    timeout 150 "carry/cuda/tests/$t" --nocapture --test-threads=4
    echo "exit: $?"
  done
  echo "== peak run and peak baseline on every CUDA and HIP example"
  for ex in examples/matmul-cuda-f32 examples/matmul-cuda-f16 examples/matmul-hip-f32 examples/matmul-hip-f16; do
    timeout 120 carry/cuda/peak run "$ex" --set n=4096 --set BLOCK_X=32 --set BLOCK_Y=8; echo "exit: $?"
    timeout 120 carry/cuda/peak baseline "$ex" --set n=4096 --set BLOCK_X=32 --set BLOCK_Y=8; echo "exit: $?"
  done
  timeout 120 carry/cuda/peak compile examples/matmul-cuda-f16 --set BLOCK_X=32 --set BLOCK_Y=8,16 --json; echo "exit: $?"
  echo "== benchmarks"
  timeout 240 carry/cuda/peak-cuda-bench baseline examples/matmul-cuda-f32 examples/matmul-cuda-f16 examples/matmul-hip-f32 examples/matmul-hip-f16 \
    --set BLOCK_X=16,32 --set BLOCK_Y=8,16 --reps 20 --warmup 3 --out "$OUT/cuda-baseline.json"
  echo "exit: $?"
  timeout 150 carry/cuda/peak-cuda-bench compile-time examples/matmul-cuda-f32 examples/matmul-cuda-f16 examples/matmul-hip-f32 \
    --set BLOCK_Y=8 --out "$OUT/cuda-compile-time.json"
  echo "exit: $?"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: bench/cuda-h200.sh build|run" >&2; exit 2 ;;
esac
