#!/usr/bin/env bash
# Tuning benchmarks on the H200 (issue 4):
#
#  (a) throughput: `peak tune --strategy exhaustive` over the whole register-tiled SGEMM
#      space at n = 2048 (examples/sgemm-cuda-regtiled, 635 configurations): compile
#      (NVRTC, every core), one output check against the reference and timing (warm-up +
#      7 runs, median of device events) per configuration, end to end, from a cold cache.
#      In the same run, the "nvcc executable per variant" way on a sample of the same
#      space (bench/nvcc-driver/driver.cu). Target: >= 35 configurations/s.
#  (b) search quality: the exhaustive results of three CUDA spaces (the SGEMM above,
#      bench/spaces/conv2d-cuda, bench/spaces/gemv-cuda) are replayed to `auto` and
#      `random` 100 times each: within 2% of the exhaustive best using <= 10% of the
#      evaluations? With best-so-far curves.
#
# Writes, under $OUT (default bench/results):
#   h200-tuning-throughput.json, h200-search-quality.json,
#   h200-recordings/*.jsonl (the recorded caches, to commit under bench/recordings/).
#
# Run from the repository root on the GPU machine:   bash bench/h200-tuning.sh
# It needs, built on a CPU machine and carried over:
#   carry/peak                   cargo build --release -p peak-cli && cp target/release/peak carry/
#   carry/peak-search-quality    cargo build --release -p peak-bench --bin peak-search-quality && cp ... carry/
# and nvcc (CUDA toolkit) for the per-variant driver.
#
# Environment (all optional):
#   OUT=bench/results    output folder (the device tool's $OUT)
#   NV_SAMPLE=24         configurations the nvcc driver builds and runs
#   NVCC=nvcc            the nvcc to use (else $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc)
#   NVCC_ARCH=sm_90      architecture for nvcc
#   SKIP_NVCC=1          skip the nvcc driver
#   SKIP_QUALITY=1       skip (b)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "h200-tuning: $*" >&2; }

OUT="${OUT:-bench/results}"
PEAK="${PEAK:-carry/peak}"
SEARCH_QUALITY="${SEARCH_QUALITY:-carry/peak-search-quality}"
NV_SAMPLE="${NV_SAMPLE:-24}"
NVCC_ARCH="${NVCC_ARCH:-sm_90}"
mkdir -p "$OUT" "$OUT/h200-recordings"
[ -x "$PEAK" ] || { say "no $PEAK: build it with cargo build --release -p peak-cli and copy it to carry/"; exit 1; }
command -v python3 >/dev/null || { say "python3 is needed to assemble the JSON"; exit 1; }

source bench/stamp.sh
stamp
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
now() { date +%s.%N; }

