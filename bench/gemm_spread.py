#!/usr/bin/env python3
"""How far a GEMM row's "% of cuBLASLt" moves from run to run.

Each case is a replayed workflow bundle (a returned h200-replayed-*.bundle) and a shape; its
HEAD (the tip's last Retune) is timed at that shape, at the configuration its tuning chose
there (or, where the HEAD was tuned at another shape, the one h200-gemm-shapes.json's row of
that bundle records at this shape; configuration_for), against cuBLASLt doing the same work, REPEATS times. Every repetition is a fresh
`peak baseline` process with fresh random inputs (--data-seed), kernel and cuBLASLt timed in
that process (warm-up, CUDA events, L2 flushed, medians of REPS); the cases take turns, so
a slow minute of the machine falls on all of them.

There (the GPU machine, carrying carry/gemm-shapes):
  OUT=folder python3 bench/gemm_spread.py "LABEL BUNDLE MxNxK" ...   (or "LABEL BUNDLE n" for the square kernel)
Writes OUT/h200-gemm-spread.json: per case every repetition's %, and their minimum, median
and maximum, with the command, device, commit and date. Settings: REPEATS (default 5), REPS
(default 30), PEAK, PEAK_COMMIT.
"""
import datetime, json, os, statistics, subprocess, sys, tempfile

from gemm_shapes import baseline, sh

PEAK = os.environ.get("PEAK", "carry/gemm-shapes/peak")
ROWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results/h200-gemm-shapes.json")


def configuration_for(bundle, inputs, head, rows):
    """The configuration a case is timed at: the HEAD's best where the HEAD was tuned at this
    shape; else the configuration h200-gemm-shapes.json records for this bundle at this shape
    (gemm_shapes.py bundles a replay after its first shape, so a row at another shape was
    retuned after the bundle was written). Anything else is refused: timing the HEAD's
    configuration at another shape would not describe the row."""
    best = (head.get("performance") or {}).get("best") or {}
    params = best.get("params") or {}
    at = {k: v for k, v in (params.get("inputs") or {}).items() if k in inputs}
    if at == inputs:
        return params.get("tuning")
    for row in rows:
        if row.get("bundle") == bundle and (row["m"], row["n"], row["k"]) == (inputs.get("M"), inputs.get("N"), inputs.get("K")):
            tuned = (row.get("tuned") or {}).get("params")
            if tuned:
                return {k: v for k, v in tuned.items() if k not in inputs}
    raise SystemExit(f"{bundle}: its HEAD was tuned at {at or 'no inputs'}, not at {inputs}, and "
                     f"h200-gemm-shapes.json has no row of that bundle at that shape to take a configuration from")
REPEATS, REPS = int(os.environ.get("REPEATS", "5")), int(os.environ.get("REPS", "30"))


def shape_inputs(shape):
    """A case's inputs: "MxNxK" for the GEMMs in roles, a bare n for the square case-study
    kernel (its one size, `n`)."""
    if "x" not in shape:
        return {"n": int(shape)}
    m, n, k = (int(x) for x in shape.split("x"))
    return {"M": m, "N": n, "K": k}


def commit_of_carried_peak():
    """The commit the carried peak was built at (bench/carry.sh writes it beside the binary)."""
    path = os.path.join(os.path.dirname(PEAK), "commit")
    return open(path).read().strip() if os.path.exists(path) else "unknown"


def main():
    out = os.environ.get("OUT", ".")
    cases = []
    for spec in sys.argv[1:]:
        label, bundle, shape = spec.split()
        wf = os.path.join(tempfile.mkdtemp(), "wf")
        subprocess.run(["git", "clone", "-q", bundle, wf], check=True)
        inputs = shape_inputs(shape)
        head = json.loads(sh([PEAK, "show", "HEAD", "-w", wf, "--json"]).stdout)
        rows = json.load(open(ROWS))["rows"] if os.path.exists(ROWS) else []
        cases.append({"label": label, "bundle": os.path.basename(bundle), "wf": wf, "inputs": inputs,
                      "params": configuration_for(os.path.basename(bundle), inputs, head, rows), "runs": []})
    device = None
    for seed in range(1, REPEATS + 1):
        for case in cases:
            inputs = dict(case["inputs"])
            r = baseline(PEAK, os.path.join(case["wf"], "context"), inputs, case["params"], REPS, ["--data-seed", str(seed)])
            device = device or r.get("device")
            case["runs"].append({k: r.get(k) for k in ("peak_ms", "cublaslt_ms", "pct", "matches_cublaslt", "error")})
            print(case["label"], seed, r.get("pct"), flush=True)
    rows = []
    for case in cases:
        pcts = [r["pct"] for r in case["runs"] if r.get("pct") is not None]
        rows.append({"label": case["label"], "bundle": case["bundle"], "shape": case["inputs"], "params": case["params"], "runs": case["runs"],
                     "pct_min": min(pcts, default=None), "pct_median": statistics.median(pcts) if pcts else None, "pct_max": max(pcts, default=None),
                     "all_match": all(r.get("matches_cublaslt") for r in case["runs"])})
    doc = {"benchmark": "h200-gemm-spread", "command": "python3 bench/gemm_spread.py " + " ".join(repr(a) for a in sys.argv[1:]),
           "device": device, "commit": os.environ.get("PEAK_COMMIT") or commit_of_carried_peak(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "method": f"{REPEATS} fresh `peak baseline --against cublaslt` processes per case (--data-seed 1..{REPEATS}), cases in turn; each: warm-up, CUDA events, L2 flushed before every run, medians of {REPS} per side",
           "rows": rows}
    with open(os.path.join(out, "h200-gemm-spread.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
