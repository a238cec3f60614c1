# Hand experiment (not a recorded step; bench/results/h200-compare-async-fill-hand.json): the fp32
# NT line's tips (joint-staging's Launch-Bounds, carry/exp/f32/joint; Fragment-Prefetch, carry/exp/f32/fp) against a scratch copy whose tiles are
# filled by cp.async straight into shared memory (carry/exp/f32/async, bench/hand/async-fill.py).
# The copy is validated against the example at shapes that do not divide (memcheck, racecheck),
# tuned exhaustively over one subspace at 4096^3 and at 8192 x 3072 x 768, and its best timed
# beside the tips' recorded configurations and cuBLASLt, alternately, in one call.
# Here: bash bench/hand/prepare.sh && bash bench/h200-gemm-shapes.sh build; carry carry/exp and
# carry/gemm-shapes.
cd "$(dirname "$0")/../.."
P=carry/gemm-shapes/peak; D=carry/exp/f32; export PATH=/usr/local/cuda/bin:$PATH
SP="${SP:---set BLOCK_X=8,16 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set TILE_K=8,16 --set NUM_STAGES=2,3,4,5 --set MIN_BLOCKS=1,2 --set CHUNK_X=4 --set CHUNK_Y=4 --set OFFSET=1 --set VEC=4 --set GROUP_M=8 --set K_SPLITS=1}"
timeout 120 $P validate $D/async --against examples/gemm-nt-bias-cuda --set M=61,130 --set N=47,200 --set K=33,72 --set NUM_STAGES=2,3,5 --set K_SPLITS=1,2 --samples 10 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
for s in 4096x4096x4096 8192x3072x768; do
  IFS=x read -r m n k <<< "$s"
  timeout 170 $P tune $D/async --strategy exhaustive --time 130 --set M=$m --set N=$n --set K=$k $SP --top-out /tmp/top-$s.json --json > $OUT/tune-$s.json 2> $OUT/tune-$s.log; echo tune $s rc=$?
done
python3 - "$P" "$D" "$OUT" <<'PY'
import json, subprocess, sys
peak, d, out = sys.argv[1:]
# The configurations the two tips were retuned to at each shape: joint-staging's (the rows of
# bench/results/h200-gemm-shapes.json at these shapes) and Fragment-Prefetch's own retunes.
JOINT = dict(BLOCK_X=16, BLOCK_Y=16, CHUNK_X=4, CHUNK_Y=4, GROUP_M=1, K_SPLITS=1, MIN_BLOCKS=2, NUM_STAGES=2, OFFSET=1, TILE_K=16, TRD_X=8, TRD_Y=8, VEC=4)
recorded = {
    "4096x4096x4096": (JOINT, dict(BLOCK_X=16, BLOCK_Y=8, CHUNK_X=4, CHUNK_Y=4, GROUP_M=1, K_SPLITS=1, MIN_BLOCKS=2, NUM_STAGES=2, OFFSET=1, TILE_K=16, TRD_X=8, TRD_Y=16, VEC=4)),
    "8192x3072x768": (JOINT, dict(BLOCK_X=32, BLOCK_Y=8, CHUNK_X=2, CHUNK_Y=4, GROUP_M=8, K_SPLITS=1, MIN_BLOCKS=1, NUM_STAGES=2, OFFSET=1, TILE_K=16, TRD_X=8, TRD_Y=16, VEC=4)),
}
rows, best = [], {}
for s, (joint, fp) in recorded.items():
    m, n, k = (int(x) for x in s.split("x"))
    try:
        best[s] = json.load(open(f"/tmp/top-{s}.json"))[0]["entries"][:3]
    except Exception as e:
        print(f"no tuning result at {s}: {e}"); continue
    cases = {"joint": ("joint", joint), "fp": ("fp", fp), "async": ("async", best[s][0]["tuning"]), "async-at-joint": ("async", joint)}
    for rnd in range(3):
        for label, (ctx, tuning) in cases.items():
            sets = [a for key, v in {"M": m, "N": n, "K": k, **tuning}.items() for a in ("--set", f"{key}={v}")]
            r = subprocess.run([peak, "baseline", f"{d}/{ctx}", "--against", "cublaslt", "--reps", "30", "--json", *sets], capture_output=True, text=True)
            try:
                rep = json.loads(r.stdout)
                row = {"shape": s, "case": label, "round": rnd, "params": tuning, "peak_ms": rep["kernel_timing"]["median_ms"], "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
            except Exception:
                row = {"shape": s, "case": label, "round": rnd, "params": tuning, "error": (r.stderr or r.stdout)[-1500:]}
            print(json.dumps({key: row.get(key) for key in ("shape", "case", "round", "peak_ms", "cublaslt_ms", "pct", "matches", "error")}), flush=True); rows.append(row)
json.dump({"top3": best, "rows": rows}, open(f"{out}/async-fill-compare.json", "w"), indent=1)
PY
