# Hand experiment (not a recorded step): the bf16 decode tip (Cluster-Split-K, replayed) against a
# scratch copy whose A box holds only the rows of inp that exist when M < one tile (16 of 64 at a
# decode step; the expect-tx bytes to match), each tuned exhaustively over the same split-K
# subspace at 16 x 4096 x 4096, then both bests timed against cuBLASLt alternately in one call.
# SP (the tuned subspace), VALIDATE (the copy's validation settings) and NAME (the results
# file) default to the run recorded in bench/results/h200-compare-row-box-hand.json;
# row-box-stages-run.sh sets them for its deeper pipelines.
mkdir -p /tmp/pk && python3 -c 'import tarfile;tarfile.open("carry/gpu-tests/binaries.tar.xz").extract("./peak","/tmp/pk")'
P=/tmp/pk/peak; D=carry/exp/rowbox; export PATH=/usr/local/cuda/bin:$PATH
SP="${SP:---set K_SPLITS=2,4,8 --set WGMMA_N=64,128,192,256 --set NUM_STAGES=4,5,6 --set CLUSTER_M=1 --set FRAG_M=1 --set TILES_PER_CTA=1}"
VALIDATE="${VALIDATE:---set K_SPLITS=1,2,4 --set CLUSTER_M=1 --samples 10 --sanitize memcheck,racecheck,synccheck --sanitize-samples 3}"
NAME="${NAME:-rowbox-compare}"
timeout 120 $P validate $D/mod --against examples/gemm-nt-bias-cuda-bf16 --set M=16,40,200 --set N=136 --set K=424 $VALIDATE --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
for c in orig mod; do timeout 120 $P tune $D/$c --strategy exhaustive --set M=16 --set N=4096 --set K=4096 $SP --top-out /tmp/top-$c.json --json > $OUT/tune-$c.json 2> $OUT/tune-$c.log; echo tune $c rc=$?; done
python3 - "$P" "$D" "$OUT" "$NAME" <<'PY'
import json, subprocess, sys
peak, d, out, name = sys.argv[1:]
best = {c: json.load(open(f"/tmp/top-{c}.json"))[0]["entries"][:3] for c in ("orig", "mod")}
rows = []
for rnd in range(3):
    for c in ("orig", "mod"):
        cfg = best[c][0]["tuning"]
        sets = [a for k, v in {"M": 16, "N": 4096, "K": 4096, **cfg}.items() for a in ("--set", f"{k}={v}")]
        r = subprocess.run([peak, "baseline", f"{d}/{c}", "--against", "cublaslt", "--reps", "30", "--json", *sets], capture_output=True, text=True)
        try:
            rep = json.loads(r.stdout)
            row = {"case": c, "round": rnd, "params": cfg, "peak_ms": rep["kernel_timing"]["median_ms"], "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
        except Exception:
            row = {"case": c, "round": rnd, "error": r.stderr[-1500:]}
        print(json.dumps({k: row.get(k) for k in ("case", "round", "peak_ms", "cublaslt_ms", "pct", "matches")}), flush=True); rows.append(row)
json.dump({"top3": best, "rows": rows}, open(f"{out}/{name}.json", "w"), indent=1)
PY
