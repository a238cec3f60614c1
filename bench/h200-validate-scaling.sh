#!/usr/bin/env bash
# Validation on every GPU of a host (issue 12): `peak validate` of the register-tiled SGEMM
# example against itself at n = N, SAMPLES samples, without the sanitizer (`peak validate`
# runs it only when asked), timed as a whole command on 1 GPU and on
# 2 (--devices 0 / 0,1). A first, untimed run records the references both timed runs then
# read from the same store, so what is timed is the candidate's compiled, compared runs.
# Writes OUT/h200-validate-scaling.json: wall times, the speedup, devices_served and
# whether both runs gave every sample the same verdict.
#
# Here (a CPU machine with Rust):   bash bench/h200-scaling.sh build   (the same carry)
# There (an nvidia-h200-x2 machine, carrying carry/scaling):
#   OUT=dir bash bench/h200-validate-scaling.sh
# Environment (all optional): OUT=bench/results, PEAK=carry/scaling/peak,
# CONTEXT=examples/sgemm-cuda-regtiled, N=4096, SAMPLES=16.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-bench/results}"
PEAK="${PEAK:-carry/scaling/peak}"
CONTEXT="${CONTEXT:-examples/sgemm-cuda-regtiled}"
N="${N:-4096}"
SAMPLES="${SAMPLES:-16}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export PEAK_CACHE_DIR="$WORK/cache"

args=(validate "$CONTEXT" --against "$CONTEXT" --samples "$SAMPLES" --set "n=$N" --json)
"$PEAK" "${args[@]}" --devices 0 > "$WORK/record.json"
for devices in 0 0,1; do
  t0="$(date +%s.%N)"
  "$PEAK" "${args[@]}" --devices "$devices" > "$WORK/validate-$devices.json"
  t1="$(date +%s.%N)"
  echo "$t0 $t1" > "$WORK/time-$devices"
done

source bench/stamp.sh
stamp "$(dirname "$PEAK")/commit"
python3 - "$WORK" "$OUT/h200-validate-scaling.json" "$COMMIT" "$DEVICE" "$DATE" "$CONTEXT" "$N" "$SAMPLES" <<'PY'
import json, sys
work, out, commit, device, date, context, n, samples = sys.argv[1:9]
rows = {}
for devices in ("0", "0,1"):
    t0, t1 = map(float, open(f"{work}/time-{devices}").read().split())
    report = json.load(open(f"{work}/validate-{devices}.json"))
    rows[devices] = {
        "devices": devices,
        "wall_s": t1 - t0,
        "outcome": report["outcome"],
        "counts": report["counts"],
        "devices_served": report.get("devices_served"),
        "verdicts": [(s["index"], s["verdict"]["category"]) for s in report["samples"]],
    }
one, two = rows["0"], rows["0,1"]
result = {
    "benchmark": "multi-gpu-validation",
    "command": "bash bench/h200-validate-scaling.sh",
    "device": device, "commit": commit, "date": date,
    "what": f"peak validate {context} --against {context} --samples {samples} --set n={n} --devices D (no sanitizer: validate runs it only when asked), "
            "timed as a whole command after an untimed run recorded the references (the same store for both)",
    "runs": [one, two],
    "speedup_2_over_1": one["wall_s"] / two["wall_s"],
    "same_verdicts": one["verdicts"] == two["verdicts"],
}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps({k: result[k] for k in ("speedup_2_over_1", "same_verdicts")} | {"wall_s": [one["wall_s"], two["wall_s"]], "served": two["devices_served"]}))
PY
