#!/usr/bin/env python3
"""Tuning per shape and the dispatch export, on the H200 (issue 25, item 4).

The tip of the fp32 NT GEMM line with a bias (BUNDLE, default
examples/workflows/gemm-nt-bias-cuda-deferred.bundle: its last checkpoint's context, as a
fresh `git clone` of the bundle holds it) is given the GEMMs of a transformer layer as named
shapes (`[[shapes]]`, SHAPES), tuned once per shape by `peak init` (BUDGET evaluations and
at most TIME seconds per shape, in the design's neighbourhood NEIGHBOURHOOD: the RETUNE_SPACE
of gemm_shapes.py; NEIGHBOURHOOD=none searches the whole space), exported with
`peak export --dispatch`, built with its build.sh (nvcc) and run: every shape through
`peak_dispatch` at its own best configuration. Then, per shape, `peak baseline --against
cublaslt` at that configuration checks the output against cuBLASLt doing the same work and
times both in one run. Writes bench/results/h200-gemm-dispatch.json (RESULT): per shape the
configuration the table picks, peak's recorded time, the harness's median, cuBLASLt's and
the percentage, with the command, device, commit and date.

Environment: PEAK (default carry/gemm-shapes/peak), OUT (scratch folder, default
/tmp/gemm-dispatch), SHAPES ("MxNxK ...", default the four of issue 25 but the square one),
BUDGET (24), TIME (60), REPS (20), BASELINE (1; 0 skips cuBLASLt, e.g. to try the script
on PoCL with BUNDLE=examples/workflows/gemm-nt-bias-opencl-agent.bundle NEIGHBOURHOOD=none).
"""
import datetime, json, os, re, shutil, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.environ.get("BUNDLE", os.path.join(ROOT, "examples/workflows/gemm-nt-bias-cuda-deferred.bundle"))
RESULT = os.environ.get("RESULT", os.path.join(ROOT, "bench/results/h200-gemm-dispatch.json"))
NEIGHBOURHOOD = {"BLOCK_X": "8,16,32", "BLOCK_Y": "8,16", "TRD_X": "4,8,16", "TRD_Y": "4,8,16", "CHUNK_X": "2,4",
                 "CHUNK_Y": "2,4", "TILE_K": "8,16", "VEC": "4", "NUM_STAGES": "2,3,4", "OFFSET": "0,1",
                 "GROUP_M": "1,8", "K_SPLITS": "1,2,4,8"}


def sh(args, cwd=None, env=None):
    print("+", " ".join(args), flush=True)
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"failed ({r.returncode}): {' '.join(args)}")
    return r


def with_shapes(manifest, shapes):
    """The manifest text with its [inputs] tables removed and one [[shapes]] table per shape."""
    kept, skipping = [], False
    for line in manifest.splitlines():
        header = re.match(r"^\s*\[\[?([^\]]+)\]", line)
        if header:
            skipping = re.match(r"^inputs(\.|$)", header.group(1).strip()) is not None
        if not skipping:
            kept.append(line)
    text = "\n".join(kept).rstrip() + "\n"
    for m, n, k in shapes:
        text += f"\n[[shapes]]\nM = {m}\nN = {n}\nK = {k}\n"
    return text


def main():
    peak = os.path.abspath(os.environ.get("PEAK", os.path.join(ROOT, "carry/gemm-shapes/peak")))
    out = os.environ.get("OUT", "/tmp/gemm-dispatch")
    shapes = [tuple(int(x) for x in s.split("x")) for s in os.environ.get("SHAPES", "8192x3072x768 8192x768x3072 8192x2304x768 16x4096x4096").split()]
    budget, time_limit, reps = os.environ.get("BUDGET", "24"), os.environ.get("TIME", "60"), os.environ.get("REPS", "20")
    baseline = os.environ.get("BASELINE", "1") == "1"
    neighbourhood = {} if os.environ.get("NEIGHBOURHOOD", "") == "none" else NEIGHBOURHOOD
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)

    # The line's tip, given the named shapes.
    sh(["git", "clone", "-q", BUNDLE, os.path.join(out, "line")])
    ctx = os.path.join(out, "ctx")
    shutil.copytree(os.path.join(out, "line", "context"), ctx)
    path = os.path.join(ctx, "peak.toml")
    text = with_shapes(open(path).read(), shapes)
    with open(path, "w") as f:
        f.write(text)

    wf = os.path.join(out, "wf")
    sets = [a for k, v in neighbourhood.items() for a in ("--set", f"{k}={v}")]
    init = [peak, "init", wf, "--from", ctx, "--samples", "2", "--sanitize", "none", "--no-sanitize-winner",
            "--budget", budget, "--time", time_limit, *sets]
    sh(init)
    record = json.loads(sh([peak, "show", "HEAD", "-w", wf, "--json"]).stdout)["performance"]
    print(sh([peak, "show", "HEAD", "-w", wf]).stdout, flush=True)

    export = os.path.join(out, "export")
    report = json.loads(sh([peak, "export", "HEAD", "-w", wf, "--dispatch", "--to", export, "--json"]).stdout)
    sh(["sh", "build.sh"], cwd=export)
    ran = sh(["./harness", "--reps", reps], cwd=export).stdout
    print(ran, flush=True)
    # Per shape: `shape LABEL: configuration C (...)`, the outputs, `median_ms: X`.
    medians = {}
    for block in ran.split("shape ")[1:]:
        label = block.split(":")[0]
        m = re.search(r"median_ms: ([0-9.]+)", block)
        medians[label] = float(m.group(1)) if m else None

    table = report["dispatch"]
    rows, device = [], record.get("device")
    for shape in table["shapes"]:
        inputs, tuning = shape["params"]["inputs"], shape["params"]["tuning"]
        label = ",".join(f"{k}={v}" for k, v in inputs.items())
        row = {"m": inputs["M"], "n": inputs["N"], "k": inputs["K"], "layout": "NT", "epilogue": "bias", "dtype": "f32",
               "config": shape["config"], "params": tuning, "peak_record_ms": shape["time_ms"], "harness_ms": medians.get(label)}
        if baseline:
            args = [a for k, v in {**inputs, **tuning}.items() for a in ("--set", f"{k}={v}")]
            b = json.loads(sh([peak, "baseline", os.path.join(wf, "context"), "--against", "cublaslt", "--reps", reps, "--json", *args]).stdout)
            row.update({"peak_ms": b["kernel_timing"]["median_ms"], "cublaslt_ms": b["cublas_timing"]["median_ms"],
                        "pct": b["percent_of_cublas"], "matches_cublaslt": b["validation"]["passed"]})
            device = b.get("device") or device
        rows.append(row)
        print(json.dumps(row), flush=True)

    commit = os.environ.get("PEAK_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    result = {
        "benchmark": "gemm-dispatch",
        "command": f"python3 bench/gemm_dispatch.py (SHAPES={' '.join('x'.join(map(str, s)) for s in shapes)} BUDGET={budget} TIME={time_limit} REPS={reps} NEIGHBOURHOOD={'none' if not neighbourhood else 'design'}): "
                   f"the tip of {os.path.relpath(BUNDLE, ROOT)} with [[shapes]]; peak {' '.join(init[1:2] + ['WF'] + init[3:4] + ['CTX'] + init[5:])}; peak export HEAD --dispatch; sh build.sh; ./harness --reps {reps}; per shape peak baseline --against cublaslt at the dispatched configuration",
        "device": device,
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "configs": table["configs"],
        "fallback": table["fallback"],
        "rows": rows,
    }
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    with open(RESULT, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {RESULT}")


if __name__ == "__main__":
    main()
