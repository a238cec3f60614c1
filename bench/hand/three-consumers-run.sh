# Hand experiment (not a recorded step): a scratch copy of the bf16 Pair-Round tip with
# WG_M = 3 allowed (192-row tiles: setmaxnreg 32 / 160), at 8192 x 2304 x 768, against the
# tip's own best WG_M = 2 configuration and cuBLASLt in the same call.
set -x
mkdir -p /tmp/pk && python3 -c 'import tarfile;tarfile.open("carry/gpu-tests/binaries.tar.xz").extract("./peak","/tmp/pk")'
P=/tmp/pk/peak; C=carry/exp/wg3; S="--set M=8192 --set N=2304 --set K=768"
export PATH=/usr/local/cuda/bin:$PATH
(nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/cs transformations/checks/cuda_snippets.cu -lcuda && /tmp/cs) > $OUT/cuda-snippets.log 2>&1 &
W3="--set WG_M=3 --set BLOCK_Y=3 --set FRAG_M=1 --set CLUSTER_M=1"
timeout 150 $P validate $C --against examples/gemm-nt-bias-cuda-bf16 $W3 --set TILES_PER_CTA=1,2,4 --samples 8 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log
echo validate rc=$?
timeout 200 $P tune $C --strategy exhaustive $S $W3 --set WGMMA_N=128,192 --top-out /tmp/top.json --json > $OUT/tune.json 2> $OUT/tune.log
echo tune rc=$?
python3 - "$P" "$C" "$OUT" <<'PY'
import json, subprocess, sys
peak, ctx, out = sys.argv[1:]
top = json.load(open("/tmp/top.json"))[0]["entries"]
w3 = top[0]["tuning"]
w2 = dict(w3, WG_M=2, BLOCK_Y=2, FRAG_M=1, WGMMA_N=192, NUM_STAGES=4, CLUSTER_M=2, EPI_BOXES=4, TILES_PER_CTA=1)
rows = []
for rnd in range(3):
    for name, cfg in (("wg_m2", w2), ("wg_m3", w3)):
        sets = [a for k, v in {"M": 8192, "N": 2304, "K": 768, **cfg}.items() for a in ("--set", f"{k}={v}")]
        r = subprocess.run([peak, "baseline", ctx, "--against", "cublaslt", "--reps", "20", "--json", *sets], capture_output=True, text=True)
        try:
            rep = json.loads(r.stdout)
            row = {"name": name, "round": rnd, "params": cfg, "peak_ms": rep["kernel_timing"]["median_ms"], "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
        except Exception:
            row = {"name": name, "round": rnd, "error": r.stderr[-1500:]}
        print(json.dumps(row), flush=True); rows.append(row)
json.dump({"top5": top[:5], "rows": rows}, open(f"{out}/wg3-compare.json", "w"), indent=1)
PY
wait; tail -3 $OUT/cuda-snippets.log
