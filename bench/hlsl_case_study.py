"""The HLSL fp32 GEMM line on a GPU through Vulkan (bench/h200-hlsl-case-study.sh runs this).

For each size in $SIZES: time cuBLAS sgemm (`peak baseline` on examples/matmul-cuda-f32, no
TF32), replay examples/workflows/matmul-hlsl-f32-line.bundle at that size (every step
validated against the naive root and tuned there, within $BUDGET evaluations and $STEP_TIME
seconds per step), then time every checkpoint's best configuration with `peak run` and
cuBLAS again, all in this one process tree. Writes OUT/h200-hlsl-case-study-nN.json per
size; `--merge OUT.json PART.json ...` joins the sizes of separate device calls.
"""

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

# The replayed chain is walked as the CUDA case study walks its own.
from case_study import chain, sh, show_json

PEAK = os.environ.get("PEAK", "peak")
BUNDLE = os.environ.get("BUNDLE", "examples/workflows/matmul-hlsl-f32-line.bundle")
WORKFLOW = os.path.basename(BUNDLE).removesuffix(".bundle")
BUDGET = os.environ.get("BUDGET", "48")
STEP_TIME = os.environ.get("STEP_TIME", "20")
SAMPLES = os.environ.get("SAMPLES", "16")
SIZES = [int(n) for n in os.environ.get("SIZES", "2048 4096").split()]
# The replay is stopped after this many seconds (a device call has a time limit); the
# steps it replayed are timed all the same.
REPLAY_TIMEOUT = float(os.environ.get("REPLAY_TIMEOUT", "380"))
CUBLAS_CONTEXT = os.environ.get("CUBLAS_CONTEXT", "examples/matmul-cuda-f32")

# Issue 28's cross-backend question, answered by the walk that recorded the bundle: what
# each fp32 transformation needed to carry over from CUDA to HLSL.
CARRIED = [
    ("Refactor", "no change", "the [hlsl] row of translations.toml (gid/gtid, groupshared, GroupMemoryBarrierWithGroupSync) as it was"),
    ("TB-Tiling", "no change", "the HLSL tile_load snippet (macros over array names, peak_zero) as it was"),
    ("Thread-Tiling", "no change", ""),
    ("Thread-Cache", "no change", ""),
    ("Transpose", "no change", "the HLSL tile_load_transposed snippet as it was"),
    ("Thread-Chunk", "no change", ""),
    ("Vectorize", "translation entry", "vectorize.toml [translations.hlsl] vector_notes: no pointers or casts (a vector names the accessor and its coordinates), peak binds one resource per binding (no float4 view of a StructuredBuffer<float>), HLSL's ?: evaluates both sides (clamp guarded reads). The HLSL kernel therefore loads VEC scalars per vector: no 16-byte loads; real ones need the operand buffers retyped (ByteAddressBuffer.Load4 or StructuredBuffer<float4>), an HLSL-only change not made"),
    ("Split-K", "translation entry", "split-k.toml reduce_kernel_note: the reduction is a second entry point of the same module with [numthreads(BLOCK_X * BLOCK_Y, 1, 1)] (the device pass did not say it, the host pass did); scratch from alloc(), K_SPLITS along the grid's z: no HLSL-only pass"),
    ("Pipelining", "translation entry", "pipelining.toml [translations.hlsl] narrow_copies: HLSL has no asynchronous copy and no &AT, so the NUM_STAGES groupshared buffers are filled by plain copies through the accessor (double buffering without cp.async)"),
    ("Register-Staging", "translation entry", "translations.toml guarded_read (every backend; HLSL: ?: evaluates both sides, read at clamped coordinates), used by register-staging.toml"),
    ("Offset", "no change", "tiles are read element by element on HLSL, so the padding is OFFSET elements"),
    ("Block-Swizzle", "no change", ""),
]

VULKAN_KEYS = re.compile(r"(subgroupSizeControl|computeFullSubgroups|minSubgroupSize|maxSubgroupSize|requiredSubgroupSizeStages|"
                         r"shaderFloat16|shaderInt8|storageBuffer16BitAccess|cooperative_matrix|cooperativeMatrix|"
                         r"maxComputeSharedMemorySize|maxComputeWorkGroupInvocations|maxComputeWorkGroupCount|"
                         r"robustBufferAccess|subgroupSize|timestampPeriod|pipelineCache|deviceName|driverInfo|driverVersion|apiVersion)", re.I)


