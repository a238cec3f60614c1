"""The MatMul case study on a GPU: replay recorded workflows, then time every step against
cuBLAS in the same process (bench/h200-matmul-case-study.sh runs this; see there).

For each WORKFLOW:BRANCH in $WORKFLOWS it replays examples/workflows/WORKFLOW.bundle's
BRANCH with `peak replay` (validation with the sanitizer and tuning, as peak does by
default), walks the replayed chain, and for every checkpoint and every size runs
`peak baseline` on the checkpoint's best configuration for that size: the kernel and cuBLAS
timed in one process on the same inputs. It writes h200-matmul-case-study.json into OUT.
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

PEAK = os.environ.get("PEAK", "peak")
BUDGET = os.environ.get("BUDGET", "96")
SIZES = [int(n) for n in os.environ.get("SIZES", "2048 4096").split()]
WORKFLOWS = os.environ.get("WORKFLOWS", "").split()
# The paper sanitized 16 samples; fewer keep a replay inside one device call.
SANITIZE_SAMPLES = os.environ.get("SANITIZE_SAMPLES", "16")
# A batch job has a time limit: the replay stops after REPLAY_TIMEOUT seconds, its workflow
# is packed into OUT as replayed-NAME-BRANCH.bundle, and a later run given that folder as
# RESUME continues it where it stopped (peak replay resumes into an existing workflow).
REPLAY_TIMEOUT = float(os.environ["REPLAY_TIMEOUT"]) if os.environ.get("REPLAY_TIMEOUT") else None
RESUME = os.environ.get("RESUME")
# Input sizes the sanitizer runs at (e.g. "n=512"): far smaller than the timed sizes, since
# racecheck follows every shared-memory access of a 2048^3 product.
SANITIZE_AT = os.environ.get("SANITIZE_AT", "").split()
# More replay flags, e.g. "--library transformations" for transformations not built in.
REPLAY_ARGS = os.environ.get("REPLAY_ARGS", "").split()
# After the replay, `peak retune --budget RETUNE` tunes each line's tip again, further, from
# its top-K, and records it as a Retune checkpoint (a line is walked with small budgets).
RETUNE = os.environ.get("RETUNE")


def sh(*args, check=True, timeout=None):
    """Run a command; return stdout. stderr goes to our log as it comes."""
    result = subprocess.run(args, stdout=subprocess.PIPE, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {result.returncode}")
    return result.stdout


def git(wf, *args):
    return sh("git", "-C", wf, *args)


def chain(wf, branch):
    """The checkpoints from root to the branch's head: (id, subject)."""
    lines = git(wf, "log", "--first-parent", "--reverse", "--format=%H%x09%s", branch).splitlines()
    return [tuple(line.split("\t", 1)) for line in lines if line]


def show_json(wf, rev, name):
    try:
        return json.loads(git(wf, "show", f"{rev}:{name}"))
    except (RuntimeError, json.JSONDecodeError):
        return None


def best_for(performance, n):
    """The best tuning configuration the checkpoint's tuning found at size n."""
    for run in (performance or {}).get("runs", []):
        if run.get("inputs", {}).get("n") == n and run.get("best"):
            return run["best"]["params"]["tuning"], run["best"]["time_ms"]
    return None, None


def baseline(ctx, n, tuning):
    args = [PEAK, "baseline", ctx, "--set", f"n={n}", "--reps", "30", "--warmup", "5", "--json"]
    for name, value in tuning.items():
        args += ["--set", f"{name}={value}"]
    return json.loads(sh(*args, timeout=300))


def profile(ctx, n, tuning):
    """Nsight Compute's headline figures for one configuration (what is in the way)."""
    args = [PEAK, "profile", ctx, "--set", f"n={n}", "--json"]
    for name, value in tuning.items():
        args += ["--set", f"{name}={value}"]
    try:
        return json.loads(sh(*args, timeout=300))
    except Exception as e:  # ncu may be missing or refuse the device; the numbers still stand
        return {"error": str(e)}


