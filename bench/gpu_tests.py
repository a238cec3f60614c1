"""Run the GPU-gated test binaries and write h200-gpu-tests.json (bench/h200-gpu-tests.sh).

`executables TARGETS`: read cargo's JSON messages on stdin, print "NAME PATH" for each test
binary named in TARGETS (crate/target, e.g. peak-cuda/gpu).
`run TARGETS DIR OUT`: run each binary DIR/NAME one test at a time, classify every test as
passed, failed or skipped (a gated test prints "SKIPPED <name>: <why>" when its device or
tool is missing), run `peak profile` once, and write OUT/h200-gpu-tests.json.
"""

import datetime
import json
import os
import re
import subprocess
import sys


def binary_name(target):
    crate, test = target.split("/")
    return f"{crate}-{test}"


def executables(targets):
    wanted = {tuple(t.split("/")) for t in targets.split()}
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if msg["target"]["kind"] != ["test"]:
            continue
        # src_path is .../crates/<crate>/tests/<target>.rs
        crate = msg["target"]["src_path"].split("/crates/")[-1].split("/")[0]
        key = (crate, msg["target"]["name"])
        if key in wanted:
            print(binary_name("/".join(key)), msg["executable"])


def run_binary(path):
    """Each test of one binary, by name: (outcome, why)."""
    listing = subprocess.run([path, "--list", "--format", "terse"], capture_output=True, text=True).stdout
    names = [l.split(": test")[0] for l in listing.splitlines() if l.endswith(": test")]
    results = {}
    for name in names:
        proc = subprocess.run([path, "--exact", name, "--nocapture", "--test-threads", "1"], capture_output=True, text=True, timeout=600)
        text = proc.stdout + proc.stderr
        skipped = re.search(r"SKIPPED[^\n]*", text)
        if proc.returncode != 0:
            outcome, why = "failed", text[-4000:]
        elif skipped:
            outcome, why = "skipped", skipped.group(0)
        else:
            outcome, why = "passed", None
        results[name] = {"outcome": outcome, **({"why": why} if why else {})}
        print(f"{outcome:8s} {os.path.basename(path)} {name}", flush=True)
    return results


def profile():
    """peak profile (Nsight Compute) on the naive CUDA example: its headline figures."""
    proc = subprocess.run(["target/release/peak", "profile", "examples/matmul-cuda-f32", "--set", "n=1024", "--set", "BLOCK_X=16", "--set", "BLOCK_Y=16", "--json"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return {"outcome": "failed", "why": proc.stderr[-4000:]}
    report = json.loads(proc.stdout)
    metrics = sum(len(k.get("metrics") or {}) for k in report.get("kernels", []))
    headline = report.get("headline") or {}
    ok = metrics > 0 and (headline.get("duration_ms") or 0) > 0
    return {"outcome": "passed" if ok else "failed", "metrics": metrics, "headline": headline}


def run(targets, folder, out):
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    tests = {}
    for target in targets.split():
        name = binary_name(target)
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            tests[name] = {"error": "binary not carried"}
            continue
        tests[name] = run_binary(path)
    tests["peak profile"] = {"examples/matmul-cuda-f32": profile()}
    outcomes = [r["outcome"] for binary in tests.values() for r in binary.values() if isinstance(r, dict) and "outcome" in r]
    result = {
        "benchmark": "gpu-tests",
        "command": "bash bench/h200-gpu-tests.sh run",
        "device": device,
        "commit": open(os.path.join(folder, "commit")).read().strip(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "run": len(outcomes),
        "passed": outcomes.count("passed"),
        "failed": outcomes.count("failed"),
        "skipped": outcomes.count("skipped"),
        "tests": tests,
    }
    with open(os.path.join(out, "h200-gpu-tests.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("device", "commit", "run", "passed", "failed", "skipped")}))


if __name__ == "__main__":
    if sys.argv[1] == "executables":
        executables(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3], sys.argv[4])
