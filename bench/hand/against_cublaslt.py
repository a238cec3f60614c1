"""Shared by the hand experiments' run scripts (bench/hand/*-run.sh): a configuration of a
scratch context timed against cuBLASLt in one `peak baseline` call, and the document a run
writes. Both sides are timed in the same process (warm-up, events, medians, L2 flushed), so
each row is one same-run ratio."""
import datetime
import json
import subprocess


# The square fp32 NN case-study tip's tuned configuration at n = 4096 (the replayed
# epilogue-vector tip, bench/results/h200-square-f32-line.json), where the checks and hand
# experiments on that kernel start.
SQUARE_F32_TIP = dict(BLOCK_X=16, BLOCK_Y=16, CHUNK_X=4, CHUNK_Y=4, GROUP_M=8, K_SPLITS=1, MIN_BLOCKS=1, NUM_STAGES=4, OFFSET=1, TILE_K=8,
                      TRD_X=8, TRD_Y=16, VEC=4, n=4096)


def timed(peak, ctx, cfg, reps=30, **labels):
    """One `peak baseline CTX --against cublaslt` at cfg (NAME -> value, inputs included); the
    row is `labels` with both medians, the ratio and whether peak's output matched cuBLASLt's,
    or `labels` with the error's tail. Printed as it comes, for the call's output."""
    args = [a for key, value in cfg.items() for a in ("--set", f"{key}={value}")]
    r = subprocess.run([peak, "baseline", ctx, "--against", "cublaslt", "--reps", str(reps), "--json", *args], capture_output=True, text=True)
    try:
        rep = json.loads(r.stdout)
        row = dict(labels, peak_ms=rep["kernel_timing"]["median_ms"], cublaslt_ms=rep["cublas_timing"]["median_ms"],
                   pct=rep["percent_of_cublas"], matches=rep["validation"]["passed"])
    except (json.JSONDecodeError, KeyError, TypeError):
        row = dict(labels, error=r.stderr[-800:])
    print(json.dumps(row), flush=True)
    return row


def tuned_rows(dtypes):
    """The tuned configuration of every NT row of bench/results/h200-gemm-shapes.json of these
    dtypes, by (dtype, "MxNxK")."""
    rows = json.load(open("bench/results/h200-gemm-shapes.json"))["rows"]
    return {(r["dtype"], f'{r["m"]}x{r["n"]}x{r["k"]}'): r["tuned"]["params"] for r in rows if r["dtype"] in dtypes and r["layout"] == "NT"}


def write(path, benchmark, command, rows, **extra):
    """The run's document: what ran, on which device, at which commit of the carried peak, when."""
    try:
        device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        device = None   # no NVIDIA driver here: the rows hold errors, not times
    doc = dict(benchmark=benchmark, command=command, device=device, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               commit=open("carry/gemm-shapes/commit").read().strip(), **extra, rows=rows)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
