"""How far the case study's headline ratios move from run to run.

The tips of the replayed MatMul lines (the packed replays in bench/results), each timed
against cuBLAS by `peak baseline` REPEATS times at each size at the configuration its
tuning chose. Every repetition is a fresh process with fresh random inputs (--data-seed),
and the kernel and cuBLAS are timed in that same process (warm-up, CUDA events, medians).
Writes OUT/h200-matmul-spread.json: per tip and size, every repetition's % of cuBLAS, and
their minimum, median and maximum.

Here (a CPU machine with Rust):   source bench/carry.sh && carry_peak carry/kernels
There (the GPU machine, carrying carry/kernels):
  PEAK=carry/kernels/peak python3 bench/matmul_spread.py OUT
Settings: REPEATS (default 5), SIZES (default "2048 4096"), REPS (timed runs per side in
one repetition, default 30).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from case_study import PEAK, SIZES, best_for, run_stamp, sh, show_json

REPEATS = int(os.environ.get("REPEATS", "5"))
REPS = os.environ.get("REPS", "30")
# (label, packed replay): each tip is its bundle's HEAD, the Retune checkpoint of its line.
TIPS = [
    ("fp32", "bench/results/h200-replayed-matmul-cuda-f32-main.bundle"),
    ("fp16", "bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle"),
]


def pct_of_cublas(ctx, n, tuning, seed):
    args = [PEAK, "baseline", ctx, "--set", f"n={n}", "--reps", REPS, "--warmup", "5", "--data-seed", str(seed), "--json"]
    for name, value in tuning.items():
        args += ["--set", f"{name}={value}"]
    report = json.loads(sh(*args, timeout=300))
    kernel, cublas = report["kernel_timing"]["tflops"], report["cublas_timing"]["tflops"]
    return {"seed": seed, "tflops": kernel, "cublas_tflops": cublas, "pct_of_cublas": 100.0 * kernel / cublas}


def main(out):
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp()
    result = {
        "benchmark": "h200-matmul-spread",
        "command": "PEAK=... python3 bench/matmul_spread.py OUT",
        **run_stamp(),
        "method": f"peak baseline at the tip's tuned configuration, {REPEATS} repetitions per size, each a fresh process "
                  f"with fresh random inputs (--data-seed 1..{REPEATS}); per repetition 5 warm-up and {REPS} timed runs "
                  "of each side, medians, kernel and cuBLAS in the same process",
        "tips": [],
    }
    for label, bundle in TIPS:
        wf = os.path.join(work, label)
        sh("git", "clone", "-q", bundle, wf)
        ctx = os.path.join(work, f"ctx-{label}")
        os.makedirs(ctx)
        subprocess.run(f"git -C {wf} archive HEAD context | tar -x -C {ctx} --strip-components=1", shell=True, check=True)
        meta = show_json(wf, "HEAD", "checkpoint.json") or {}
        tip = {"line": label, "bundle": bundle, "checkpoint": sh("git", "-C", wf, "rev-parse", "--short", "HEAD").strip(),
               "transformation": meta.get("transformation"), "sizes": []}
        perf = show_json(wf, "HEAD", "performance.json")
        for n in SIZES:
            tuning, _ = best_for(perf, n)
            row = {"n": n, "tuning": tuning, "repetitions": []}
            if tuning is None:
                row["error"] = "no tuned configuration at this size"
            else:
                for seed in range(1, REPEATS + 1):
                    try:
                        row["repetitions"].append(pct_of_cublas(ctx, n, tuning, seed))
                    except Exception as e:  # a failed repetition is recorded, not fatal
                        row["repetitions"].append({"seed": seed, "error": str(e)})
                pcts = [r["pct_of_cublas"] for r in row["repetitions"] if "pct_of_cublas" in r]
                if pcts:
                    row.update({"min_pct": min(pcts), "median_pct": statistics.median(pcts), "max_pct": max(pcts)})
                    print(f"{label} n={n}: {min(pcts):.1f} / {statistics.median(pcts):.1f} / {max(pcts):.1f}% of cuBLAS (min / median / max of {len(pcts)})", flush=True)
            tip["sizes"].append(row)
        result["tips"].append(tip)
        json.dump(result, open(os.path.join(out, "h200-matmul-spread.json"), "w"), indent=2)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
