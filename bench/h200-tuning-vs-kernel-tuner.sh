#!/usr/bin/env bash
# peak against Kernel Tuner on one H200 (issue 12, part 1: one host, one GPU, at least 10x
# Kernel Tuner's configurations per second), in one device run:
#
#  (a) `peak tune examples/sgemm-cuda-regtiled --strategy exhaustive` from a cold cache:
#      the 635 configurations at n = 2048, each compiled (NVRTC, every core), run once with
#      its output compared against the reference, warmed up and timed 7 times; the wall
#      time of the whole command and peak's own `time_breakdown` (where the time went).
#  (b) Kernel Tuner 1.3.3's brute force over the same space (bench/kernel_tuner_sgemm.py
#      reads the same manifest and source): every configuration's output checked against
#      C = A B (`answer=`, `atol=`), 7 iterations, the cupy backend (KT_LANG=nvcuda for
#      cuda-python), CuPy's kernel cache in a fresh folder.
#  (c) $OUT/h200-tuning-vs-kernel-tuner.json: both rates, their ratio, both winners, peak's
#      time breakdown and Kernel Tuner's own per-configuration split.
#
# Here (a CPU machine with Rust and a network):   bash bench/h200-tuning-vs-kernel-tuner.sh build
#   builds peak (release), strips it to carry/kt/peak, writes carry/kt/commit, and downloads
#   into .whl/ (ignored by git) Kernel Tuner and the packages it needs that the GPU image
#   lacks (python-constraint2, jsonschema with pyrsistent, xmltodict; numpy, scipy, pandas,
#   scikit-learn, attrs and packaging are there).
# There (the GPU machine, from the repository root, carrying carry/kt and .whl):
#   bash bench/h200-tuning-vs-kernel-tuner.sh
#
# Environment (all optional): OUT=bench/results, PEAK=carry/kt/peak, KT_LANG=cupy,
# KT_ATOL=1e-2, KT_CACHE=1 (let Kernel Tuner write its own cache file too, as peak does).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "h200-tuning-vs-kernel-tuner: $*" >&2; }

# Kernel Tuner and what the GPU image lacks, for its Python (3.12, x86-64).
WHEELS="kernel_tuner==1.3.3 python-constraint2==2.9.0 jsonschema==4.17.3 pyrsistent==0.19.3 xmltodict==1.0.4"

build() {
  source bench/carry.sh
  carry_peak carry/kt
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d .whl $WHEELS
  du -sh carry/kt .whl
  say "carry: carry/kt .whl"
}

run() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site

  OUT="${OUT:-bench/results}"
  PEAK="${PEAK:-carry/kt/peak}"
  KT_LANG="${KT_LANG:-cupy}"
  KT_ATOL="${KT_ATOL:-1e-2}"
  CONTEXT=examples/sgemm-cuda-regtiled
  mkdir -p "$OUT"
  [ -x "$PEAK" ] || { say "no $PEAK: run \`bash bench/h200-tuning-vs-kernel-tuner.sh build\` first"; exit 1; }
  # The device's copy of the tree has no usable git history: name the build's commit.
  source bench/stamp.sh
  stamp carry/kt/commit
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  now() { date +%s.%N; }

  # (a) peak, from a cold cache.
  say "peak tune $CONTEXT (exhaustive, cold cache)"
  local t0 t1
  t0=$(now)
  "$PEAK" tune "$CONTEXT" --strategy exhaustive --top 100000 --cache-dir "$WORK/cache" --json > "$WORK/peak.json"
  t1=$(now)
  python3 -c "print($t1 - $t0)" > "$WORK/peak.wall"

  # (b) Kernel Tuner, from a cold CuPy kernel cache.
  say "Kernel Tuner brute force ($KT_LANG) on the same space"
  local kt_cache=()
  [ -n "${KT_CACHE:-}" ] && kt_cache=(--cache "$WORK/kt-cache.json")
  CUPY_CACHE_DIR="$WORK/cupy-cache" python3 bench/kernel_tuner_sgemm.py --context "$CONTEXT" --n 2048 --lang "$KT_LANG" \
    --atol "$KT_ATOL" --iterations 7 "${kt_cache[@]}" --out "$WORK/kt.json"
  cp "$WORK/peak.json" "$OUT/h200-tuning-vs-kernel-tuner.peak.json"
  cp "$WORK/kt.json" "$OUT/h200-tuning-vs-kernel-tuner.kt.json"

  # (c) one JSON.
  python3 - "$WORK" "$OUT/h200-tuning-vs-kernel-tuner.json" "$COMMIT" "$DEVICE" "$DATE" "$CONTEXT" <<'PY'
