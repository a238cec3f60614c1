#!/usr/bin/env python3
"""The fp32 GEMM line in roles on the H200 at the transformer shapes of issue 25.

For each shape (M, N, K) of out = inp . W^T + bias (f32, no TF32): replay the CUDA bundle
(examples/workflows/gemm-nt-bias-cuda-deferred.bundle, Refactor ... Block-Swizzle) at that
shape, so every step is validated (61 x 47 x 33, the manifest's [validation.inputs]) and
tuned at that shape; then time the tip with that shape's best configuration against
cuBLASLt doing the same work (`peak baseline --against cublaslt`: NT, bias fused, in the
same device call), and, for reference, the configuration the design aims at (16 x 16
threads, 8 x 16 outputs each, float4, TILE_K 8, two stages, OFFSET 1, GROUP_M 8).
Rows are merged into bench/results/h200-gemm-shapes.json (one device call may run one
shape: SHAPES="8192x768x3072").

Environment: PEAK, PEAK_COMMIT, SHAPES (default the three MLP/attention shapes), BUDGET
(evaluations per step, default 48), SANITIZE_SAMPLES (default 2), REPS (default 20),
REPLAY_TIMEOUT (seconds per replay, default 420), STEP_TIME (tuning seconds per replayed step,
default 15), RETUNE_BUDGET and RETUNE_TIME (the tip retuned at the shape, default 128 and 150 s;
RETUNE_BUDGET=0 skips it).
"""
import datetime, json, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "examples/workflows/gemm-nt-bias-cuda-deferred.bundle")
RESULT = os.path.join(ROOT, "bench/results/h200-gemm-shapes.json")
DESIGN = {"BLOCK_X": 16, "BLOCK_Y": 16, "TRD_X": 16, "TRD_Y": 8, "CHUNK_X": 4, "CHUNK_Y": 4, "VEC": 4, "TILE_K": 8,
          "NUM_STAGES": 2, "K_SPLITS": 1, "OFFSET": 1, "GROUP_M": 8}


def sh(args, timeout=None):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def baseline(peak, ctx, inputs, tuning, reps):
    sets = [a for k, v in {**inputs, **tuning}.items() for a in ("--set", f"{k}={v}")]
    r = sh([peak, "baseline", ctx, "--against", "cublaslt", "--reps", str(reps), "--json", *sets])
    if not r.stdout.strip():
        return {"error": r.stderr[-2000:]}
    rep = json.loads(r.stdout)
    return {"peak_ms": rep["kernel_timing"]["median_ms"], "cublaslt_ms": rep["cublas_timing"]["median_ms"],
            "pct": rep["percent_of_cublas"], "matches_cublaslt": rep["validation"]["passed"], "params": tuning,
            "device": rep.get("device"), "cublaslt": rep.get("cublas")}


