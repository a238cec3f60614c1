#!/usr/bin/env python3
"""One step against its parent, in the same run: `peak compare` of a replayed workflow's
checkpoint STEP and the checkpoint before it, at one shape and one configuration, so the
step's effect is measured apart from the variation between device calls (about 2 points on
the GEMM rows). Each case is a replayed workflow bundle (a returned h200-replayed-*.bundle).

    OUT=folder python3 bench/compare_step.py STEP "LABEL BUNDLE NAME=VALUE ..." ...

Writes OUT/h200-compare-step.json: per case the label, the bundle, the two checkpoints, the
settings and peak compare's report; with the command, device, commit and date.
"""
import datetime, json, os, subprocess, sys, tempfile

PEAK = os.environ.get("PEAK", "carry/gemm-shapes/peak")


def checkpoints(wf, step):
    """The last checkpoint named `step` on the first-parent chain, and its parent."""
    log = subprocess.run(["git", "-C", wf, "log", "--first-parent", "--format=%H %s"], check=True, capture_output=True, text=True).stdout.splitlines()
    at = next((i for i, line in enumerate(log) if line.split(" ", 1)[1].startswith(step + ":")), None)
    if at is None or at + 1 == len(log):
        steps = [line.split(" ", 1)[1].split(":")[0] for line in log]
        raise SystemExit(f"compare_step: {wf} has no checkpoint {step!r} with a parent (its steps, newest first: {', '.join(steps)})")
    return log[at + 1].split()[0], log[at].split()[0]


def main():
    step, cases = sys.argv[1], sys.argv[2:]
    out = os.environ.get("OUT", ".")
    rows, device = [], None
    for case in cases:
        label, bundle, *sets = case.split()
        wf = tempfile.mkdtemp()
        subprocess.run(["git", "clone", "-q", bundle, wf + "/wf"], check=True)
        wf += "/wf"
        parent, child = checkpoints(wf, step)
        args = [a for s in sets for a in ("--set", s)]
        r = subprocess.run([PEAK, "compare", parent, child, "-w", wf, "--reps", "30", "--json", *args], capture_output=True, text=True)
        report = json.loads(r.stdout) if r.stdout.strip() else {"error": r.stderr[-2000:]}
        device = device or report.get("device")
        rows.append({"label": label, "bundle": os.path.basename(bundle), "parent": parent[:10], "step": child[:10], "settings": sets, "compare": report})
        print(label, json.dumps(report)[:600], flush=True)
    doc = {"benchmark": "h200-compare-step", "step": step, "command": "python3 bench/compare_step.py " + " ".join(repr(a) for a in sys.argv[1:]),
           "device": device, "commit": os.environ.get("PEAK_COMMIT", "unknown"),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "method": "peak compare: both checkpoints compiled at the same settings, timed interleaved in one process with CUDA events and the L2 flushed before every run, medians of 30", "rows": rows}
    with open(os.path.join(out, "h200-compare-step.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
