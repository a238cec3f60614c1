#!/usr/bin/env bash
# Does peak's clock agree with an independent one on the H200? (issue 26, item 2)
#
# Ten of our examples' CUDA kernels, 5 us to ~30 ms, memory- and compute-bound, each timed in
# one device run by peak (`peak run`, and `peak tune` on the same configuration) and by an
# independent harness: the kernel `peak export` writes, compiled with nvcc, launched through
# the CUDA driver with ctypes on a non-blocking stream and timed with torch.cuda.Event, the
# method peak documents written without peak's code (bench/timing_agreement.py says how).
# Each kernel is also timed with one thing changed at a time (PyTorch's legacy default
# stream, a 256 MiB PyTorch fill kernel as the flush, no flush, the arguments marshalled in
# every run between the events) and with the harness's method before (issue 26: gelu at
# 7 us read 0.93), so the JSON says which difference moves a time.
# Writes bench/results/h200-timing-agreement.json (command, device, commit, date; per kernel
# peak_ms, independent_ms, ratio, and methods.<name>.median_ms/ratio), rewritten after
# every kernel. Target: every ratio within 5%.
#
# Here (a CPU machine with Rust):   bash bench/h200-timing-agreement.sh build
# There (the GPU machine, no Rust): bash bench/h200-timing-agreement.sh run
#   carry: carry/agreement (the stripped peak and its commit)
# Settings: OUT (default bench/results), KERNELS (comma-separated names, default all), REPS
# (default 50), BUDGET_S (start no kernel after this many seconds, default 500; the whole
# run is cut at BUDGET_S + 60), METHODS (comma-separated, the first the measurement;
# default: aligned and every diagnostic).
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/agreement
  ls -la carry/agreement
}

run() {
  OUT="${OUT:-bench/results}"
  PEAK="${PEAK:-carry/agreement/peak}"
  BUDGET_S="${BUDGET_S:-500}"
  mkdir -p "$OUT"
  [ -x "$PEAK" ] || { echo "h200-timing-agreement: no $PEAK (run the build step here and carry carry/agreement)" >&2; exit 1; }
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  export PEAK_CACHE_DIR="$(mktemp -d)"
  source bench/stamp.sh
  stamp carry/agreement/commit
  timeout $((BUDGET_S + 60)) python3 bench/timing_agreement.py \
    --peak "$PEAK" --out "$OUT/h200-timing-agreement.json" \
    --kernels "${KERNELS:-}" --reps "${REPS:-50}" --budget-s "$BUDGET_S" \
    --command "bash bench/h200-timing-agreement.sh run" \
    --commit "$COMMIT" --device "$DEVICE" --date "$DATE" ${METHODS:+--methods "$METHODS"}
  status=$?
  python3 - "$OUT/h200-timing-agreement.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in r["kernels"]:
    print(f"{k['name']:<22} " + (f"peak {k['peak_ms']:.4f} ms  independent {k['independent_ms']:.4f} ms  ratio {k['ratio']:.3f}  tune/independent {k['tune_ratio']:.3f}" if "ratio" in k else k["error"]))
    for m, v in k.get("methods", {}).items():
        print(f"    {m:<15} {v['median_ms'] * 1000:10.2f} us  ratio {v['ratio']:.3f}")
print("all within 5%:", r.get("all_within_tolerance"))
PY
  return $status
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: bash bench/h200-timing-agreement.sh build|run" >&2; exit 2 ;;
esac
