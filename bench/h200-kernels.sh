#!/usr/bin/env bash
# Beyond MatMul on the H200: replay the CUDA workflows of the softmax, reduction, transpose
# and stencil examples (examples/workflows/<kind>-cuda-deferred.bundle: written by the agent
# executor and compile-checked with NVRTC, `--defer`, on a machine without a GPU). The
# replay validates every step against the naive root (with compute-sanitizer) and tunes it
# on this GPU; the script then writes each replayed log and
# bench/results/h200-kernels.json (best time per step, speedup over the naive root, and the
# final step against a copy of its bytes).
#
# Here (a CPU machine with Rust):   bash bench/h200-kernels.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-kernels.sh run
# Settings: BUDGET (tuning evaluations per input size and step, default 64), KINDS (default
# "softmax reduction transpose stencil"), SANITIZE_SAMPLES (default 4), REPLAY_ARGS (more
# `peak replay` flags, e.g. "--set rows=4096 --set cols=1024").
#
# The yardstick: each final kernel at its best configuration against a device-to-device
# copy of the same bytes, in the same process (`peak baseline --against copy`, written to
# OUT/<kind>-baseline.json). Not here yet: `torch.softmax` timed beside the softmax.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  cargo build --release -p peak-cli
  mkdir -p carry/kernels
  cp target/release/peak carry/kernels/peak
  strip carry/kernels/peak
  git rev-parse --short HEAD > carry/kernels/commit
  ls -la carry/kernels
}

run() {
  OUT="${OUT:-h200-kernels}"
  mkdir -p "$OUT"
  PEAK="${PEAK:-carry/kernels/peak}"
  export PEAK_CACHE_DIR="$OUT/cache"
  BUDGET="${BUDGET:-64}"
  SANITIZE_SAMPLES="${SANITIZE_SAMPLES:-4}"
  KINDS="${KINDS:-softmax reduction transpose stencil}"
  "$PEAK" info | tee "$OUT/info.txt"
  for kind in $KINDS; do
    echo "== $kind"
    # shellcheck disable=SC2086
    "$PEAK" replay "examples/workflows/$kind-cuda-deferred.bundle" --into "$OUT/$kind" \
      --budget "$BUDGET" --sanitize-samples "$SANITIZE_SAMPLES" ${REPLAY_ARGS:-} 2>&1 | tee "$OUT/$kind-replay.log"
    "$PEAK" log -w "$OUT/$kind" --json > "$OUT/$kind-log.json"
    "$PEAK" show HEAD -w "$OUT/$kind" --json > "$OUT/$kind-final.json"
    # The yardstick: the final kernel at its best configuration against a device-to-device
    # copy of the bytes it moves, in the same process (`peak baseline --against copy`).
    sets="$(python3 -c 'import json, sys
best = json.load(open(sys.argv[1]))["performance"]["best"]["params"]
print(" ".join(f"--set {k}={v}" for part in (best["inputs"], best["tuning"]) for k, v in part.items()))' "$OUT/$kind-final.json")"
    # shellcheck disable=SC2086
    "$PEAK" baseline "$OUT/$kind/context" --against copy $sets --reps 50 --json > "$OUT/$kind-baseline.json" 2> "$OUT/$kind-baseline.err"
  done
  COMMIT="$(cat carry/kernels/commit 2>/dev/null || git rev-parse --short HEAD)" OUT="$OUT" KINDS="$KINDS" python3 - <<'PY'
import json, os, datetime
out, kinds = os.environ["OUT"], os.environ["KINDS"].split()
info = open(os.path.join(out, "info.txt")).read()
device = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.strip().startswith("cuda") and ":" in line), info.strip().splitlines()[0] if info.strip() else "unknown")
result = {"benchmark": "h200-kernels", "command": "bash bench/h200-kernels.sh run", "device": device, "commit": os.environ["COMMIT"],
          "date": datetime.datetime.utcnow().isoformat() + "Z", "info": info, "kernels": {}}
for kind in kinds:
    try:
        log = json.load(open(os.path.join(out, f"{kind}-log.json")))
        final = json.load(open(os.path.join(out, f"{kind}-final.json")))
    except (OSError, ValueError) as e:
        result["kernels"][kind] = {"error": str(e)}
        continue
    steps = [{k: e.get(k) for k in ("transformation", "verdict", "best_time_ms", "speedup_over_root")} for e in reversed(log)]
    entry = {"steps": steps}
    entry["final"] = (final.get("performance") or {}).get("best") or {}
    # Bytes moved, GB/s and % of copy bandwidth: peak baseline --against copy, same run.
    try:
        entry["copy_baseline"] = json.load(open(os.path.join(out, f"{kind}-baseline.json")))
    except (OSError, ValueError) as e:
        entry["copy_baseline"] = {"error": str(e)}
    result["kernels"][kind] = entry
os.makedirs("bench/results", exist_ok=True)
path = "bench/results/h200-kernels.json"
json.dump(result, open(path, "w"), indent=2)
json.dump(result, open(os.path.join(out, "h200-kernels.json"), "w"), indent=2)
print(json.dumps(result["kernels"], indent=2))
PY
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
