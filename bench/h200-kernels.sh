#!/usr/bin/env bash
# Beyond MatMul on the H200: replay the CUDA workflows of the softmax, reduction, transpose,
# stencil and attention examples (examples/workflows/<kind>-cuda-deferred.bundle: written by the agent
# executor and compile-checked with NVRTC, `--defer`, on a machine without a GPU). The
# replay validates every step against the naive root (with compute-sanitizer) and tunes it
# on this GPU; the script then writes each replayed log and
# bench/results/h200-kernels.json (best time per step, speedup over the naive root, and the
# final step against a copy of its bytes). The kinds a run measures replace their entries
# there; the others stay, each stamped with the run that measured it.
#
# Here (a CPU machine with Rust):   bash bench/h200-kernels.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-kernels.sh run
# Settings: BUDGET (tuning evaluations per input size and step, default 64), KINDS (default
# "softmax reduction transpose stencil attention"), SANITIZE_SAMPLES (default 4), REPLAY_ARGS (more
# `peak replay` flags, e.g. "--set rows=4096 --set cols=1024"), FLUSH (default 1: both yardsticks evict
# the L2 before each timed run, so arrays the H200's 60 MB L2 holds are timed from DRAM; empty: off).
#
# The yardsticks, at every input size the final step was tuned for: the final kernel at its
# best configuration against a device-to-device copy of the same bytes, in the same process
# (`peak baseline --against copy`, OUT/<kind>-<i>-baseline.json), and the library call the
# example context names (`[kernel] library` in examples/<kind>-cuda/peak.toml, e.g.
# torch.softmax, or scaled_dot_product_attention), timed with PyTorch in the same device run (bench/library_time.py,
# OUT/<kind>-<i>-library.json).
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/kernels
  ls -la carry/kernels
}

