#!/usr/bin/env bash
# The square NN f16 case-study kernel's persistent line (examples/workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle:
# Persistent-Tiles ... Stmatrix-Staging, then BRANCH, default multicast-a: Three-Consumers -> Multicast-A) replayed on
# the H200 at n = 2048 (every step validated, sanitized at n = 256, tuned briefly: 16 configurations), the tip validated again
# where no tile divides n (200 and 456) with TILES_PER_CTA 1, 2, 4 and both cluster layouts under memcheck,
# racecheck and synccheck, retuned at n = 4096, then timed against cuBLASLt (NN, f16, no epilogue) in one
# `peak baseline` call, beside the case study's TMA-Store tip at its recorded best (the table's NN f16 row),
# two alternating rounds. Writes $OUT/square-f16-line.json (command, device, commit, date) and the replayed
# workflow's bundle.
# Here: bash bench/h200-gemm-shapes.sh build; there (carry carry/gemm-shapes): OUT=dir bash bench/h200-square-f16-line.sh
set -uo pipefail
cd "$(dirname "$0")/.."
P="${PEAK:-carry/gemm-shapes/peak}"; BRANCH="${BRANCH:-multicast-a}"; WF=/tmp/square-f16-$BRANCH
B=examples/workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle
rm -rf "$WF"
timeout 300 $P replay $B --branch "$BRANCH" --into "$WF" --set n=2048 --budget 16 --time 8 --samples 4 \
  --sanitize-samples 1 --sanitize-at n=256 > "$OUT/replay.log" 2>&1
echo "replay rc=$?"
timeout 120 $P validate "$WF/context" --against examples/matmul-cuda-f16 --set n=200,456 --set TILES_PER_CTA=1,2,4 --set MCAST_A=0,1 --set CLUSTER_M=1,2 \
  --samples 12 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > "$OUT/validate.json" 2> "$OUT/validate.log"
echo "validate rc=$?"
timeout 150 $P retune -w "$WF" --set n=4096 --budget 160 --time 100 --no-sanitize-winner --set NUM_STAGES=3,4,5 --set EPI_BOXES=2,4 > "$OUT/retune.log" 2>&1
echo "retune rc=$?"
$P bundle "$WF" "$OUT/h200-replayed-matmul-cuda-f16-$BRANCH.bundle" > /dev/null 2>&1
python3 - "$P" "$WF" "$OUT" "$BRANCH" <<'PY'
import datetime, json, os, subprocess, sys
sys.path.insert(0, "bench")
import gemm_shapes as g
peak, wf, out, branch = sys.argv[1:]
tip = json.loads(subprocess.run([peak, "show", "HEAD", "-w", wf, "--json"], capture_output=True, text=True).stdout or "{}")
best = g.tip_best(peak, wf)
case = os.path.join("/tmp", "square-f16-tma-store")
subprocess.run(["rm", "-rf", case]); subprocess.run(["git", "clone", "-q", g.SQUARE_TIPS["f16"][0], case])
case_best = g.recorded_best(g.SQUARE_TIPS["f16"][1], 4096)
rows = []
for rnd in range(2):
    for label, ctx, cfg in ((f"{branch} tip", os.path.join(wf, "context"), best), ("case-study TMA-Store tip", os.path.join(case, "context"), case_best)):
        r = g.baseline(peak, ctx, {"n": 4096}, cfg, 20)
        r.update(label=label, round=rnd)
        print(json.dumps({k: r.get(k) for k in ("label", "round", "peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")}), flush=True)
        rows.append(r)
doc = {"benchmark": "h200-square-f16-line", "command": f"OUT=dir BRANCH={branch} bash bench/h200-square-f16-line.sh",
       "device": next((r.get("device") for r in rows if r.get("device")), None), "commit": os.environ.get("PEAK_COMMIT", open("carry/gemm-shapes/commit").read().strip()),
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "line": [e["transformation"] for e in reversed(g.steps_of(peak, wf))], "tip_verdict": tip.get("verdict"), "rows": rows}
json.dump(doc, open(os.path.join(out, "square-f16-line.json"), "w"), indent=1)
PY
