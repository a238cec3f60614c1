# Hand experiment (not a recorded step; bench/hand/tile-switch.py says why and what each
# ABLATE value removes): the bf16 and f16 tips (TIP=multicast-a, the default, or column-stage) at the three K = 768 / MLP shapes,
# each at its row's tuned configuration (bench/results/h200-gemm-shapes.json), with ABLATE 0
# (the tip), 1 (no bias loads), 2 (no TMA stores) and 3 (no epilogue), each against cuBLASLt
# in one `peak baseline` call (warm-up, events, medians, L2 flushed), two alternating rounds.
# Variants 1-3 compute wrong outputs on purpose: only their times are read.
# Here: the contexts under carry/exp/tsw-{bf16,f16} (bench/hand/tile-switch.py on copies of the
# TIP replays' tips: bench/results/h200-replayed-gemm-nt-bias-cuda-<dtype>-<TIP>.bundle) and bash bench/h200-gemm-shapes.sh build; there (carry
# carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/tile-switch-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
python3 - "$P" "$OUT" <<'PY'
import json, subprocess, sys
peak, out = sys.argv[1:]
rows_of = {(r["dtype"], f'{r["m"]}x{r["n"]}x{r["k"]}'): r["tuned"]["params"]
           for r in json.load(open("bench/results/h200-gemm-shapes.json"))["rows"] if r["dtype"] in ("bf16", "f16")}
shapes = ["8192x3072x768", "8192x2304x768", "8192x768x3072"]
def timed(dtype, shape, ablate, rnd):
    m, n, k = shape.split("x")
    cfg = dict(rows_of[(dtype, shape)], ABLATE=ablate, M=m, N=n, K=k)
    args = [a for key, v in cfg.items() for a in ("--set", f"{key}={v}")]
    r = subprocess.run([peak, "baseline", f"carry/exp/tsw-{dtype}", "--against", "cublaslt", "--reps", "30", "--json", *args], capture_output=True, text=True)
    try:
        rep = json.loads(r.stdout)
        row = {"dtype": dtype, "shape": shape, "ablate": ablate, "round": rnd, "peak_ms": rep["kernel_timing"]["median_ms"],
               "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
    except Exception:
        row = {"dtype": dtype, "shape": shape, "ablate": ablate, "round": rnd, "error": r.stderr[-800:]}
    print(json.dumps(row), flush=True)
    return row
rows = [timed(d, s, a, rnd) for rnd in range(2) for d in ("bf16", "f16") for s in shapes for a in range(4)]
dev = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
import datetime
import os
tip = os.environ.get("TIP", "multicast-a")
json.dump({"benchmark": "h200-compare-tile-switch-hand", "tip": tip, "command": f"OUT=dir TIP={tip} bash bench/hand/tile-switch-run.sh", "device": dev,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": open("carry/gemm-shapes/commit").read().strip(), "rows": rows}, open(f"{out}/tile-switch.json", "w"), indent=1)
PY