# --- (a) peak: every configuration of each space, from a cold cache ----------------------
tune_space() { # name context
  local name="$1" ctx="$2" t0 t1
  say "peak tune $ctx (exhaustive, cold cache)"
  t0=$(now)
  "$PEAK" tune "$ctx" --strategy exhaustive --top 100000 --cache-dir "$WORK/cache-$name" --json > "$WORK/$name.json"
  t1=$(now)
  python3 -c "print($t1 - $t0)" > "$WORK/$name.wall"
  cp "$WORK/cache-$name"/results/*.jsonl "$OUT/h200-recordings/$name.jsonl"
}
tune_space sgemm examples/sgemm-cuda-regtiled
if [ -z "${SKIP_QUALITY:-}" ]; then
  tune_space conv2d bench/spaces/conv2d-cuda
  tune_space gemv bench/spaces/gemv-cuda
fi

# --- (a) nvcc: one executable per variant on a sample of the same space -----------------
NVCC_BIN="${NVCC:-}"
if [ -z "$NVCC_BIN" ]; then
  for c in nvcc "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    if command -v "$c" >/dev/null 2>&1; then NVCC_BIN="$c"; break; fi
  done
fi
: > "$WORK/nvcc.jsonl"
if [ -z "${SKIP_NVCC:-}" ] && [ -n "$NVCC_BIN" ]; then
  say "nvcc driver on $NV_SAMPLE configurations"
  # The context's macros and device regions, without the marker lines.
  awk '/^\/\/ @peak host/{exit} !/^\/\/ @peak (macros|device)/' examples/sgemm-cuda-regtiled/sgemm.cu > "$WORK/kernel.inc"
  # An even spread over the measured configurations, fastest to slowest.
  python3 - "$WORK/sgemm.json" "$NV_SAMPLE" > "$WORK/sample.txt" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))["runs"][0]["top"]
k = min(int(sys.argv[2]), len(top))
for i in range(k):
    t = top[i * (len(top) - 1) // max(k - 1, 1)]["tuning"]
    print(" ".join(f"-D{name}={value}" for name, value in t.items()))
PY
  rm -f "$WORK/ref.bin"
  n0=$(now)
  while read -r defines; do
    c0=$(now)
    # shellcheck disable=SC2086
    "$NVCC_BIN" -O3 -arch="$NVCC_ARCH" $defines -include "$WORK/kernel.inc" bench/nvcc-driver/driver.cu -o "$WORK/variant"
    c1=$(now)
    line=$("$WORK/variant" 2048 "$WORK/ref.bin" || true)
    r1=$(now)
    python3 -c "import json,sys; print(json.dumps({'defines': sys.argv[1], 'compile_s': $c1 - $c0, 'run_s': $r1 - $c1, 'result': json.loads(sys.argv[2] or '{}')}))" "$defines" "$line" >> "$WORK/nvcc.jsonl"
  done < "$WORK/sample.txt"
  n1=$(now)
  python3 -c "print($n1 - $n0)" > "$WORK/nvcc.wall"
else
  say "skipping the nvcc driver (SKIP_NVCC set or no nvcc found)"
  echo 0 > "$WORK/nvcc.wall"
fi

python3 - "$WORK" "$OUT/h200-tuning-throughput.json" "$COMMIT" "$DEVICE" "$DATE" <<'PY'
import json, sys, statistics
work, out, commit, device, date = sys.argv[1:6]
tune = json.load(open(f"{work}/sgemm.json"))
run = tune["runs"][0]
wall = float(open(f"{work}/sgemm.wall").read())
rows = [json.loads(l) for l in open(f"{work}/nvcc.jsonl") if l.strip()]
nv_wall = float(open(f"{work}/nvcc.wall").read())
best = run.get("best") or {}
report = {
    "benchmark": "tuning-throughput",
    "command": "bash bench/h200-tuning.sh",
    "device": device,
    "commit": commit,
    "date": date,
    "context": "examples/sgemm-cuda-regtiled (n = 2048)",
    "space": run["space"],
    "peak": {
        "tune_command": "peak tune examples/sgemm-cuda-regtiled --strategy exhaustive --top 100000 --cache-dir <fresh> --json",
        "per_configuration": "NVRTC compile on every core, one run checked against the reference, 1 warm-up, 7 timed runs (median of device events), 2 input sets rotated, result appended to the cache with fsync",
        "evaluations": run["evaluations"],
        "measured": run["measured"],
        "failures": run["failures"],
        "pruned_at_launch": run["pruned"]["launch"],
        "pruned_by_compile_report": run["pruned"]["compile_report"],
        "wall_s": wall,
        "configurations_per_s": run["evaluations"] / wall,
        "tuner_configurations_per_s": run["measured_per_s"],
        "worker_restarts": tune.get("worker_restarts"),
        "best": best,
        "best_tflops": (2 * 2048**3 / (best["median_ms"] * 1e-3) / 1e12) if best else None,
    },
    "nvcc_per_variant": {
        "driver": "bench/nvcc-driver/driver.cu: nvcc -O3 builds one executable per variant; each run fills the inputs, checks the output, warms up once and times 7 runs",
        "sampled": len(rows),
        "wall_s": nv_wall,
        "configurations_per_s": (len(rows) / nv_wall) if nv_wall > 0 else None,
        "median_compile_s": statistics.median([r["compile_s"] for r in rows]) if rows else None,
        "median_run_s": statistics.median([r["run_s"] for r in rows]) if rows else None,
        "variants": rows,
    },
    "target_configurations_per_s": 35,
}
report["target_met"] = report["peak"]["configurations_per_s"] >= 35
json.dump(report, open(out, "w"), indent=2)
print(f"peak: {run['evaluations']} configurations in {wall:.1f} s = {report['peak']['configurations_per_s']:.1f}/s; "
      f"nvcc: {len(rows)} in {nv_wall:.1f} s = {report['nvcc_per_variant']['configurations_per_s'] or 0:.2f}/s", file=sys.stderr)
PY

# --- (b) search quality on the recorded H200 spaces -------------------------------------
if [ -z "${SKIP_QUALITY:-}" ]; then
  if [ -x "$SEARCH_QUALITY" ]; then
    "$SEARCH_QUALITY" --out "$OUT/h200-search-quality.json" --device "$DEVICE" --commit "$COMMIT" \
      "$OUT/h200-recordings/sgemm.jsonl" "$OUT/h200-recordings/conv2d.jsonl" "$OUT/h200-recordings/gemv.jsonl" || say "search quality: target not met (see the JSON)"
  else
    say "no $SEARCH_QUALITY: the recordings are in $OUT/h200-recordings; replay them anywhere with bench/search-quality.sh"
  fi
fi
say "done: $OUT/h200-tuning-throughput.json"