def stamp():
    try:
        device = sh("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader").strip()
    except (OSError, RuntimeError) as e:
        device = f"unknown ({e})"
    carried = os.path.join(os.path.dirname(PEAK), "commit")
    commit = os.environ.get("PEAK_COMMIT") or (open(carried).read().strip() if os.path.exists(carried) else "unknown")
    return {"device": device, "commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def vulkan_driver(out):
    """What the Vulkan driver exposes that issue 28 asks about: the lines of vulkaninfo that
    name subgroup size control, 16-bit types, cooperative matrices and the compute limits
    (the full output is written beside the JSON), and peak's own view of the device."""
    found = {"peak_info": None, "vulkaninfo": None}
    try:
        found["peak_info"] = [b for b in json.loads(sh(PEAK, "info", "--json", timeout=120)) if b["backend"] == "hlsl"]
    except Exception as e:
        found["peak_info"] = f"error: {e}"
    exe = os.environ.get("VULKANINFO", "vulkaninfo")
    try:
        text = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120).stdout
        with open(os.path.join(out, "vulkaninfo.txt"), "w") as f:
            f.write(text)
        lines = [l.strip() for l in text.splitlines() if VULKAN_KEYS.search(l)]
        found["vulkaninfo"] = list(dict.fromkeys(lines))
        found["has_VK_KHR_cooperative_matrix"] = "VK_KHR_cooperative_matrix" in text
        found["has_VK_NV_cooperative_matrix"] = "VK_NV_cooperative_matrix" in text
        found["has_VK_EXT_subgroup_size_control"] = "VK_EXT_subgroup_size_control" in text or "subgroupSizeControl" in text
    except Exception as e:
        found["vulkaninfo"] = f"not run: {e}"
    for line in (found["vulkaninfo"] if isinstance(found["vulkaninfo"], list) else [found["vulkaninfo"]]):
        print("vulkan:", line, flush=True)
    return found


def cublas(n):
    """cuBLAS sgemm's TFLOP/s at n, or None where it cannot run (the rows keep their times)."""
    try:
        report = json.loads(sh(PEAK, "baseline", CUBLAS_CONTEXT, "--set", f"n={n}", "--set", "BLOCK_X=32", "--set", "BLOCK_Y=8",
                               "--reps", "30", "--warmup", "5", "--json", timeout=300))
        return report["cublas_timing"]["tflops"]
    except Exception as e:
        print(f"cuBLAS not timed at n={n}: {e}", flush=True)
        return None


