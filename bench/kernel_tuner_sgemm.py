#!/usr/bin/env python3
"""Kernel Tuner's brute force over a peak context's own space (bench/h200-tuning-vs-kernel-tuner.sh).

The space, the constraints and the kernel come from the context itself (peak.toml and the
source's macros and device regions), so Kernel Tuner searches exactly what `peak tune`
searches: the tuning values, the manifest's constraints with the input sizes put in, and
the launch of the context's host script (grid n / (BX*TX) x n / (BY*TY), blocks BX x BY;
the script refuses to go on if the host region says anything else). Every configuration's
output is checked against C = A B computed on the host in float64 (`answer=`, `atol=`),
then timed over 7 iterations, as Kernel Tuner does by default.

    python3 bench/kernel_tuner_sgemm.py --out kt.json            # on the GPU machine
    python3 bench/kernel_tuner_sgemm.py --dry-run --out kt.json  # anywhere: the space only

Kernel Tuner is timed around `tune_kernel` alone: importing it, making the inputs and the
reference answer are left out of its wall time (peak's wall includes its start-up and its
reference run), so the comparison leans its way.
"""

import argparse
import json
import os
import re
import sys
import time
import tomllib

# How the context's host script launches the kernel; anything else is refused (the grid and
# block below would then not be peak's).
EXPECTED_LAUNCH = 'launch("sgemm", [n / (BX * TX), n / (BY * TY)], [BX, BY], 0, A, B, C, n);'


def regions(source):
    """The macros and device regions of a peak source, marker lines left out."""
    kept, region = [], None
    host = []
    for line in source.splitlines():
        marker = re.match(r"^//\s*@peak\s+(macros|device|host)\b", line)
        if marker:
            region = marker.group(1)
            continue
        (host if region == "host" else kept).append(line)
    return "\n".join(kept) + "\n", "\n".join(host)


def python_constraint(expr, inputs):
    """A manifest constraint (a Rhai expression) as Kernel Tuner's restriction string."""
    for name, value in inputs.items():
        expr = re.sub(rf"\b{re.escape(name)}\b", str(value), expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    # Rhai divides integers as integers.
    return re.sub(r"(?<!/)/(?!/)", "//", expr)


def tuning_values(spec):
    if "values" in spec:
        return list(spec["values"])
    if "pow2" in spec:
        lo, hi = spec["pow2"]
        out, v = [], 1
        while v <= hi:
            if v >= lo:
                out.append(v)
            v *= 2
        return out
    if "range" in spec:
        r = spec["range"]
        lo, hi = r[0], r[1]
        step = r[2] if len(r) > 2 else 1
        return list(range(lo, hi + 1, step))
    raise SystemExit(f"unsupported tuning parameter spec {spec}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", default="examples/sgemm-cuda-regtiled")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--lang", default="cupy", help="Kernel Tuner backend: cupy (default) or nvcuda")
    ap.add_argument("--iterations", type=int, default=7)
    ap.add_argument("--atol", type=float, default=1e-2, help="absolute tolerance of the output check (plus numpy's default rtol 1e-5)")
    ap.add_argument("--cache", default=None, help="Kernel Tuner's own cache file (none by default: no results written)")
    ap.add_argument("--dry-run", action="store_true", help="build the space and the kernel source, run nothing")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    manifest = tomllib.load(open(os.path.join(args.context, "peak.toml"), "rb"))
    source = open(os.path.join(args.context, manifest["kernel"]["source"])).read()
    kernel_source, host = regions(source)
    launch = " ".join(line.strip() for line in host.splitlines() if line.strip().startswith("launch("))
    if launch != EXPECTED_LAUNCH:
        raise SystemExit(f"the host region launches `{launch}`, this driver knows only `{EXPECTED_LAUNCH}`")
    inputs = {"n": args.n}
    tune_params = {name: tuning_values(spec) for name, spec in manifest["tuning"].items()}
    restrictions = [python_constraint(c, inputs) for c in manifest.get("constraints", {}).get("tuning", [])]

    import kernel_tuner
    from kernel_tuner.searchspace import Searchspace

    # The space as Kernel Tuner sees it, before anything runs (with the block-size limit
    # tune_kernel adds: 1024 threads on the H200).
    space = Searchspace(tune_params, restrictions, 1024, block_size_names=["BX", "BY"])
    report = {
        "kernel_tuner_version": kernel_tuner.__version__,
        "lang": args.lang,
        "n": args.n,
        "tune_params": tune_params,
        "restrictions": restrictions,
        "space_size": space.size,
        "iterations": args.iterations,
        "atol": args.atol,
        "strategy": "brute_force",
    }
    if args.dry_run:
        report["dry_run"] = True
        json.dump(report, open(args.out, "w"), indent=2)
        print(f"kernel tuner {kernel_tuner.__version__}: {space.size} configurations; kernel source {len(kernel_source)} bytes", file=sys.stderr)
        return

    import numpy as np

    n = args.n
    rng = np.random.default_rng(1)
    A = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    B = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    C = np.zeros((n, n), dtype=np.float32)
    reference = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    arguments = [A, B, C, np.int32(n)]
    answer = [None, None, reference, None]

    start = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        "sgemm",
        kernel_source,
        (n, n),
        arguments,
        tune_params,
        grid_div_x=["BX", "TX"],
        grid_div_y=["BY", "TY"],
        block_size_names=["BX", "BY"],
        restrictions=restrictions,
        answer=answer,
        atol=args.atol,
        iterations=args.iterations,
        lang=args.lang,
        strategy="brute_force",
        cache=args.cache,
        quiet=True,
    )
    wall = time.perf_counter() - start

    def valid(r):
        return isinstance(r.get("time"), (int, float))

    measured = [r for r in results if valid(r)]
    best = min(measured, key=lambda r: r["time"]) if measured else None
    split = {key: sum(float(r.get(key, 0) or 0) for r in results) / 1e3 for key in ("compile_time", "verification_time", "benchmark_time", "strategy_time", "framework_time")}
    report.update(
        {
            "wall_s": wall,
            "evaluated": len(results),
            "measured": len(measured),
            "failed": {str(k): v for k, v in _count(str(r.get("time")) for r in results if not valid(r)).items()},
            "configurations_per_s": len(results) / wall if wall > 0 else None,
            "best": None
            if best is None
            else {
                "tuning": {k: best[k] for k in tune_params},
                "time_ms": best["time"],
                "median_ms": float(np.median(best["times"])) if best.get("times") else None,
                "times_ms": best.get("times"),
            },
            # Kernel Tuner's own per-configuration split, summed (its results carry these).
            "split_s": {
                "compile_s": split["compile_time"],
                "verification_s": split["verification_time"],
                "benchmark_s": split["benchmark_time"],
                "strategy_s": split["strategy_time"],
                "framework_s": split["framework_time"],
            },
            "device": env.get("device_name"),
        }
    )
    json.dump(report, open(args.out, "w"), indent=2, default=str)
    print(f"kernel tuner: {len(results)} configurations in {wall:.1f} s = {report['configurations_per_s']:.2f}/s", file=sys.stderr)


def _count(items):
    out = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


if __name__ == "__main__":
    main()
