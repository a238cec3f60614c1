# Hand experiment (not a recorded step; bench/hand/column-pairs.py says why): the Column-Stage
# tips with COL_PAIRS 0 (the tip) and 1 (the bias held as packed 16-bit pairs). Prepared
# 2026-11-30, not yet run. Each dtype's copy is validated first with COL_PAIRS = 1 where no
# tile divides (200 x 456 x 96; MCAST_A 0 / 1, WGMMA_N 128 / 192) under memcheck, racecheck
# and synccheck; then both values are timed at the four NT shapes, each at its row's
# configuration (bench/results/h200-gemm-shapes.json), against cuBLASLt in one `peak baseline`
# call, two alternating rounds.
# Here: for d in bf16 f16 e4m3: copy the context of bench/results/h200-replayed-gemm-nt-bias-cuda-$d-column-stage.bundle
# to carry/exp/pairs-$d and run bench/hand/column-pairs.py on it; bash bench/h200-gemm-shapes.sh build.
# There (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/column-pairs-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
for d in bf16 f16 e4m3; do
  timeout 90 $P validate carry/exp/pairs-$d --against examples/gemm-nt-bias-cuda-$d --set M=200 --set N=456 --set K=96 --set COL_PAIRS=1 \
    --set MCAST_A=0,1 --set CLUSTER_M=2 --set TILES_PER_CTA=1,2 --set WGMMA_N=128,192 --samples 4 --sanitize memcheck,racecheck,synccheck \
    --sanitize-samples 2 --json > $OUT/validate-$d.json 2> $OUT/validate-$d.log
  echo "validate $d rc=$?"
done
python3 - "$P" "$OUT" <<'PY'
import datetime, json, subprocess, sys
peak, out = sys.argv[1:]
rows_of = {(r["dtype"], f'{r["m"]}x{r["n"]}x{r["k"]}'): r["tuned"]["params"]
           for r in json.load(open("bench/results/h200-gemm-shapes.json"))["rows"] if r["dtype"] in ("bf16", "f16", "e4m3") and r["layout"] == "NT"}
shapes = ["8192x3072x768", "8192x2304x768", "8192x768x3072", "4096x4096x4096"]
def timed(dtype, shape, pairs, rnd):
    m, n, k = shape.split("x")
    cfg = dict(rows_of[(dtype, shape)], COL_PAIRS=pairs, M=m, N=n, K=k)
    args = [a for key, v in cfg.items() for a in ("--set", f"{key}={v}")]
    r = subprocess.run([peak, "baseline", f"carry/exp/pairs-{dtype}", "--against", "cublaslt", "--reps", "30", "--json", *args], capture_output=True, text=True)
    try:
        rep = json.loads(r.stdout)
        row = {"dtype": dtype, "shape": shape, "col_pairs": pairs, "round": rnd, "peak_ms": rep["kernel_timing"]["median_ms"],
               "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
    except Exception:
        row = {"dtype": dtype, "shape": shape, "col_pairs": pairs, "round": rnd, "error": r.stderr[-800:]}
    print(json.dumps(row), flush=True)
    return row
rows = [timed(d, s, p, rnd) for rnd in range(2) for d in ("bf16", "f16", "e4m3") for s in shapes for p in (0, 1)]
dev = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
json.dump({"benchmark": "h200-compare-column-pairs-hand", "command": "OUT=dir bash bench/hand/column-pairs-run.sh", "device": dev,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": open("carry/gemm-shapes/commit").read().strip(), "rows": rows}, open(f"{out}/column-pairs.json", "w"), indent=1)
PY
