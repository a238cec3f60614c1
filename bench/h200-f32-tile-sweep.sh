#!/usr/bin/env bash
# How large a register tile the fp32 MatMul wants on the H200: the tip of the replayed fp32
# case-study line (bench/results/h200-replayed-matmul-cuda-f32-main-retune.bundle, tuned with
# at most 64 accumulators per thread) with Thread-Tiling's bound raised to 128, tuned
# exhaustively over 768 configurations around the 128-wide tiles at n = 4096 and 2048; the
# four fastest at each size are then timed against cuBLAS sgemm (no TF32) in one process.
# This sweep is why Thread-Tiling allows TRD_X * TRD_Y <= 128.
#
# Here (a CPU machine with Rust):   bash bench/h200-f32-tile-sweep.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-f32-tile-sweep.sh run
# Writes OUT/h200-f32-tile-sweep.json (copy it to bench/results/).
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=carry/tile-sweep

build() {
  set -e
  source bench/carry.sh
  carry_peak "$DIR"
  rm -rf "$DIR/context" "$DIR/tip"
  git clone -q bench/results/h200-replayed-matmul-cuda-f32-main-retune.bundle "$DIR/tip"
  cp -r "$DIR/tip/context" "$DIR/context" && rm -rf "$DIR/tip"
  python3 - "$DIR/context/peak.toml" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
for axis in ("TRD_X", "TRD_Y"):
    text = text.replace(f"[tuning.{axis}]\npow2 = [1, 8]", f"[tuning.{axis}]\npow2 = [1, 16]")
text = text.replace('"TRD_X * TRD_Y <= 64"', '"TRD_X * TRD_Y <= 128"')
assert "TRD_X * TRD_Y <= 128" in text and "pow2 = [1, 16]" in text, "the tip's manifest changed shape"
open(path, "w").write(text)
PY
}

run() {
  OUT="${OUT:-h200-f32-tile-sweep}"
  mkdir -p "$OUT"
  source bench/stamp.sh && stamp "$DIR/commit"
  export PEAK_CACHE_DIR="$OUT/cache"
  local set="--set BLOCK_X=8,16 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=2,4 --set CHUNK_Y=2,4 --set TILE_K=8,16 --set NUM_STAGES=2,3 --set OFFSET=0,1 --set GROUP_M=1,8 --set VEC=4 --set K_SPLITS=1"
  for n in 4096 2048; do
    "$DIR/peak" tune "$DIR/context" --strategy exhaustive --set n=$n $set --prune-spills --top 16 --top-out "$OUT/top$n.json" --json > "$OUT/tune$n.json"
    python3 -c 'import json, sys
for e in json.load(open(sys.argv[1]))[0]["entries"][:4]:
    print(" ".join(f"--set {k}={v}" for k, v in e["tuning"].items()))' "$OUT/top$n.json" > "$OUT/sets$n.txt"
    local i=0
    while read -r line; do
      i=$((i + 1))
      "$DIR/peak" baseline "$DIR/context" --set n=$n $line --reps 30 --warmup 5 --json > "$OUT/base$n-$i.json"
    done < "$OUT/sets$n.txt"
  done
  COMMAND="bash bench/h200-f32-tile-sweep.sh run" COMMIT="$COMMIT" DEVICE="$DEVICE" DATE="$DATE" python3 bench/tile_sweep.py "$OUT" > "$OUT/h200-f32-tile-sweep.json"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