def replay(into, n):
    args = [PEAK, "replay", BUNDLE, "--into", into, "--set", f"n={n}", "--budget", BUDGET, "--time", STEP_TIME, "--samples", SAMPLES]
    print(" ".join(args), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=REPLAY_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = "timed out"
    return code, time.monotonic() - start, " ".join(args)


def time_step(ctx, n, tuning):
    args = [PEAK, "run", ctx, "--set", f"n={n}", "--reps", "30", "--warmup", "5", "--json"]
    for name, value in tuning.items():
        args += ["--set", f"{name}={value}"]
    return json.loads(sh(*args, timeout=300))["median_ms"]


def main(out):
    result = {
        "benchmark": "hlsl-case-study",
        "command": "bash bench/h200-hlsl-case-study.sh run",
        **stamp(),
        "workflow": f"{BUNDLE} (regions written by the agent executor on lavapipe, validated at n = 97)",
        "tuning": f"peak replay --set n=N --budget {BUDGET} --time {STEP_TIME} --samples {SAMPLES} (auto strategy, each step seeded by its parent's top-K); each step's best then timed by peak run (30 reps, median)",
        "cublas": f"peak baseline {CUBLAS_CONTEXT}: cuBLAS sgemm without TF32, same n, same device call, before the replay and after the timings",
        "fp32_peak_tflops": 67.0,
        "carried_from_cuda": [{"transformation": t, "needed": k, "how": h} for t, k, h in CARRIED],
        "overridden_prompts": 4,
        "overridden_prompts_note": "prompt defects found on the walk, each fixed generically and its step redone with the fixed text: Vectorize (guarded reads under HLSL's both-sided ?:; the first walk is kept on branch main, tag vectorize-select), Split-K (the reduction's [numthreads]), Pipelining (&AT does not exist in HLSL), Register-Staging (guarded reads)",
        "vulkan_driver": vulkan_driver(out),
        "replays": [],
        "steps": [],
    }
    work = tempfile.mkdtemp(prefix="hlsl-case-study-")
    for n in SIZES:
        flops = 2.0 * n ** 3
        cublas_before = cublas(n)
        print(f"n={n} cuBLAS sgemm {cublas_before} TFLOP/s", flush=True)
        into = os.path.join(work, f"wf-{n}")
        code, wall, command = replay(into, n)
        entry = {"n": n, "replay": command, "replay_exit": code, "replay_wall_s": round(wall, 1)}
        result["replays"].append(entry)
        if not os.path.isdir(into):
            entry["error"] = "the replay created no workflow"
            continue
        sh(PEAK, "bundle", into, os.path.join(out, f"replayed-{WORKFLOW}-n{n}.bundle"))
        steps = chain(into, "HEAD")
        entry["steps_replayed"] = len(steps) - 1
        rows = []
        for index, (rev, subject) in enumerate(steps):
            meta = show_json(into, rev, "checkpoint.json") or {}
            perf = show_json(into, rev, "performance.json") or {}
            row = {"workflow": WORKFLOW, "step": index, "transformation": meta.get("transformation") or subject.split(":")[0], "checkpoint": rev[:7], "n": n}
            run = next((r for r in perf.get("runs", []) if r.get("inputs", {}).get("n") == n and r.get("best")), None)
            if run is None:
                row["error"] = "no tuned configuration at this size"
                rows.append(row)
                continue
            tuning = run["best"]["params"]["tuning"]
            row.update({"tuning": tuning, "tuned_time_ms": run["best"]["time_ms"], "evaluations": run.get("evaluations"),
                        "space": run.get("space"), "tuning_elapsed_s": run.get("elapsed_s")})
            ctx = os.path.join(work, f"ctx-{n}-{index}")
            os.makedirs(ctx, exist_ok=True)
            subprocess.run(f"git -C {into} archive {rev} context | tar -x -C {ctx} --strip-components=1", shell=True, check=True)
            try:
                row["time_ms"] = time_step(ctx, n, tuning)
                row["tflops"] = flops / (row["time_ms"] * 1e-3) / 1e12
            except Exception as e:
                row["error"] = str(e)
            rows.append(row)
        cublas_after = cublas(n)
        entry.update({"cublas_tflops_before": cublas_before, "cublas_tflops_after": cublas_after})
        measured = [t for t in (cublas_before, cublas_after) if t]
        cublas_tflops = max(measured) if measured else None
        root_ms = prev_ms = None
        for row in rows:
            if "tflops" in row:
                row["cublas_tflops"] = cublas_tflops
                row["pct_of_cublas"] = 100.0 * row["tflops"] / cublas_tflops if cublas_tflops else None
                row["pct_of_fp32_peak"] = 100.0 * row["tflops"] / 67.0
                root_ms = root_ms or row["time_ms"]
                row["speedup_over_root"] = root_ms / row["time_ms"]
                row["speedup_over_previous"] = prev_ms / row["time_ms"] if prev_ms else None
                prev_ms = row["time_ms"]
                print(f"n={n} {row['step']:2d} {row['transformation']:17s} {row['tflops']:6.2f} TFLOP/s {row['pct_of_cublas'] or 0:5.1f}% of cuBLAS  ({row['evaluations']} evaluations in {row['tuning_elapsed_s']:.0f} s)", flush=True)
            else:
                print(f"n={n} {row['step']:2d} {row['transformation']:17s} {row.get('error')}", flush=True)
        result["steps"].extend(rows)
        with open(os.path.join(out, f"h200-hlsl-case-study-n{n}.json"), "w") as f:
            json.dump(result, f, indent=1)
    with open(os.path.join(out, "h200-hlsl-case-study.json"), "w") as f:
        json.dump(result, f, indent=1)


def merge(out_file, parts):
    """The sizes of separate device calls in one file: the latest call's header, every
    call's replays and steps, the calls listed with their commits and dates."""
    runs = [json.load(open(p)) for p in parts]
    merged = {k: v for k, v in runs[-1].items() if k not in ("replays", "steps")}
    merged["command"] = runs[-1]["command"] + " (one device call per size; merged with python3 bench/hlsl_case_study.py --merge)"
    merged["runs"] = [{"commit": r["commit"], "date": r["date"], "device": r["device"], "sizes": [e["n"] for e in r["replays"]]} for r in runs]
    merged["replays"] = [e for r in runs for e in r["replays"]]
    merged["steps"] = sorted((row for r in runs for row in r["steps"]), key=lambda row: (row["n"], row["step"]))
    with open(out_file, "w") as f:
        json.dump(merged, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--merge":
        merge(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1])
