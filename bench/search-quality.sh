#!/usr/bin/env bash
# Search quality on any machine (issue 4, benchmark b): replay recorded exhaustive tuning
# results to the `auto` and `random` strategies, 100 seeded runs each, and report how
# often each gets within 2% of the exhaustive best using at most 10% of the evaluations,
# with best-so-far curves.
#
# With no arguments it uses the OpenCL spaces of bench/spaces/, recorded on this
# machine's OpenCL device (PoCL where there is no GPU): a space whose recording
# bench/recordings/<device-tag>-<space>.jsonl is missing is first tuned exhaustively with
# `peak tune` (minutes per space on PoCL). Give cache files to replay those instead (for
# example the H200 recordings written by bench/h200-tuning.sh).
#
#   bash bench/search-quality.sh                     # record if needed, then replay
#   bash bench/search-quality.sh bench/recordings/h200-*.jsonl
#
# Environment: PEAK (default: target/release/peak, built if missing), OUT (bench/results),
# TAG (device tag of the recordings and the JSON name, default "pocl").
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "search-quality: $*" >&2; }

OUT="${OUT:-bench/results}"
TAG="${TAG:-pocl}"
mkdir -p "$OUT" bench/recordings
cargo build --release -q -p peak-bench --bin peak-search-quality
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
SQ="$TARGET_DIR/release/peak-search-quality"

caches=("$@")
if [ ${#caches[@]} -eq 0 ]; then
  PEAK="${PEAK:-$TARGET_DIR/release/peak}"
  [ -x "$PEAK" ] || cargo build --release -q -p peak-cli
  for space in sgemm-opencl-regtiled conv2d-opencl gemv-opencl; do
    rec="bench/recordings/$TAG-$space.jsonl"
    if [ ! -s "$rec" ]; then
      say "recording $space exhaustively (this takes a while on a CPU device)"
      work="$(mktemp -d)"
      "$PEAK" tune "bench/spaces/$space" --strategy exhaustive --cache-dir "$work" --json > "$work/tune.json"
      cp "$work"/results/*.jsonl "$rec"
      rm -rf "$work"
    fi
    caches+=("$rec")
  done
fi
DEVICE="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["device"])' "${caches[0]}")"
"$SQ" --out "$OUT/$TAG-search-quality.json" --device "$DEVICE" "${caches[@]}"
