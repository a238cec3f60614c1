# Hand experiment (not a recorded step; bench/hand/f32-unroll-stage.py says why): the square
# fp32 NN tip at its tuned configuration with the k loop unrolled 1 (the tip), 2 and 4 times,
# at two and four stages, each against cuBLASLt in one `peak baseline` call (n = 4096, warm-up,
# events, medians, L2 flushed), two alternating rounds; validated first at n = 456 (no tile
# divides it) over UNROLL_T 2 and 4.
# Here: the context carry/exp/f32u (f32-unroll-stage.py on a copy of the replayed tip,
# bench/results/h200-replayed-matmul-cuda-f32-epilogue-vector.bundle) and bash bench/h200-gemm-shapes.sh
# build; there (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/f32-unroll-stage-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
BASE="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=8 K_SPLITS=1 MIN_BLOCKS=1 OFFSET=1 TILE_K=8 TRD_X=8 TRD_Y=16 VEC=4"
timeout 120 $P validate carry/exp/f32u --against examples/matmul-cuda-f32 --set n=456 --set UNROLL_T=2,4 --set NUM_STAGES=2,4 \
  --samples 8 --json > $OUT/validate.json 2> $OUT/validate.log
echo "validate rc=$?"
python3 - "$P" "$OUT" "$BASE" <<'PY'
import datetime, json, subprocess, sys
peak, out, base = sys.argv[1:]
def timed(u, stages, rnd):
    cfg = dict(kv.split("=") for kv in base.split()) | {"UNROLL_T": u, "NUM_STAGES": stages, "n": 4096}
    args = [a for key, v in cfg.items() for a in ("--set", f"{key}={v}")]
    r = subprocess.run([peak, "baseline", "carry/exp/f32u", "--against", "cublaslt", "--reps", "20", "--json", *args], capture_output=True, text=True)
    try:
        rep = json.loads(r.stdout)
        row = {"unroll_t": u, "num_stages": stages, "round": rnd, "peak_ms": rep["kernel_timing"]["median_ms"],
               "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
    except Exception:
        row = {"unroll_t": u, "num_stages": stages, "round": rnd, "error": r.stderr[-600:]}
    print(json.dumps(row), flush=True)
    return row
rows = [timed(u, st, rnd) for rnd in range(2) for st in (2, 4) for u in (1, 2, 4)]
dev = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
json.dump({"benchmark": "h200-compare-f32-unroll-stage-hand", "command": "OUT=dir bash bench/hand/f32-unroll-stage-run.sh", "device": dev,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": open("carry/gemm-shapes/commit").read().strip(), "rows": rows}, open(f"{out}/f32-unroll-stage.json", "w"), indent=1)
PY