import json, sys, tomllib
work, out, commit, device, date, context = sys.argv[1:7]
tune = json.load(open(f"{work}/peak.json"))
run = tune["runs"][0]
kt = json.load(open(f"{work}/kt.json"))
wall = float(open(f"{work}/peak.wall").read())
manifest = tomllib.load(open(f"{context}/peak.toml", "rb"))
peak_rate = run["evaluations"] / wall
kt_rate = kt.get("configurations_per_s")
best = run.get("best") or {}
report = {
    "benchmark": "tuning-vs-kernel-tuner",
    "command": "bash bench/h200-tuning-vs-kernel-tuner.sh",
    "device": device,
    "commit": commit,
    "date": date,
    "space": {
        "context": f"{context} (n = 2048)",
        "parameters": kt.get("tune_params") or manifest["tuning"],
        "constraints": manifest.get("constraints", {}).get("tuning", []),
        "size": run["space"],
        "size_kernel_tuner": kt.get("space_size"),
    },
    "peak_configs_per_s": peak_rate,
    "kernel_tuner_configs_per_s": kt_rate,
    "ratio": (peak_rate / kt_rate) if kt_rate else None,
    "target_ratio": 10,
    "peak": {
        "command": f"peak tune {context} --strategy exhaustive --top 100000 --cache-dir <fresh> --json",
        "per_configuration": "NVRTC compile on every core, one run checked against the reference (the first configuration's outputs), 1 warm-up, 7 timed runs (median of device events), 2 input sets rotated, result appended to the cache with fsync",
        "wall_s": wall,
        "evaluations": run["evaluations"],
        "measured": run["measured"],
        "failures": run["failures"],
        "pruned_at_launch": run["pruned"]["launch"],
        "pruned_by_compile_report": run["pruned"]["compile_report"],
        "worker_restarts": tune.get("worker_restarts"),
        "best": {"tuning": best.get("tuning"), "median_ms": best.get("median_ms"), "min_ms": best.get("min_ms")},
        "time_breakdown": run.get("time_breakdown"),
    },
    "kernel_tuner": {
        "version": kt.get("kernel_tuner_version"),
        "per_configuration": f"brute_force, lang={kt.get('lang')}: compile (NVRTC through the backend, one at a time), output refreshed, one run checked against C = A B (float64 on the host) with numpy.allclose(atol={kt.get('atol')}), {kt.get('iterations')} timed iterations (mean)",
        "wall_s": kt.get("wall_s"),
        "evaluated": kt.get("evaluated"),
        "measured": kt.get("measured"),
        "failed": kt.get("failed"),
        "best": kt.get("best"),
        "split_s": kt.get("split_s"),
    },
}
kt_best = (kt.get("best") or {})
if best.get("median_ms") and kt_best.get("median_ms"):
    report["best_time_ratio_kt_over_peak"] = kt_best["median_ms"] / best["median_ms"]
report["target_met"] = bool(report["ratio"] and report["ratio"] >= 10)
json.dump(report, open(out, "w"), indent=2)
print(f"peak: {run['evaluations']} configurations in {wall:.1f} s = {peak_rate:.1f}/s; "
      f"Kernel Tuner: {kt.get('evaluated')} in {kt.get('wall_s') or 0:.1f} s = {kt_rate or 0:.2f}/s; "
      f"ratio {report['ratio'] or 0:.1f}x", file=sys.stderr)
PY
  say "done: $OUT/h200-tuning-vs-kernel-tuner.json"
}

case "${1:-run}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 [build|run]" >&2; exit 2 ;;
esac
