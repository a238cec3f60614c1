#!/usr/bin/env bash
# A line of the square NN case-study kernel replayed on the H200 and timed against cuBLASLt
# (NN, no epilogue, n = 4096), beside the case study's own tip at its recorded best (the
# table's NN row), two alternating rounds:
#   DTYPE=f16 (default): examples/workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle,
#     Persistent-Tiles ... Stmatrix-Staging, then BRANCH (default multicast-a: Three-Consumers
#     -> Multicast-A);
#   DTYPE=f32: examples/workflows/matmul-cuda-f32.bundle, BRANCH (default epilogue-vector:
#     Pipelining -> the joint k-step staging -> Interior-Loop -> Epilogue-Vector).
# The line is replayed at n = 2048 (every step validated, sanitized at n = 256, tuned briefly:
# 16 configurations), its tip validated again where no tile divides n (200 and 456) under
# memcheck, racecheck and synccheck over the parameters its last steps added, retuned at
# n = 4096, then timed. Writes $OUT/square-<dtype>-line.json (command, device, commit, date),
# the replayed workflow's bundle and the logs.
# RESUME_FROM=<a bundle this script wrote> replays only the steps BRANCH has added since.
# RESUME=<a bundle this script wrote> skips the replay and the validation (done when it was
# written) and retunes and times that workflow again.
# Here: bash bench/h200-gemm-shapes.sh build; there (carry carry/gemm-shapes):
#   OUT=dir [DTYPE=f32] [BRANCH=...] [RESUME=bundle] bash bench/h200-square-line.sh
set -uo pipefail
cd "$(dirname "$0")/.."
P="${PEAK:-carry/gemm-shapes/peak}"; DTYPE="${DTYPE:-f16}"
case "$DTYPE" in
  f16) B=examples/workflows/matmul-cuda-f16-consumer-overlap-deferred.bundle; BRANCH="${BRANCH:-multicast-a}"; BUDGET=160
       EDGES=(--set TILES_PER_CTA=1,2,4 --set MCAST_A=0,1 --set CLUSTER_M=1,2); SPACE=(--set NUM_STAGES=3,4,5 --set EPI_BOXES=2,4) ;;
  f32) B=examples/workflows/matmul-cuda-f32.bundle; BRANCH="${BRANCH:-epilogue-vector}"; BUDGET=400
       EDGES=(--set K_SPLITS=1,2 --set CHUNK_X=1,2,4 --set VEC=4)
       # Both tile families the NT line's tips took at 4096^3: one 256-thread block an SM with
       # 16 x 8 or 8 x 16 outputs a thread (TILE_K 8), and two blocks an SM of 8 x 8 (TILE_K 16);
       # register staging needs two stages only: 384 points.
       SPACE=(--set BLOCK_X=8,16,32 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=4 --set CHUNK_Y=4 --set VEC=4 --set K_SPLITS=1
              --set OFFSET=0,1 --set GROUP_M=1,8 --set MIN_BLOCKS=1,2 --set NUM_STAGES=2 --set TILE_K=8,16) ;;
  *) echo "DTYPE=$DTYPE: f16 or f32" >&2; exit 2 ;;
esac
if [ "$DTYPE/$BRANCH" = f32/warp-tiling ]; then
  # Warp-Tiling's WARP_X over the tip's family (16 x 8 outputs a thread in chunks of 4, TILE_K 8,
  # register staging over three or four stages: two lost 30 points in
  # h200-square-f32-fragment-prefetch-check.json) at 256 and at 128 threads: 128 points.
  EDGES+=(--set WARP_X=4,8)
  SPACE=(--set BLOCK_X=16 --set BLOCK_Y=8,16 --set TRD_X=8 --set TRD_Y=16 --set CHUNK_X=4 --set CHUNK_Y=4 --set VEC=4 --set K_SPLITS=1
         --set OFFSET=0,1 --set GROUP_M=1,8 --set MIN_BLOCKS=1,2 --set NUM_STAGES=3,4 --set TILE_K=8 --set WARP_X=2,4,8,16)
  BUDGET=140
fi
if [ "$DTYPE/$BRANCH" = f32/stream-k ]; then
  # Stream-K after Warp-Tiling: the warp-tiling tip's family with STREAM_K 0 (one block a
  # tile), 1 and 2; validated where the tiles are fewer than one wave (n = 200, 456: every
  # tile's k-steps shared among up to 132 blocks) under the three sanitizers: 18 points.
  EDGES=(--set CHUNK_X=1,2,4 --set VEC=4 --set WARP_X=4 --set STREAM_K=1,2 --set K_SPLITS=1)
  SPACE=(--set BLOCK_X=16 --set BLOCK_Y=16 --set TRD_X=8 --set TRD_Y=16 --set CHUNK_X=4 --set CHUNK_Y=4 --set VEC=4 --set K_SPLITS=1
         --set OFFSET=1 --set GROUP_M=8 --set MIN_BLOCKS=1 --set NUM_STAGES=3,4 --set TILE_K=8 --set WARP_X=2,4,8 --set STREAM_K=0,1,2)
  BUDGET=18
