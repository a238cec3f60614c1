#!/usr/bin/env bash
# The paper's HLSL sequence (Refactor -> TB-Tiling -> Thread-Tiling) as carried out by the
# agent executor (examples/workflows/matmul-hlsl-agent.bundle, recorded on lavapipe), tuned
# on the H200 through Vulkan at n = 2048 and 4096, with cuBLAS fp32 timed in the same run.
# Run from the repository root on the GPU machine, after the Vulkan loader is in place
# (see crates/peak-hlsl/README.md):
#   PEAK=carry/peak OUT=bench/results BUDGET=96 bash bench/h200-hlsl-workflow.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PEAK="${PEAK:-carry/peak}"; OUT="${OUT:-bench/results}"; BUDGET="${BUDGET:-96}"; SIZES="${SIZES:-2048 4096}"
COMMIT="${PEAK_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
git clone -q examples/workflows/matmul-hlsl-agent.bundle "$WORK/wf"
steps="root HEAD~2 HEAD~1 HEAD"
for rev in $steps; do
  mkdir -p "$WORK/ctx-$rev"
  git -C "$WORK/wf" archive "$rev" context | tar -x -C "$WORK/ctx-$rev" --strip-components=1
  git -C "$WORK/wf" show -s --format=%s "$rev" > "$WORK/ctx-$rev.name"
done
for n in $SIZES; do
  "$PEAK" baseline examples/matmul-cuda-f32 --set n=$n --set BLOCK_X=32 --set BLOCK_Y=8 --json > "$WORK/cublas-$n.json"
  for rev in $steps; do
    "$PEAK" tune "$WORK/ctx-$rev" --set n=$n --strategy auto --budget "$BUDGET" --cache-dir "$WORK/cache" --json > "$WORK/tune-$rev-$n.json"
  done
done
python3 - "$WORK" "$OUT" "$COMMIT" "$BUDGET" "$SIZES" "$steps" <<'PY'
import json, sys, datetime, subprocess
work, out, commit, budget, sizes, steps = sys.argv[1:]
device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
peak = 67.0
result = {"benchmark": "hlsl-agent-workflow", "command": "bash bench/h200-hlsl-workflow.sh", "device": device, "commit": commit,
          "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "workflow": "examples/workflows/matmul-hlsl-agent.bundle (regions written by the agent executor)",
          "fp32_peak_tflops": peak, "fp32_peak_source": "NVIDIA H200 SXM datasheet: 67 TFLOP/s FP32 (non-tensor)",
          "tuning": f"peak tune --strategy auto --budget {budget} per step and size", "sizes": {}}
for n in sizes.split():
    n = int(n); flops = 2 * n ** 3
    cub = json.load(open(f"{work}/cublas-{n}.json"))
    cublas_tflops = cub["cublas_timing"]["tflops"]
    rows = []
    for rev in steps.split():
        t = json.load(open(f"{work}/tune-{rev}-{n}.json"))
        run = t["runs"][0]; best = run.get("best")
        name = open(f"{work}/ctx-{rev}.name").read().strip()
        row = {"step": name, "evaluations": run["evaluations"], "space": run["space"]}
        if best:
            tf = flops / (best["median_ms"] * 1e-3) / 1e12
            row.update({"best": best["tuning"], "median_ms": best["median_ms"], "tflops": tf, "percent_of_peak": 100 * tf / peak, "percent_of_cublas": 100 * tf / cublas_tflops})
        else:
            row["failures"] = run.get("failures")
        rows.append(row)
        print(f"n={n} {name:40s} " + (f"{row['tflops']:6.2f} TFLOP/s {row['percent_of_peak']:5.1f}% of peak {row['percent_of_cublas']:5.1f}% of cuBLAS" if best else f"no result {row.get('failures')}"))
    result["sizes"][str(n)] = {"cublas_fp32_tflops": cublas_tflops, "steps": rows}
json.dump(result, open(f"{out}/h200-hlsl-agent-workflow.json", "w"), indent=1)
PY
