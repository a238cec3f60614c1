#!/usr/bin/env python3
"""Every checkpoint's yardstick on the H200 (issue 26, item 4).

Two workflows are made on the GPU, each step tuned there:
- the NT GEMM with a bias (examples/workflows/gemm-nt-bias-cuda-deferred.bundle, replayed at
  one shape): every checkpoint should record cuBLASLt doing the same work;
- the CUDA row softmax (examples/softmax-cuda, `peak init`): the root should record a
  device-to-device copy of the bytes it moves.

For each, `peak log` (its text and `--json`) and the tip's `performance.json` `baseline` are
kept, and the tip's recorded percentage is checked against `peak baseline` (cuBLASLt, or
`--against copy`) run on the tip at its best configuration in the same device call: the
two yardstick times and the two percentages should agree within the spread.

Environment: PEAK, PEAK_COMMIT, BUNDLE and COPY_CONTEXT (the two workflows' sources), SHAPE (MxNxK, default 8192x3072x768), BUDGET (evaluations
per step, default 16), SANITIZE_SAMPLES (2), REPS (20), REPLAY_TIMEOUT (seconds, 420).
Writes OUT/h200-yardstick.json and bench/results/h200-yardstick.json.
"""
import datetime, json, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.environ.get("BUNDLE", os.path.join(ROOT, "examples/workflows/gemm-nt-bias-cuda-deferred.bundle"))
SOFTMAX = os.environ.get("COPY_CONTEXT", os.path.join(ROOT, "examples/softmax-cuda"))
RESULT = os.path.join(ROOT, "bench/results/h200-yardstick.json")


def sh(args, timeout=None):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def timed(args, timeout):
    started = time.time()
    try:
        r = sh(args, timeout=timeout)
        out = {"rc": r.returncode, "stderr_tail": r.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        out = {"rc": "timeout"}
    out["seconds"] = round(time.time() - started, 1)
    return out


def sets(params):
    return [a for part in ("inputs", "tuning") for k, v in params[part].items() for a in ("--set", f"{k}={v}")]


def check(peak, wf, against, reps):
    """The tip's recorded yardstick beside `peak baseline` on the tip at its best configuration."""
    tip = json.loads(sh([peak, "show", "HEAD", "-w", wf, "--json"]).stdout or "{}")
    performance = tip.get("performance") or {}
    best, recorded = performance.get("best") or {}, performance.get("baseline")
    out = {"recorded": recorded, "best": best}
    if not best.get("params"):
        return out
    r = sh([peak, "baseline", os.path.join(wf, "context"), "--against", against, "--reps", str(reps), "--json", *sets(best["params"])])
    if not r.stdout.strip():
        out["peak_baseline"] = {"error": r.stderr[-2000:]}
        return out
    rep = json.loads(r.stdout)
    if against == "cublaslt":
        kernel, yard, pct = rep["kernel_timing"]["median_ms"], rep["cublas_timing"]["median_ms"], rep["percent_of_cublas"]
        spread = rep["cublas_timing"]["spread"]
    else:
        kernel, yard, pct, spread = rep["kernel_ms"], rep["copy_ms"], rep["percent_of_copy"], rep["copy_spread"]
    out["peak_baseline"] = {"kernel_ms": kernel, "yardstick_ms": yard, "yardstick_spread": spread, "percent": pct, "device": rep.get("device")}
    if recorded and recorded.get("time_ms"):
        out["yardstick_ratio"] = recorded["time_ms"] / yard
        out["recorded_percent"] = 100.0 * recorded["time_ms"] / best["time_ms"]
        rs = recorded.get("spread") or {}
        out["yardstick_within_spread"] = rs.get("q1_ms", 0) <= spread["q3_ms"] and spread["q1_ms"] <= rs.get("q3_ms", 0)
    return out


def log(peak, wf, out, name):
    text = sh([peak, "log", "-w", wf]).stdout
    with open(os.path.join(out, f"log-{name}.txt"), "w") as f:
        f.write(text)
    print(text, flush=True)
    entries = json.loads(sh([peak, "log", "-w", wf, "--json"]).stdout or "[]")
    steps = [{"transformation": e.get("transformation"), "verdict": e.get("verdict"), "best_time_ms": e.get("best_time_ms"),
              "best_inputs": e.get("best_inputs"), "baseline": e.get("baseline")} for e in reversed(entries)]
    return text, steps


def main(out):
    peak = os.environ.get("PEAK", "carry/yardstick/peak")
    m, n, k = (int(x) for x in os.environ.get("SHAPE", "8192x3072x768").split("x"))
    budget, samples = os.environ.get("BUDGET", "16"), os.environ.get("SANITIZE_SAMPLES", "2")
    reps, timeout = int(os.environ.get("REPS", "20")), int(os.environ.get("REPLAY_TIMEOUT", "420"))
    rows = []

    wf = os.path.join(out, "wf-gemm")
    made = timed([peak, "replay", BUNDLE, "--into", wf, "--budget", budget, "--sanitize-samples", samples,
                  "--set", f"M={m}", "--set", f"N={n}", "--set", f"K={k}"], timeout)
    text, steps = log(peak, wf, out, "gemm")
    rows.append({"workflow": "gemm-nt-bias-cuda (replayed)", "inputs": {"M": m, "N": n, "K": k}, "made": made, "log": text, "steps": steps,
                 "tip": check(peak, wf, "cublaslt", reps)})

    wf = os.path.join(out, "wf-softmax")
    made = timed([peak, "init", wf, "--from", SOFTMAX, "--budget", budget], timeout)
    text, steps = log(peak, wf, out, "softmax")
    rows.append({"workflow": "softmax-cuda (init)", "made": made, "log": text, "steps": steps, "tip": check(peak, wf, "copy", reps)})

    device = next((r["tip"].get("peak_baseline", {}).get("device") for r in rows if r["tip"].get("peak_baseline", {}).get("device")), None)
    doc = {
        "benchmark": "h200-yardstick",
        "command": f"bash bench/h200-yardstick.sh run (SHAPE={m}x{n}x{k} BUDGET={budget} SANITIZE_SAMPLES={samples} REPS={reps}): "
                   f"peak replay {os.path.relpath(BUNDLE, ROOT)} --into WF --budget {budget} --set M= N= K=; peak init WF --from examples/softmax-cuda --budget {budget}; "
                   "peak log; peak baseline WF/context --against cublaslt|copy --set <the tip's best configuration>",
        "device": device,
        "commit": os.environ.get("PEAK_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": "baseline: the yardstick each checkpoint recorded while it was tuned (performance.json, peak log --json's baseline.percent); "
                  "tip.peak_baseline: peak baseline on the tip at its best configuration, in the same device call (L2 flushed, 20 runs); "
                  "yardstick_ratio: the recorded yardstick time over peak baseline's",
        "rows": rows,
    }
    for path in (RESULT, os.path.join(out, "h200-yardstick.json")):
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    print("wrote", RESULT)


if __name__ == "__main__":
    main(sys.argv[1])