run() {
  OUT="${OUT:-h200-kernels}"
  mkdir -p "$OUT"
  PEAK="${PEAK:-carry/kernels/peak}"
  export PEAK_CACHE_DIR="$OUT/cache"
  BUDGET="${BUDGET:-64}"
  SANITIZE_SAMPLES="${SANITIZE_SAMPLES:-4}"
  KINDS="${KINDS:-softmax reduction transpose stencil attention gelu-bf16 layernorm}"
  FLUSH="${FLUSH-1}"
  "$PEAK" info | tee "$OUT/info.txt"
  for kind in $KINDS; do
    echo "== $kind"
    # The line each kind is measured on: the stencil's is its branch register-window (the
    # tiled main line stops at 72% of copy bandwidth); the attention's its branch query-tile
    # (Query-Tile after KV-Tile); the others' their bundle's main.
    local line=()
    [ "$kind" = stencil ] && line=(--branch register-window)
    [ "$kind" = attention ] && line=(--branch query-tile)
    echo "${line[1]:-main}" > "$OUT/$kind-branch.txt"
    # shellcheck disable=SC2086
    "$PEAK" replay "examples/workflows/$kind-cuda-deferred.bundle" --into "$OUT/$kind" "${line[@]}" \
      --budget "$BUDGET" --sanitize-samples "$SANITIZE_SAMPLES" ${REPLAY_ARGS:-} 2>&1 | tee "$OUT/$kind-replay.log"
    "$PEAK" log -w "$OUT/$kind" --json > "$OUT/$kind-log.json"
    "$PEAK" show HEAD -w "$OUT/$kind" --json > "$OUT/$kind-final.json"
    # One line per tuned input size: "<input --set flags>|<tuning --set flags>".
    python3 -c 'import json, sys
for run in json.load(open(sys.argv[1]))["performance"]["runs"]:
    if run.get("best"):
        p = run["best"]["params"]
        flags = lambda part: " ".join(f"--set {k}={v}" for k, v in part.items())
        print(flags(p["inputs"]) + "|" + flags(p["tuning"]))' "$OUT/$kind-final.json" > "$OUT/$kind-sizes.txt"
    i=0
    while IFS='|' read -r inputs tuning; do
      # shellcheck disable=SC2086
      "$PEAK" baseline "$OUT/$kind/context" --against copy $inputs $tuning --reps 50 ${FLUSH:+--flush-cache} --json > "$OUT/$kind-$i-baseline.json" 2> "$OUT/$kind-$i-baseline.err"
      # shellcheck disable=SC2086
      python3 bench/library_time.py "examples/$kind-cuda" $inputs ${FLUSH:+--flush-cache} > "$OUT/$kind-$i-library.json" 2> "$OUT/$kind-$i-library.err"
      i=$((i + 1))
    done < "$OUT/$kind-sizes.txt"
  done
  COMMIT="$(cat "$(dirname "$PEAK")/commit" 2>/dev/null || git rev-parse --short HEAD)" OUT="$OUT" KINDS="$KINDS" python3 - <<'PY'
import json, os, datetime
out, kinds = os.environ["OUT"], os.environ["KINDS"].split()
info = open(os.path.join(out, "info.txt")).read()
# The GPU's name as the yardstick runs report it (peak info lists every backend).
def baseline_device():
    for kind in kinds:
        for name in sorted(os.listdir(out)):
            if name.startswith(f"{kind}-") and name.endswith("-baseline.json"):
                try:
                    return json.load(open(os.path.join(out, name)))["device"]
                except (OSError, ValueError, KeyError):
                    pass
    return "unknown"
device = baseline_device()
date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
# A device call has a time limit, so kinds are often measured in separate runs: this run's
# kinds replace their entries in the results file, the others stay, each with its own stamp.
path = "bench/results/h200-kernels.json"
try:
    result = json.load(open(path))
except (OSError, ValueError):
    result = {"benchmark": "h200-kernels", "kernels": {}}
result.update({"command": "bash bench/h200-kernels.sh run (each kernel's own run under kernels.<kind>.run)", "device": device,
               "commit": os.environ["COMMIT"], "date": date, "info": info})
stamp = {"command": f"KINDS=\"{' '.join(kinds)}\" bash bench/h200-kernels.sh run", "commit": os.environ["COMMIT"], "date": date}
for kind in kinds:
    try:
        log = json.load(open(os.path.join(out, f"{kind}-log.json")))
        final = json.load(open(os.path.join(out, f"{kind}-final.json")))
    except (OSError, ValueError) as e:
        result["kernels"][kind] = {"error": str(e), "run": stamp}
        continue
    steps = [{k: e.get(k) for k in ("transformation", "verdict", "best_time_ms", "speedup_over_root")} for e in reversed(log)]
    branch = open(os.path.join(out, f"{kind}-branch.txt")).read().strip()
    entry = {"run": stamp, "branch": branch, "steps": steps}
    entry["final"] = (final.get("performance") or {}).get("best") or {}
    # Per tuned input size: bytes moved, GB/s and % of copy bandwidth (peak baseline
    # --against copy), and the library call's time (bench/library_time.py), same device run.
    entry["sizes"] = []
    i = 0
    while os.path.exists(os.path.join(out, f"{kind}-{i}-baseline.json")):
        row = {}
        for part, name in (("copy_baseline", "baseline"), ("library", "library")):
            try:
                row[part] = json.load(open(os.path.join(out, f"{kind}-{i}-{name}.json")))
            except (OSError, ValueError) as e:
                err = os.path.join(out, f"{kind}-{i}-{name}.err")
                row[part] = {"error": str(e), "stderr": open(err).read()[-2000:] if os.path.exists(err) else "not run (the device call ended first)"}
        kernel_ms = row["copy_baseline"].get("kernel_ms")
        library_ms = row["library"].get("median_ms")
        if kernel_ms and library_ms:
            row["speedup_over_library"] = library_ms / kernel_ms
        entry["sizes"].append(row)
        i += 1
    result["kernels"][kind] = entry
os.makedirs("bench/results", exist_ok=True)
json.dump(result, open(path, "w"), indent=2)
json.dump(result, open(os.path.join(out, "h200-kernels.json"), "w"), indent=2)
print(json.dumps({kind: result["kernels"][kind] for kind in kinds}, indent=2))
PY
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