fi
# RETUNE_SET="NAME=V1,V2 ...": the retune's space instead (with RETUNE_BUDGET evaluations,
# RETUNE_TIME seconds), e.g. a wider one around a returned replay (RESUME=).
if [ -n "${RETUNE_SET:-}" ]; then
  SPACE=(); for a in $RETUNE_SET; do SPACE+=(--set "$a"); done
fi
BUDGET="${RETUNE_BUDGET:-$BUDGET}"
WF=/tmp/square-$DTYPE-$BRANCH
rm -rf "$WF"
if [ -n "${RESUME_FROM:-}" ]; then
  # An earlier call's replay (its bundle) without its trailing retunes: `peak replay` keeps
  # its steps and replays, validates and tunes only those BRANCH has added since.
  python3 -c "import sys; sys.path.insert(0, 'bench'); import gemm_shapes as g; g.resume_from(sys.argv[1], sys.argv[2])" "$RESUME_FROM" "$WF" \
    && echo "resuming from $RESUME_FROM"
fi
if [ -n "${RESUME:-}" ]; then
  # A replay this script wrote before (its bundle), validated then: retuned and timed again.
  git clone -q "$RESUME" "$WF" && echo "resumed from $RESUME"
else
  timeout 300 $P replay $B --branch "$BRANCH" --into "$WF" --set n=2048 --budget 16 --time 8 --samples 4 \
    --sanitize-samples 1 --sanitize-at n=256 > "$OUT/replay.log" 2>&1
  echo "replay rc=$?"
  timeout 120 $P validate "$WF/context" --against examples/matmul-cuda-$DTYPE --set n=200,456 "${EDGES[@]}" \
    --samples 12 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > "$OUT/validate.json" 2> "$OUT/validate.log"
  echo "validate rc=$?"
  # the replay as validated, for RESUME= should the retune below not finish in this call
  $P bundle "$WF" "$OUT/h200-replayed-matmul-cuda-$DTYPE-$BRANCH.bundle" > /dev/null 2>&1
fi
timeout 200 $P retune -w "$WF" --set n=4096 --budget "$BUDGET" --time "${RETUNE_TIME:-150}" --no-sanitize-winner "${SPACE[@]}" > "$OUT/retune.log" 2>&1
echo "retune rc=$?"
$P bundle "$WF" "$OUT/h200-replayed-matmul-cuda-$DTYPE-$BRANCH.bundle" > /dev/null 2>&1
python3 - "$P" "$WF" "$OUT" "$BRANCH" "$DTYPE" <<'PY'
import datetime, json, os, subprocess, sys
sys.path.insert(0, "bench")
import gemm_shapes as g
peak, wf, out, branch, dtype = sys.argv[1:]
tip = json.loads(subprocess.run([peak, "show", "HEAD", "-w", wf, "--json"], capture_output=True, text=True).stdout or "{}")
best = g.tip_best(peak, wf)
case = os.path.join("/tmp", f"square-{dtype}-case-study")
subprocess.run(["rm", "-rf", case]); subprocess.run(["git", "clone", "-q", g.SQUARE_TIPS[dtype][0], case])
case_best = g.recorded_best(g.SQUARE_TIPS[dtype][1], 4096)
timed = [(f"{branch} tip", os.path.join(wf, "context"), best), ("case-study tip", os.path.join(case, "context"), case_best)]
if "STREAM_K" in (best or {}):
    # the same kernel with the schedule switched, to read what the share-out itself gains
    other = 0 if int(best["STREAM_K"]) else 1
    timed.append((f"{branch} tip at STREAM_K={other}", os.path.join(wf, "context"), dict(best, STREAM_K=other)))
rows = []
for rnd in range(2):
    for label, ctx, cfg in timed:
        r = g.baseline(peak, ctx, {"n": 4096}, cfg, 20)
        r.update(label=label, round=rnd)
        print(json.dumps({k: r.get(k) for k in ("label", "round", "peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")}), flush=True)
        rows.append(r)
resumed = "".join(f"{name}={os.environ[name]} " for name in ("RESUME_FROM", "RESUME") if os.environ.get(name))
doc = {"benchmark": f"h200-square-{dtype}-line", "command": f"OUT=dir DTYPE={dtype} BRANCH={branch} {resumed}bash bench/h200-square-line.sh",
       "device": next((r.get("device") for r in rows if r.get("device")), None), "commit": os.environ.get("PEAK_COMMIT") or open("carry/gemm-shapes/commit").read().strip(),
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "line": [e["transformation"] for e in reversed(g.steps_of(peak, wf))], "tip_verdict": tip.get("verdict"), "rows": rows}
json.dump(doc, open(os.path.join(out, f"square-{dtype}-line.json"), "w"), indent=1)
PY
