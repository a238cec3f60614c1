"""Summarise bench/h200-f32-tile-sweep.sh's folder as one JSON on stdout: per size, the
sweep (space, configurations measured, spills pruned) and its four fastest configurations
timed against cuBLAS in one process."""

import glob
import json
import os
import sys

out = sys.argv[1]
result = {
    "benchmark": "f32-tile-sweep",
    "command": os.environ.get("COMMAND", "bash bench/h200-f32-tile-sweep.sh run"),
    "device": os.environ.get("DEVICE", "unknown"),
    "commit": os.environ.get("COMMIT", "unknown"),
    "date": os.environ.get("DATE", "unknown"),
    "context": "the fp32 case-study tip (Retune after Block-Swizzle) with TRD_X, TRD_Y up to 16 and TRD_X * TRD_Y <= 128",
    "sizes": [],
}
for n in (2048, 4096):
    tune = json.load(open(os.path.join(out, f"tune{n}.json")))
    run = tune["runs"][0]
    size = {"n": n, "space": run["space"], "measured": run["measured"], "pruned_compile_report": run["pruned"].get("compile_report"), "fastest": []}
    for path in sorted(glob.glob(os.path.join(out, f"base{n}-*.json"))):
        b = json.load(open(path))
        size["fastest"].append({
            "tuning": b["params"]["tuning"],
            "median_ms": b["kernel_timing"]["median_ms"],
            "tflops": b["kernel_timing"]["tflops"],
            "cublas_tflops": b["cublas_timing"]["tflops"],
            "pct_of_cublas": b["percent_of_cublas"],
            "outputs_match_cublas": b["validation"]["passed"],
        })
    result["sizes"].append(size)
json.dump(result, sys.stdout, indent=1)
print()