def main(out):
    peak = os.environ.get("PEAK", "carry/gemm-shapes/peak")
    shapes = os.environ.get("SHAPES", "8192x3072x768 8192x768x3072 8192x2304x768").split()
    budget, samples = os.environ.get("BUDGET", "48"), os.environ.get("SANITIZE_SAMPLES", "2")
    reps, timeout = int(os.environ.get("REPS", "20")), int(os.environ.get("REPLAY_TIMEOUT", "420"))
    step_time = os.environ.get("STEP_TIME", "15")
    retune_budget, retune_time = os.environ.get("RETUNE_BUDGET", "128"), os.environ.get("RETUNE_TIME", "150")
    rows, device = [], None
    for shape in shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        wf = os.path.join(out, f"wf-{shape}")
        inputs = {"M": m, "N": n, "K": k}
        started = time.time()
        sizes = ["--set", f"M={m}", "--set", f"N={n}", "--set", f"K={k}"]
        # Every step is validated and tuned at this shape, each tuning cut at STEP_TIME
        # seconds (the early steps run 30 ms kernels); the tip is then retuned at it alone.
        # The sanitizer runs on validation samples and on the tuned winner at SANITIZE_AT
        # (small: sanitized runs are 10-1000x slower than the 8192-row GEMM's own).
        sanitize_at = [a for size in os.environ.get("SANITIZE_AT", "M=256 N=256 K=128").split() for a in ("--sanitize-at", size)]
        cmd = [peak, "replay", BUNDLE, "--into", wf, "--budget", budget, "--time", step_time, "--sanitize-samples", samples, *sanitize_at, *sizes]
        log_path = os.path.join(out, f"replay-{shape}.log")
        try:
            with open(log_path, "w") as log_file:
                code = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, timeout=timeout).returncode
            replay = {"rc": code, "log": open(log_path).read()[-3000:]}
        except subprocess.TimeoutExpired:
            replay = {"rc": "timeout", "log": open(log_path).read()[-3000:]}
        replay["seconds"] = round(time.time() - started, 1)
        if replay["rc"] == 0 and int(retune_budget) > 0:
            started = time.time()
            try:
                r = sh([peak, "retune", "-w", wf, "--budget", retune_budget, "--time", retune_time, "--no-sanitize-winner", *sizes], timeout=timeout)
                replay["retune"] = {"rc": r.returncode, "log": r.stderr[-2000:], "seconds": round(time.time() - started, 1)}
            except subprocess.TimeoutExpired:
                replay["retune"] = {"rc": "timeout", "seconds": round(time.time() - started, 1)}
        row = {"dtype": "f32", "m": m, "n": n, "k": k, "layout": "NT", "epilogue": "bias", "replay": replay}
        log = sh([peak, "log", "-w", wf, "--json"])
        if log.stdout.strip():
            entries = json.loads(log.stdout)
            row["line"] = [e["transformation"] for e in reversed(entries)]
            row["steps"] = [{"transformation": e["transformation"], "verdict": e["verdict"], "best_time_ms": e.get("best_time_ms")} for e in reversed(entries)]
            tip = json.loads(sh([peak, "show", "HEAD", "-w", wf, "--json"]).stdout)
            best = (tip.get("performance") or {}).get("best") or {}
            if best.get("params"):
                tuned = baseline(peak, os.path.join(wf, "context"), inputs, best["params"]["tuning"], reps)
                row.update({k2: tuned.get(k2) for k2 in ("peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")})
                row["tuned"] = tuned
                device = device or tuned.get("device")
            design = baseline(peak, os.path.join(wf, "context"), inputs, DESIGN, reps)
            row["design_configuration"] = design
            device = device or design.get("device")
        print(json.dumps({k2: row.get(k2) for k2 in ("m", "n", "k", "peak_ms", "cublaslt_ms", "pct")}), flush=True)
        rows.append(row)
    doc = {}
    if os.path.exists(RESULT):
        doc = json.load(open(RESULT))
    keep = [r for r in doc.get("rows", []) if (r.get("dtype"), r.get("m"), r.get("n"), r.get("k")) not in {("f32", r2["m"], r2["n"], r2["k"]) for r2 in rows}]
    doc.update({
        "benchmark": "h200-gemm-shapes",
        "command": f"bash bench/h200-gemm-shapes.sh run (SHAPES={' '.join(shapes)} BUDGET={budget} SANITIZE_SAMPLES={samples} REPS={reps}): peak replay {os.path.relpath(BUNDLE, ROOT)} --into WF --budget {budget} --sanitize-samples {samples} --set M= --set N= --set K=; peak baseline WF/context --against cublaslt --reps {reps} --set <inputs and the tip's best configuration at that shape>",
        "device": device or doc.get("device"),
        "commit": os.environ.get("PEAK_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": "peak_ms and cublaslt_ms: peak baseline's medians in one device call (CUDA events, L2 flushed before every run: peak's one timing method), the kernel at the configuration the replay's tuning found best at that shape (each shape replayed and tuned on its own); design_configuration: the same call at the configuration the line was designed for",
        "rows": keep + rows,
    })
    for path in (RESULT, os.path.join(out, "h200-gemm-shapes.json")):
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    print("wrote", RESULT)


if __name__ == "__main__":
    main(sys.argv[1])
