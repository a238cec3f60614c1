#!/usr/bin/env bash
# `peak export` on the H200 (issue 13, part 3): the exported CUDA harness, built with nvcc,
# must time the checkpoint's kernel as peak does, to within noise, and compute the same
# outputs.
#
# For each bundle: `peak export HEAD` (the best configuration of the performance record),
# `sh build.sh` (nvcc), `./harness --reps 20 --dump DIR`; then `peak run` on the same
# context at the same configuration (20 timed runs). Compared: the harness's median with
# peak run's median and with the recorded checkpoint time, and each output's digest (the
# first 8 bytes of the SHA-256 of its bytes; the harness fills the inputs with peak's values).
# Within noise: |harness / peak run - 1| <= TOLERANCE (default 0.05).
#
# Writes $OUT/h200-export.json (default bench/results).
#
# Run from the repository root on the GPU machine:   bash bench/h200-export.sh
# It needs carry/peak (cargo build --release -p peak-cli && cp target/release/peak carry/),
# nvcc (CUDA toolkit), python3 and git.
#
# Environment (all optional):
#   OUT=bench/results   output folder
#   BUNDLES="..."       bundles to export (default: the case-study tips: the f32 and fp16 matmul
#                       replays, and the NT GEMM with a bias, whose deferred tip has no record:
#                       it is tuned here first, `peak tune --budget $TUNE_BUDGET`, and exported
#                       at the winner)
#   TUNE_BUDGET=16      configurations tuned for a tip without a performance record
#   TOLERANCE=0.05      allowed relative difference of the medians
#   NVCC=nvcc           the nvcc to use (else $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "h200-export: $*" >&2; }

OUT="${OUT:-bench/results}"
PEAK="${PEAK:-carry/peak}"
BUNDLES="${BUNDLES:-bench/results/h200-replayed-matmul-cuda-f32-main.bundle bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle examples/workflows/gemm-nt-bias-cuda-deferred.bundle}"
TUNE_BUDGET="${TUNE_BUDGET:-16}"
TOLERANCE="${TOLERANCE:-0.05}"
mkdir -p "$OUT"
[ -x "$PEAK" ] || { say "no $PEAK: build it with cargo build --release -p peak-cli and copy it to carry/"; exit 1; }
command -v python3 >/dev/null || { say "python3 is needed to assemble the JSON"; exit 1; }
NVCC_BIN="${NVCC:-}"
if [ -z "$NVCC_BIN" ]; then
  for c in nvcc "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    if command -v "$c" >/dev/null 2>&1; then NVCC_BIN="$c"; break; fi
  done
fi
[ -n "$NVCC_BIN" ] || { say "no nvcc found (set NVCC)"; exit 1; }
export PATH="$(dirname "$(command -v "$NVCC_BIN")"):$PATH"

source bench/stamp.sh
stamp "$(dirname "$PEAK")/commit"   # the carried build's commit, written beside it by bench/carry.sh
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
: > "$WORK/rows.jsonl"

i=0
for bundle in $BUNDLES; do
  i=$((i + 1))
  wf="$WORK/wf$i" exp="$WORK/export$i"
  say "$bundle: export, build with nvcc, run"
  git -c init.defaultBranch=main clone --quiet "$bundle" "$wf"
  # A tip without a performance record (deferred) is tuned here first, and exported at the winner.
  tuned=""
  if "$PEAK" show HEAD -w "$wf" --json | python3 -c "import json, sys; sys.exit(0 if json.load(sys.stdin)['performance'].get('best') else 1)"; then :; else
    say "$bundle: no performance record; peak tune --budget $TUNE_BUDGET first"
    "$PEAK" tune "$wf/context" --budget "$TUNE_BUDGET" --json > "$WORK/tune$i.json"
    tuned=$(python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))['winners'][0]['params']
print(' '.join(f'--set {k}={v}' for part in ('inputs', 'tuning') for k, v in p[part].items()))" "$WORK/tune$i.json")
  fi
  # shellcheck disable=SC2086
  "$PEAK" export HEAD -w "$wf" --to "$exp" $tuned --json > "$WORK/export$i.json"
  sh "$exp/build.sh" > "$WORK/build$i.log" 2>&1 || { cat "$WORK/build$i.log" >&2; exit 1; }
  "$exp/harness" --warmup 3 --reps 20 --dump "$exp" > "$WORK/harness$i.txt"
  sets=$(python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))['params']
print(' '.join(f'--set {k}={v}' for part in ('inputs', 'tuning') for k, v in p[part].items()))" "$WORK/export$i.json")
  # The harness does not evict the cache between timed runs; peak run, where it would, is
  # told not to (like for like).
  flush=""
  if "$PEAK" run --help | grep -q -- --no-flush-cache; then flush="--no-flush-cache"; fi
  # shellcheck disable=SC2086
  "$PEAK" run "$wf/context" $sets $flush --warmup 3 --reps 20 --json > "$WORK/run$i.json"
  python3 - "$bundle" "$WORK/export$i.json" "$WORK/harness$i.txt" "$WORK/run$i.json" "$exp" "$TOLERANCE" >> "$WORK/rows.jsonl" <<'PY'
import hashlib, json, sys
bundle, export, harness, run, exp, tol = sys.argv[1:7]
export, run = json.load(open(export)), json.load(open(run))
text = open(harness).read()
median = float(next(l for l in text.splitlines() if l.startswith("median_ms: ")).split()[1])
outputs = []
for o in run["outputs"]:
    ours = hashlib.sha256(open(f"{exp}/{o['name']}.bin", "rb").read()).hexdigest()[:16]
    outputs.append({"name": o["name"], "peak_digest": o["digest"], "harness_digest": ours, "same": ours == o["digest"]})
ratio = median / run["median_ms"]
print(json.dumps({
    "bundle": bundle,
    "checkpoint": export["origin"].get("checkpoint"),
    "transformation": export["origin"].get("transformation"),
    "params": export["params"],
    "build": export["build"],
    "recorded_ms": export.get("recorded_time_ms"),
    "peak_run_ms": run["median_ms"],
    "harness_ms": median,
    "harness_over_peak_run": ratio,
    "harness_over_recorded": (median / export["recorded_time_ms"]) if export.get("recorded_time_ms") else None,
    "within_noise": abs(ratio - 1) <= float(tol),
    "outputs": outputs,
    "harness_output": text,
}))
PY
done

python3 - "$WORK/rows.jsonl" "$OUT/h200-export.json" "$COMMIT" "$DEVICE" "$DATE" "$TOLERANCE" <<'PY'
import json, sys
rows_file, out, commit, device, date, tol = sys.argv[1:7]
rows = [json.loads(l) for l in open(rows_file) if l.strip()]
report = {
    "benchmark": "export",
    "command": "bash bench/h200-export.sh",
    "device": device,
    "commit": commit,
    "date": date,
    "tolerance": float(tol),
    "exports": rows,
    "all_within_noise": all(r["within_noise"] for r in rows),
    "all_outputs_identical": all(o["same"] for r in rows for o in r["outputs"]),
}
json.dump(report, open(out, "w"), indent=2)
for r in rows:
    print(f"{r['bundle']}: harness {r['harness_ms']:.4f} ms, peak run {r['peak_run_ms']:.4f} ms, recorded {r['recorded_ms']} ms "
          f"({r['harness_over_peak_run']:.3f}x); outputs {'identical' if all(o['same'] for o in r['outputs']) else 'DIFFER'}", file=sys.stderr)
PY
say "done: $OUT/h200-export.json"