def replay(work, out, name, branch):
    """Replay one line of a recorded workflow from its bundle, as a user would; resume it
    from RESUME when an earlier run was cut short, and pack what was replayed into OUT."""
    into = os.path.join(work, f"{name}-{branch}")
    packed = f"replayed-{name}-{branch}.bundle"
    resumed = 0
    if RESUME and os.path.exists(os.path.join(RESUME, packed)):
        sh("git", "clone", "-q", os.path.join(RESUME, packed), into)
        resumed = len(chain(into, "HEAD")) - 1
        print(f"resuming after {resumed} replayed step(s)", flush=True)
    start = time.monotonic()
    args = [PEAK, "replay", f"examples/workflows/{name}.bundle", "--branch", branch, "--into", into,
            "--budget", BUDGET, "--sanitize-samples", SANITIZE_SAMPLES] + [f"--sanitize-at={a}" for a in SANITIZE_AT] + REPLAY_ARGS
    # Its own process group, so that a replay stopped at the time limit takes its
    # evaluation workers with it (they would go on using the GPU while steps are timed).
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=REPLAY_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = "timed out"
    wall = time.monotonic() - start
    if RETUNE and code == 0:
        print(f"retune the tip with a budget of {RETUNE}", flush=True)
        retuned = subprocess.run([PEAK, "retune", "-w", into, "--budget", RETUNE] + [f"--sanitize-at={a}" for a in SANITIZE_AT],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        print(retuned.stderr, end="", flush=True)
        # A line whose tip already measured its whole space has nothing to retune: not a failure.
        if retuned.returncode != 0 and "nothing left to search" not in retuned.stderr:
            code = f"retune exited {retuned.returncode}"
        wall = time.monotonic() - start
    if os.path.isdir(into):
        sh(PEAK, "bundle", into, os.path.join(out, packed))
    return into, wall, code, resumed


def breakdown(wf, steps, wall, resumed):
    """Table 5 of the paper: validation, transformation and performance seconds."""
    tuning = validation = transformation = 0.0
    for rev, _ in steps:
        perf = show_json(wf, rev, "performance.json") or {}
        tuning += perf.get("elapsed_s", 0.0) or 0.0
        val = show_json(wf, rev, "validation.json") or {}
        validation += val.get("elapsed_s", 0.0) or 0.0
        transcript = show_json(wf, rev, "transcript.json") or {}
        for entry in transcript.get("entries", []):
            transformation += (entry.get("latency_ms") or 0) / 1000.0
    # Compiling, git and process start-up; unknown when earlier runs did part of the replay.
    other = max(wall - tuning - validation, 0.0) if not resumed else None
    total = tuning + validation + transformation
    pct = lambda x: round(100.0 * x / total, 1) if total else None
    return {
        "replay_wall_s": round(wall, 1),
        "replay_wall_note": "this run's replay; a resumed replay's earlier runs are in validation_s and performance_s, not here",
        "validation_s": round(validation, 1), "validation_pct": pct(validation),
        "transformation_s": round(transformation, 1), "transformation_pct": pct(transformation),
        "transformation_note": "executor latency as recorded when the workflow was authored (agent executor); a replay asks no executor",
        "performance_s": round(tuning, 1), "performance_pct": pct(tuning),
        "other_s": round(other, 1) if other is not None else None,
    }


def save(out, result):
    """Written after every step, so a run cut short still leaves what it measured."""
    with open(os.path.join(out, "h200-matmul-case-study.json"), "w") as f:
        json.dump(result, f, indent=1)


def tune_best(ctx, n):
    """Without a replay: tune one recorded context here and return its best configuration."""
    report = json.loads(sh(PEAK, "tune", ctx, "--set", f"n={n}", "--strategy", "auto", "--budget", BUDGET, "--json", timeout=400))
    best = report["runs"][0].get("best")
    return (best["tuning"], best["median_ms"]) if best else (None, None)


def final_only(out, result, work):
    """FINAL_ONLY=1: the last checkpoint of each line, tuned and timed against cuBLAS here,
    without replaying the line (for a run with little device time)."""
    result["mode"] = "final checkpoints only: recorded context tuned here (auto), not replayed"
    result["tuning"] = f"peak tune --strategy auto --budget {BUDGET} per size on the recorded context, cold (no parent top-K to start from)"
    result["validation"] = "outputs checked against the context's first configuration while tuning and against cuBLAS by peak baseline; not replayed, so no per-step validation or sanitizer run"
    for spec in WORKFLOWS:
        name, branch = spec.split(":")
        wf = os.path.join(work, f"{name}-{branch}-recorded")
        sh("git", "clone", "-q", "--branch", branch, f"examples/workflows/{name}.bundle", wf)
        steps = chain(wf, branch)
        rev, subject = steps[-1]
        meta = show_json(wf, rev, "checkpoint.json") or {}
        ctx = os.path.join(work, f"ctx-{name}-{branch}-final")
        os.makedirs(ctx, exist_ok=True)
        subprocess.run(f"git -C {wf} archive {rev} context | tar -x -C {ctx} --strip-components=1", shell=True, check=True)
        for n in SIZES:
            row = {"workflow": f"{name}:{branch}", "step": len(steps) - 1, "transformation": meta.get("transformation") or subject, "checkpoint": rev[:7], "n": n}
            try:
                tuning, tuned_ms = tune_best(ctx, n)
                report = baseline(ctx, n, tuning)
                row.update({"tuning": tuning, "tuned_time_ms": tuned_ms, "time_ms": report["kernel_timing"]["median_ms"],
                            "tflops": report["kernel_timing"]["tflops"], "cublas_tflops": report["cublas_timing"]["tflops"],
                            "pct_of_cublas": 100.0 * report["kernel_timing"]["tflops"] / report["cublas_timing"]["tflops"],
                            "outputs_match_cublas": report.get("validation")})
                print(f"{name}:{branch} {row['transformation']} n={n} {row['tflops']:.1f} TFLOP/s cuBLAS {row['cublas_tflops']:.1f} {row['pct_of_cublas']:.1f}%", flush=True)
            except Exception as e:
                row["error"] = str(e)
                print(row, flush=True)
            result["steps"].append(row)
            save(out, result)


def run_stamp():
    """What every benchmark JSON records about its run, as bench/stamp.sh does for the shell
    scripts: the GPU (name and driver), peak's commit ($PEAK_COMMIT, else the commit file
    carried beside $PEAK: the device's copy of the tree has no git history) and the date."""
    try:
        device = sh("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader").strip()
    except (OSError, RuntimeError) as e:
        device = f"unknown ({e})"
    carried = os.path.join(os.path.dirname(PEAK), "commit")
    commit = os.environ.get("PEAK_COMMIT") or (open(carried).read().strip() if os.path.exists(carried) else "unknown")
    return {"device": device, "commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def main(out):
    result = {
        "benchmark": "matmul-case-study",
        "command": "bash bench/h200-matmul-case-study.sh run",
        **run_stamp(),
        "tuning": f"peak replay --budget {BUDGET} (auto strategy, top-128 carried forward)" + (f"; then peak retune --budget {RETUNE} on the tip" if RETUNE else ""),
        "validation": f"16 sampled execution parameters per step; compute-sanitizer memcheck and racecheck on {SANITIZE_SAMPLES} of them and on each tuned winner, at {' '.join(SANITIZE_AT) or 'the smallest listed size'} where valid there",
        "cublas": "peak baseline: sgemm without TF32 (fp32); f16 inputs with f32 accumulation (fp16); same process, same inputs",
        "workflows": [],
        "steps": [],
    }
    work = tempfile.mkdtemp(prefix="case-study-")
    if os.environ.get("FINAL_ONLY") == "1":
        final_only(out, result, work)
        return
    for spec in WORKFLOWS:
        name, branch = spec.split(":")
        print(f"== replay {name} {branch}", flush=True)
        wf, wall, code, resumed = replay(work, out, name, branch)
        entry = {"workflow": name, "branch": branch, "replay_exit": code, "resumed_after_steps": resumed}
        if not os.path.isdir(wf):
            entry["error"] = "replay created no workflow"
            result["workflows"].append(entry)
            continue
        steps = chain(wf, "HEAD")
        entry.update(breakdown(wf, steps, wall, resumed))
        print(json.dumps(entry), flush=True)
        entry["steps_replayed"] = len(steps) - 1
        result["workflows"].append(entry)
        if code == "timed out":
            # The run that resumes this one times every step of the line; timing them here
            # too would spend the device time the resumed replay needs.
            print(f"{name}:{branch}: replay stopped at the time limit; steps are timed by the run that resumes it", flush=True)
            continue
        root_ms = {}
        prev_ms = {}
        for index, (rev, subject) in enumerate(steps):
            meta = show_json(wf, rev, "checkpoint.json") or {}
            transformation = meta.get("transformation") or subject.split(":")[0]
            perf = show_json(wf, rev, "performance.json")
            ctx = os.path.join(work, f"ctx-{name}-{branch}-{index}")
            os.makedirs(ctx, exist_ok=True)
            subprocess.run(f"git -C {wf} archive {rev} context | tar -x -C {ctx} --strip-components=1", shell=True, check=True)
            for n in SIZES:
                tuning, tuned_ms = best_for(perf, n)
                row = {"workflow": f"{name}:{branch}", "step": index, "transformation": transformation, "checkpoint": rev[:7], "n": n}
                if tuning is None:
                    row["error"] = "no tuned configuration at this size"
                    result["steps"].append(row)
                    continue
                try:
                    report = baseline(ctx, n, tuning)
                except Exception as e:  # a step that cannot be timed is recorded, not fatal
                    row["error"] = str(e)
                    result["steps"].append(row)
                    continue
                ms = report["kernel_timing"]["median_ms"]
                root_ms.setdefault(n, ms)
                row.update({
                    "tuning": tuning,
                    "time_ms": ms,
                    "tuned_time_ms": tuned_ms,
                    "tflops": report["kernel_timing"]["tflops"],
                    "cublas_tflops": report["cublas_timing"]["tflops"],
                    "pct_of_cublas": 100.0 * report["kernel_timing"]["tflops"] / report["cublas_timing"]["tflops"],
                    "speedup_over_root": root_ms[n] / ms,
                    "speedup_over_previous": (prev_ms[n] / ms) if n in prev_ms else None,
                    "outputs_match_cublas": report.get("validation"),
                })
                prev_ms[n] = ms
                if index == len(steps) - 1 and n == max(SIZES):
                    row["profile"] = profile(ctx, n, tuning)
                result["steps"].append(row)
                save(out, result)
                print(f"{name}:{branch} {index:2d} {transformation:18s} n={n} {row['tflops']:7.1f} TFLOP/s  cuBLAS {row['cublas_tflops']:7.1f}  {row['pct_of_cublas']:5.1f}%", flush=True)
    save(out, result)
    for w in result["workflows"]:
        print(json.dumps(w))


def merge(out_file, parts):
    """One result from the runs of replays that resumed each other (a device call's time
    limit cut them): each line's replay calls are listed with their wall time and their
    sum; every (line, step, size) row comes from the latest run, which timed the whole
    chain again in one process. Validation and tuning seconds are the checkpoints' own
    records, so the latest run's already cover the whole chain."""
    runs = [json.load(open(p)) for p in parts]
    latest = runs[-1]
    merged = {k: v for k, v in latest.items() if k not in ("workflows", "steps")}
    merged["command"] = "; ".join(dict.fromkeys(r["command"] for r in runs)) + " (resumed with RESUME=<the previous run's OUT>; merged with bench/case_study.py --merge)"
    merged["runs"] = [{"commit": r["commit"], "date": r["date"], "lines": [f"{w['workflow']}:{w['branch']}" for w in r["workflows"]]} for r in runs]
    lines, steps = {}, {}
    for r in runs:
        for w in r["workflows"]:
            key = (w["workflow"], w["branch"])
            calls = lines.get(key, {}).get("replay_calls", [])
            lines[key] = dict(w)
            lines[key]["replay_calls"] = calls + [{"date": r["date"], "wall_s": w["replay_wall_s"], "exit": w["replay_exit"], "steps_done": w.get("steps_replayed")}]
        for row in r["steps"]:
            steps[(row["workflow"], row["step"], row["n"])] = row
    for w in lines.values():
        w["replay_wall_s"] = round(sum(c["wall_s"] for c in w["replay_calls"]), 1)
        w["replay_wall_note"] = "the sum of the replay calls' wall times (each call resumed the one before)"
        w.pop("resumed_after_steps", None)
        w["other_s"] = round(max(w["replay_wall_s"] - w["validation_s"] - w["performance_s"], 0.0), 1)
    merged["workflows"] = list(lines.values())
    merged["steps"] = sorted(steps.values(), key=lambda row: (row["workflow"], row["step"], row["n"]))
    with open(out_file, "w") as f:
        json.dump(merged, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--merge":
        merge(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1])
