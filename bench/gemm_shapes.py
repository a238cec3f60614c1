#!/usr/bin/env python3
"""The fp32 GEMM line in roles on the H200 at the transformer shapes of issue 25.

Out = inp . W^T + bias (f32, no TF32). The CUDA bundle
(examples/workflows/gemm-nt-bias-cuda-deferred.bundle, Refactor ... Block-Swizzle) is
replayed once, at the first shape: every step validated (61 x 47 x 33, the manifest's
[validation.inputs]), sanitized small and tuned at that shape (PIN=1: at the design
configuration alone). Then, for each shape, the tip is retuned at that shape in the
design's neighbourhood (RETUNE_SPACE, recorded per row) and timed at its best
configuration against cuBLASLt doing the same work (`peak baseline --against cublaslt`:
NT, bias fused, same device call), and at the design configuration for reference.
Rows are merged into bench/results/h200-gemm-shapes.json.

Environment: PEAK, PEAK_COMMIT, SHAPES (default the three MLP/attention shapes), WF (where
the replay goes), BUNDLE, PIN (1), BUDGET (evaluations per step, default 48),
SANITIZE_SAMPLES (default 2), SANITIZE_AT, REPS (default 20), REPLAY_TIMEOUT (seconds,
default 420), STEP_TIME (tuning seconds per replayed step, default 15), RETUNE_BUDGET and RETUNE_TIME
(per shape, default 128 and 150 s; RETUNE_BUDGET=0 skips it), RETUNE_WIDEN (NAME=V1,V2 ...:
values beyond the neighbourhood).

DTYPE=bf16 (or f16, with its bundle) runs the 16-bit Hopper line instead
(examples/workflows/gemm-nt-bias-cuda-<dtype>-deferred.bundle, Refactor ... TMA-Store ->
Persistent-Tiles -> Consumer-Overlap, or BRANCH=ping-pong -> Ping-Pong; a tip whose blocks walk several tiles is validated
again with TILES_PER_CTA = 1, 2 and 4, under memcheck, racecheck and synccheck):
the bundle is replayed at EACH shape into its own workflow (WF/<dtype>[-<branch>]-<shape>): every step
validated at the manifest's [validation.inputs] (200 x 136 x 88), sanitized once
(SANITIZE_SAMPLES, default 1) at SANITIZE_AT (default M=256 N=256 K=128) and tuned at the
shape (--samples 4, BUDGET default 12 evaluations and STEP_TIME default 12 s per step, so
one replay stays near 200 s); the tip is retuned over its whole (small) space at the shape
(RETUNE_BUDGET default 90, RETUNE_TIME default 90 s; RETUNE_WIDEN="NAME=V1,V2 ..." narrows or
widens it, each name's values replaced) and timed at its best configuration
against cuBLASLt in one `peak baseline --against cublaslt` call (bf16 in, bf16 out, f32
accumulation, NT, bias fused). Rows carry dtype bf16 and are merged beside the f32 rows.
RESUME_FROM=<a returned h200-replayed-*.bundle> starts the first shape's workflow from that
earlier replay (its trailing retunes dropped), so the replay resumes and runs only the steps
the bundle's line has added since (with REPLAY_ONCE, the usual way to measure one new step).
The fp32 path honours it too (it always replays once) and packs the resumed workflow.
REPLAY_ONCE=1 replays at the first shape only and retunes that tip at every shape; a
workflow already at WF/<dtype>[-<branch>]-<first shape> (an earlier call's replay of the same line, cloned there) is not
replayed again.

DTYPE=e4m3 runs the fp8 Hopper line the same way (examples/workflows/gemm-nt-bias-cuda-e4m3-deferred.bundle:
inp and weight e4m3, bias and out bf16, f32 accumulation, validated at 200 x 136 x 80; K a
multiple of 16 for TMA's 16-byte rows) against cuBLASLt's fp8 GEMM (e4m3 x e4m3 -> bf16,
CUBLAS_COMPUTE_32F, bias fused, fast accumulation, scales 1.0), which takes only this "NT"
form (both operands K-major), so its square row (SHAPES=4096x4096x4096) is NT with the
bias too. Rows carry dtype e4m3.

SQUARE=1 times the square case study's tips instead (the NN rows of the table: n = 4096, no
epilogue): the replayed H200 workflows (SQUARE_TIPS: the fp32 and f16 tips in
bench/results/h200-replayed-*.bundle) are cloned and each tip is timed at the configuration
its case-study results name best at n, against cuBLASLt in one `peak baseline --against
cublaslt` call (NN, same types). Rows are merged by (dtype, m, n, k, layout).
"""
import datetime, json, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPE = os.environ.get("DTYPE", "f32")
# The Hopper line (TMA, wgmma, warp specialisation): 16-bit, and fp8 with bf16 out.
HALF = DTYPE in ("bf16", "f16", "e4m3")
BUNDLE = os.environ.get("BUNDLE", os.path.join(ROOT, "examples/workflows/gemm-nt-bias-cuda-deferred.bundle" if DTYPE == "f32"
                                               else f"examples/workflows/gemm-nt-bias-cuda-{DTYPE}-deferred.bundle"))
# BRANCH: the bundle's branch to replay (its HEAD's when unset), e.g. ping-pong (16-bit) or
# joint-staging (fp32).
BRANCH = os.environ.get("BRANCH")
RESULT = os.path.join(ROOT, "bench/results/h200-gemm-shapes.json")
# The configuration the line was designed for: the fastest fp32 tile of the square case
# study's exhaustive sweep (h200-f32-tile-sweep.json: 16 x 16 threads, 16 x 8 outputs each).
DESIGN = {"BLOCK_X": 16, "BLOCK_Y": 16, "TRD_X": 16, "TRD_Y": 8, "CHUNK_X": 2, "CHUNK_Y": 4, "VEC": 4, "TILE_K": 8,
          "NUM_STAGES": 3, "K_SPLITS": 1, "OFFSET": 0, "GROUP_M": 8}
# Where the tip is retuned at each shape: the design's neighbourhood (recorded per row).
RETUNE_SPACE = {"BLOCK_X": "8,16,32", "BLOCK_Y": "8,16", "TRD_X": "4,8,16", "TRD_Y": "4,8,16", "CHUNK_X": "2,4",
                "CHUNK_Y": "2,4", "TILE_K": "8,16", "VEC": "4", "NUM_STAGES": "2,3,4", "OFFSET": "0,1",
                "GROUP_M": "1,8", "K_SPLITS": "1"}


def sh(args, timeout=None):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def baseline(peak, ctx, inputs, tuning, reps, extra=()):
    sets = [a for k, v in {**inputs, **tuning}.items() for a in ("--set", f"{k}={v}")]
    r = sh([peak, "baseline", ctx, "--against", "cublaslt", "--reps", str(reps), "--json", *sets, *extra])
    if not r.stdout.strip():
        return {"error": r.stderr[-2000:]}
    rep = json.loads(r.stdout)
    return {"peak_ms": rep["kernel_timing"]["median_ms"], "cublaslt_ms": rep["cublas_timing"]["median_ms"],
            "pct": rep["percent_of_cublas"], "matches_cublaslt": rep["validation"]["passed"], "params": tuning,
            "device": rep.get("device"), "cublaslt": rep.get("cublas")}


# Blocks walk several tiles (TILES_PER_CTA) from Persistent-Tiles on: a tip with that step in
# its line is validated again with every block walking two or more, whatever step it is.
TILE_LOOP_FROM = "Persistent-Tiles"
# A tip with one of these in its line splits K (the decode branch's later steps too): it is
# validated again where its splits reach past K (K = 424: 7 k-steps, so the
# last split of 2 or 4 has a k-step wholly past K, which TMA fills with zeros) and where M
# is smaller than one tile (a decode step), under the same sanitizers.
SPLIT_STEPS = ("Persistent-Split-K", "Split-K-Fixup")
SPLIT_VALIDATION = ["--set", "K_SPLITS=2,4", "--set", "M=16,200", "--set", "N=136", "--set", "K=424"]


# Ping-Pong's consumer warpgroups take turns through named barriers: its tile-loop
# validation also runs racecheck and synccheck (TILE_LOOP_SANITIZE overrides).
TILE_LOOP_SANITIZE = ["--sanitize", os.environ.get("TILE_LOOP_SANITIZE", "memcheck,racecheck,synccheck")]
# Where Stream-K's tip is validated again: shapes of 1 to 12 tiles (so all of them are shared
# out by k-step), none dividing a tile, with the share-out on.
STREAM_K_VALIDATION = ["--set", "STREAM_K=1,2", "--set", "K_SPLITS=1", "--set", "M=200,1000", "--set", "N=136,777", "--set", "K=88,513"]


def tip_best(peak, wf):
    tip = json.loads(sh([peak, "show", "HEAD", "-w", wf, "--json"]).stdout)
    return ((tip.get("performance") or {}).get("best") or {}).get("params", {}).get("tuning")


def tip_to_time(peak, wf, entries, replay):
    """The configuration a row times the replayed tip at (its best), or None: a replay that
    failed (a step that did not reproduce, a timeout) times nothing, since its tip is not the
    line's, only the steps before the failure."""
    return tip_best(peak, wf) if entries and replay["rc"] == 0 else None


def neighbourhood(m, n, k):
    """The retune's space at a shape: the design's neighbourhood, wider where the shape asks
    (k splits only where the output has few tiles)."""
    space = dict(RETUNE_SPACE)
    if m * n <= 256 * 256 * 16:
        space["K_SPLITS"] = "1,2,4,8"
    # RETUNE_WIDEN="OFFSET=0,1,2,4,8 TILE_K=8,16,32": values of parameters beyond the
    # neighbourhood (the square case study's best used OFFSET = 8).
    space.update(retune_widen())
    return space


def retune_widen():
    """RETUNE_WIDEN="NAME=V1,V2 ...": the retune's values of those parameters, by name."""
    widen = {}
    for item in os.environ.get("RETUNE_WIDEN", "").split():
        name, _, values = item.partition("=")
        if not values:
            raise SystemExit(f"RETUNE_WIDEN: {item!r} is not NAME=V1,V2,...")
        widen[name] = values
    return widen


def replay_command(peak, wf, sizes, budget, step_time, samples, sanitize_samples, sanitize_at, pins):
    """peak replay of BUNDLE (its BRANCH) into wf, tuned at `sizes`."""
    branch = ["--branch", BRANCH] if BRANCH else []
    return [peak, "replay", BUNDLE, *branch, "--into", wf, "--budget", budget, "--time", step_time, "--samples", samples,
            "--sanitize-samples", sanitize_samples, *sanitize_at, *sizes, *pins]


def replay_at(cmd, timeout, log_path):
    """Run a replay_command; the replay's record for a row."""
    started = time.time()
    try:
        with open(log_path, "w") as log_file:
            code = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, timeout=timeout).returncode
        replay = {"rc": code, "log": open(log_path).read()[-3000:]}
    except subprocess.TimeoutExpired:
        replay = {"rc": "timeout", "log": open(log_path).read()[-3000:]}
    replay.update({"seconds": round(time.time() - started, 1), "command": " ".join(cmd[1:])})
    return replay


def validate_again(peak, wf, sets, timeout, sanitize_samples):
    """The tip of wf validated again against its root (examples/gemm-nt-bias-cuda, or its
    DTYPE twin) at sets: 12 samples, sanitize_samples of them under TILE_LOOP_SANITIZE's tools;
    rc, the verdicts' tail, seconds."""
    root = os.path.join(ROOT, "examples/gemm-nt-bias-cuda" + ("" if DTYPE == "f32" else f"-{DTYPE}"))
    started = time.time()
    try:
        r = sh([peak, "validate", os.path.join(wf, "context"), "--against", root,
                *sets, "--samples", "12", "--sanitize-samples", str(sanitize_samples), *TILE_LOOP_SANITIZE, "--json"], timeout=timeout)
        return {"rc": r.returncode, "out": r.stdout[-3000:], "log": r.stderr[-1500:], "seconds": round(time.time() - started, 1)}
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "seconds": round(time.time() - started, 1)}


def resume_from(bundle, wf):
    """Start wf from an earlier call's replayed workflow (RESUME_FROM, a returned
    h200-replayed-*.bundle) without the retunes it ends with, so that `peak replay` keeps its
    steps and replays only the ones the recorded line has added since."""
    if os.path.exists(wf):
        return
    if subprocess.run(["git", "clone", "-q", bundle, wf], capture_output=True).returncode != 0:
        raise SystemExit(f"RESUME_FROM={bundle}: not a replayed workflow bundle git can clone (a returned h200-replayed-*.bundle)")
    subprocess.run(["git", "-C", wf, "branch", "peak-attempts", "origin/peak-attempts"], check=True, capture_output=True)
    # Without the remote: `peak log` lists every ref, and the clone's origin/main (the earlier
    # call's retunes) would stand before the step this call replays from and measures.
    subprocess.run(["git", "-C", wf, "remote", "remove", "origin"], check=True, capture_output=True)
    log = subprocess.run(["git", "-C", wf, "log", "--first-parent", "--format=%H %s"], check=True, capture_output=True, text=True).stdout
    last_step = next(line.split()[0] for line in log.splitlines() if not line.split(" ", 1)[1].startswith("Retune"))
    subprocess.run(["git", "-C", wf, "reset", "-q", "--hard", last_step], check=True)


def pack(peak, wf, out, shape):
    """Bundle the replayed workflow wf into out (h200-replayed-gemm-nt-bias-cuda-<dtype>-<shape>.bundle,
    one file to bring back and keep under bench/results/); its file name, or None if peak failed."""
    packed = os.path.join(out, f"h200-replayed-gemm-nt-bias-cuda-{DTYPE}-{shape}.bundle")
    return os.path.basename(packed) if sh([peak, "bundle", wf, packed]).returncode == 0 else None


def steps_of(peak, wf):
    log = sh([peak, "log", "-w", wf, "--json"])
    return json.loads(log.stdout) if log.stdout.strip() else []


def main_half(out):
    """The 16-bit Hopper line: one replay per shape, the tip retuned and timed there."""
    peak = os.environ.get("PEAK", "carry/gemm-shapes/peak")
    shapes = os.environ.get("SHAPES", "8192x3072x768 8192x768x3072 8192x2304x768").split()
    budget, samples = os.environ.get("BUDGET", "12"), os.environ.get("SANITIZE_SAMPLES", "1")
    reps, timeout = int(os.environ.get("REPS", "20")), int(os.environ.get("REPLAY_TIMEOUT", "300"))
    step_time = os.environ.get("STEP_TIME", "12")
    retune_budget, retune_time = os.environ.get("RETUNE_BUDGET", "90"), os.environ.get("RETUNE_TIME", "90")
    sanitize_at = [a for size in os.environ.get("SANITIZE_AT", "M=256 N=256 K=128").split() for a in ("--sanitize-at", size)]
    base = os.environ.get("WF", os.path.join(out, "wf"))
    os.makedirs(base, exist_ok=True)
    rows, device = [], None
    # REPLAY_ONCE=1: the line is replayed (validated, sanitized) once, at the first shape,
    # and its tip retuned at every shape, as the fp32 path does: one replay's validation
    # holds for every shape (the code does not change), so only the tuning is per shape.
    once = os.environ.get("REPLAY_ONCE") == "1"
    replayed = None
    for shape in shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        inputs = {"M": m, "N": n, "K": k}
        sizes = ["--set", f"M={m}", "--set", f"N={n}", "--set", f"K={k}"]
        # The folder names the dtype and branch: an earlier call's workflow left in the same WF
        # (a warm machine keeps /tmp) is reused only for the same line, never another dtype's.
        wf = os.path.join(base, f"{DTYPE}{'-' + BRANCH if BRANCH else ''}-{shapes[0] if once else shape}")
        if once and replayed is not None:
            replay = dict(replayed, reused=f"replayed at {shapes[0]}, retuned at {shape}")
        elif once and os.path.exists(os.path.join(wf, "context")) and not os.environ.get("RESUME_FROM"):
            # A workflow replayed by an earlier call (a returned h200-replayed-*.bundle, cloned
            # there): its tip is retuned at these shapes.
            replay = replayed = {"rc": 0, "log": "replayed by an earlier call into " + wf, "reused": f"an earlier replay, retuned at {shape}"}
        else:
            if os.environ.get("RESUME_FROM"):
                resume_from(os.environ["RESUME_FROM"], wf)
            # SAMPLES validation samples per step: a step whose samples the launch script all
            # prunes at the validation size (Persistent-Tiles' larger tiles) fails the replay.
            replay = replay_at(replay_command(peak, wf, sizes, budget, step_time, os.environ.get("SAMPLES", "4"), samples, sanitize_at, []),
                               timeout, os.path.join(out, f"replay-{DTYPE}-{shape}.log"))
            replayed = replay
        entries = steps_of(peak, wf)
        row = {"dtype": DTYPE, "m": m, "n": n, "k": k, "layout": "NT", "epilogue": "bias", "replay": replay,
               "commit": os.environ.get("PEAK_COMMIT", "unknown"),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "line": [e["transformation"] for e in reversed(entries)],
               "steps": [{"transformation": e["transformation"], "verdict": e["verdict"], "best_time_ms": e.get("best_time_ms")} for e in reversed(entries)]}
        if replay["rc"] == 0 and entries and any(e["transformation"] == TILE_LOOP_FROM for e in entries) and "reused" not in replay:
            # The replay validates 4 samples, not all of which have fewer blocks than tiles:
            # the persistent tip is validated again at [validation.inputs] (200 x 136 x 88: 2
            # to 12 tiles) with TILES_PER_CTA = 1, 2 and 4, so that blocks walk one tile (Ping-Pong's
            # second warpgroup then only pre-arrives) or several, and the pipeline's phases and
            # the staging buffer cross tiles.
            row["tile_loop_validation"] = validate_again(peak, wf, ["--set", "TILES_PER_CTA=1,2,4"], timeout, 1)
            if any(e["transformation"] in SPLIT_STEPS for e in entries):
                row["split_validation"] = validate_again(peak, wf, SPLIT_VALIDATION, timeout, 2)
        if replay["rc"] == 0 and int(retune_budget) > 0:
            started = time.time()
            try:
                # RETUNE_WIDEN="K_SPLITS=2,4 NUM_STAGES=8,10,12": the retune's space, each NAME=V1,V2
                # replacing that parameter's values (a subspace the budget can exhaust).
                space = [a for name, values in retune_widen().items() for a in ("--set", f"{name}={values}")]
                r = sh([peak, "retune", "-w", wf, "--budget", retune_budget, "--time", retune_time, "--no-sanitize-winner", *sizes, *space], timeout=timeout)
                row["retune"] = {"rc": r.returncode, "log": r.stderr[-1500:], "seconds": round(time.time() - started, 1),
                                 "space": os.environ.get("RETUNE_WIDEN") or "the manifest's"}
            except subprocess.TimeoutExpired:
                row["retune"] = {"rc": "timeout", "seconds": round(time.time() - started, 1)}
        best = tip_to_time(peak, wf, entries, replay)
        if best:
            tuned = baseline(peak, os.path.join(wf, "context"), inputs, best, reps)
            row.update({k2: tuned.get(k2) for k2 in ("peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")})
            row["tuned"] = tuned
            device = device or tuned.get("device")
        if entries:
            # The replayed workflow, one file to bring back and keep (bench/results/h200-replayed-*.bundle).
            # With REPLAY_ONCE every shape retunes the first shape's workflow: it is packed again
            # after each, so the one bundle ends holding every shape's Retune, each row's among them.
            row["bundle"] = pack(peak, wf, out, shapes[0] if once else shape)
        print(json.dumps({k2: row.get(k2) for k2 in ("dtype", "m", "n", "k", "peak_ms", "cublaslt_ms", "pct")}), flush=True)
        rows.append(row)
        # Written after every shape: a device call that runs out of time keeps what it measured.
        # Keyed by dtype and shapes: a later call at other shapes keeps this call's command.
        merge(rows, device, half_command(shapes, budget, step_time, samples, retune_budget, retune_time, reps, once), out,
              command_key=f"{DTYPE} {' '.join(shapes)}")


def half_command(shapes, budget, step_time, samples, retune_budget, retune_time, reps, once):
    replayed = ("peak replay once, at the first shape (or an earlier call's replay cloned there), into WF/<dtype>[-<branch>]-<first shape>; per shape"
                if once else "per shape peak replay")
    return (f"DTYPE={DTYPE}{' REPLAY_ONCE=1' if once else ''}{' BRANCH=' + BRANCH if BRANCH else ''} bash bench/h200-gemm-shapes.sh run (SHAPES={' '.join(shapes)} BUDGET={budget} "
            f"STEP_TIME={step_time} SANITIZE_SAMPLES={samples} RETUNE_BUDGET={retune_budget} RETUNE_TIME={retune_time} REPS={reps}): {replayed} "
            f"{os.path.relpath(BUNDLE, ROOT)} --into WF/<dtype>[-<branch>]-<shape> --set M= --set N= --set K= (each row's replay.command), peak retune -w WF/<dtype>[-<branch>]-<shape> "
            f"at the shape, peak baseline WF/<dtype>[-<branch>]-<shape>/context --against cublaslt --reps {reps} --set <inputs and the tip's best configuration>")


def row_key(row):
    return (row.get("dtype"), row.get("m"), row.get("n"), row.get("k"), row.get("layout"))


def merge(rows, device, command, out, command_key=DTYPE):
    """Merge rows into the results file, keeping every row of another (dtype, shape, layout)."""
    doc = json.load(open(RESULT)) if os.path.exists(RESULT) else {}
    new = {row_key(r) for r in rows}
    keep = [r for r in doc.get("rows", []) if row_key(r) not in new]
    commands = dict(doc.get("commands", {}))
    commands[command_key] = command
    doc.update({
        "benchmark": "h200-gemm-shapes",
        "commands": commands,
        "device": device or doc.get("device"),
        "commit": os.environ.get("PEAK_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rows": keep + rows,
    })
    doc.setdefault("method", "peak_ms and cublaslt_ms: peak baseline's medians in one device call (CUDA events, L2 flushed before every run: peak's one timing method), the kernel at the configuration the tuning found best at that shape")
    for path in (RESULT, os.path.join(out, "h200-gemm-shapes.json")):
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    print("wrote", RESULT, "and", os.path.join(out, "h200-gemm-shapes.json"))


# The square case study's tips: the replayed workflow and the results file whose last step
# at n names the configuration the case study found best there (a wider retune than the one
# recorded in the bundle, for fp32).
SQUARE_TIPS = {"f32": ("bench/results/h200-replayed-matmul-cuda-f32-main.bundle", "bench/results/h200-matmul-case-study.json"),
               "f16": ("bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle", "bench/results/h200-matmul-case-study-f16-tma-store.json")}


def recorded_best(results, n):
    steps = [s for s in json.load(open(os.path.join(ROOT, results)))["steps"] if s.get("n") == n and s.get("tuning")]
    return steps[-1]["tuning"] if steps else None


def main_square(out):
    """The square case study's tips (NN, n = 4096) against cuBLASLt, at their recorded best."""
    peak = os.environ.get("PEAK", "carry/gemm-shapes/peak")
    n, reps = int(os.environ.get("SQUARE_N", "4096")), int(os.environ.get("REPS", "20"))
    rows, device = [], None
    for dtype, (bundle, results) in SQUARE_TIPS.items():
        wf = os.path.join(out, f"square-{dtype}")
        if sh(["git", "clone", "-q", os.path.join(ROOT, bundle), wf]).returncode != 0:
            raise SystemExit(f"cannot clone {bundle}")
        best = recorded_best(results, n) or tip_best(peak, wf)
        tuned = baseline(peak, os.path.join(wf, "context"), {"n": n}, best, reps)
        row = {"dtype": dtype, "m": n, "n": n, "k": n, "layout": "NN", "epilogue": "none", "source": bundle, "configuration_from": results,
               "commit": os.environ.get("PEAK_COMMIT", "unknown"),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               **{k2: tuned.get(k2) for k2 in ("peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")}, "tuned": tuned}
        device = device or tuned.get("device")
        print(json.dumps({k2: row.get(k2) for k2 in ("dtype", "m", "peak_ms", "cublaslt_ms", "pct")}), flush=True)
        rows.append(row)
    command = (f"SQUARE=1 bash bench/h200-gemm-shapes.sh run (SQUARE_N={n} REPS={reps}): per tip git clone <bundle>, peak baseline "
               f"<clone>/context --against cublaslt --reps {reps} --set n={n} --set <the configuration its case-study results name best at n>")
    merge(rows, device, command, out, command_key="square")


def main(out):
    if os.environ.get("SQUARE") == "1":
        return main_square(out)
    if HALF:
        return main_half(out)
    peak = os.environ.get("PEAK", "carry/gemm-shapes/peak")
    shapes = os.environ.get("SHAPES", "8192x3072x768 8192x768x3072 8192x2304x768").split()
    budget, samples = os.environ.get("BUDGET", "48"), os.environ.get("SANITIZE_SAMPLES", "2")
    reps, timeout = int(os.environ.get("REPS", "20")), int(os.environ.get("REPLAY_TIMEOUT", "420"))
    step_time = os.environ.get("STEP_TIME", "15")
    pin = os.environ.get("PIN", "1") == "1"
    retune_budget, retune_time = os.environ.get("RETUNE_BUDGET", "128"), os.environ.get("RETUNE_TIME", "150")
    rows, device = [], None
    wf = os.environ.get("WF", os.path.join(out, "wf"))
    m0, n0, k0 = (int(x) for x in shapes[0].split("x"))
    started = time.time()
    # The line is replayed once, at the first shape: every step validated (the manifest's
    # [validation.inputs]), sanitized at SANITIZE_AT (small: sanitized runs are 10-1000x
    # slower than the 8192-row GEMM's own) and tuned at the shape. PIN=1 pins the design
    # configuration through the replay (each step then compiles, validates and times one
    # configuration: seconds, not the ~30 s sixteen sampled compilations cost); the search
    # happens once, at the tip, per shape.
    sanitize_at = [a for size in os.environ.get("SANITIZE_AT", "M=256 N=256 K=128").split() for a in ("--sanitize-at", size)]
    pins = [a for name, value in DESIGN.items() for a in ("--set", f"{name}={value}")] if pin else []
    sizes0 = ["--set", f"M={m0}", "--set", f"N={n0}", "--set", f"K={k0}"]
    cmd = replay_command(peak, wf, sizes0, budget, step_time, "4" if pin else "16", samples, sanitize_at, pins)
    resume = os.environ.get("RESUME_FROM")
    # A workflow replayed by an earlier call into WF (one device call holds ~600 s; its
    # tip retuned since, so it is no longer the start of a replay): its tip is retuned at
    # the remaining shapes, with or without RESUME_FROM.
    reused = os.path.exists(os.path.join(wf, "context"))
    if resume and not reused:
        # As on the 16-bit path: the earlier replay's steps are kept, only the steps the
        # recorded line (its BRANCH) has added since are replayed, at the first shape.
        resume_from(resume, wf)
    if reused:
        replay = {"rc": 0, "log": "replayed by an earlier call into " + wf,
                  "seconds": round(time.time() - started, 1), "command": " ".join(cmd[1:])}
    else:
        replay = replay_at(cmd, timeout, os.path.join(out, "replay.log"))
    replay["pinned"] = DESIGN if pin else None
    log = sh([peak, "log", "-w", wf, "--json"])
    entries = json.loads(log.stdout) if log.stdout.strip() else []
    stream_k_validation = None
    if replay["rc"] == 0 and not reused and any(e["transformation"] == "Stream-K" for e in entries):
        # The replay validates 4 samples, some at STREAM_K = 0: the tip is validated again
        # with the share-out on (STREAM_K 1 and 2), at shapes of a few tiles, fewer than a
        # wave, so that every tile's k-steps are split among several blocks (tiles, parts and
        # finishers at C's edges), under the three sanitizers.
        stream_k_validation = validate_again(peak, wf, STREAM_K_VALIDATION, timeout, 2)
    for shape in shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        inputs = {"M": m, "N": n, "K": k}
        sizes = ["--set", f"M={m}", "--set", f"N={n}", "--set", f"K={k}"]
        row = {"dtype": "f32", "m": m, "n": n, "k": k, "layout": "NT", "epilogue": "bias", "replay": replay,
               "commit": os.environ.get("PEAK_COMMIT", "unknown"),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "line": [e["transformation"] for e in reversed(entries)],
               "steps": [{"transformation": e["transformation"], "verdict": e["verdict"], "best_time_ms": e.get("best_time_ms")} for e in reversed(entries)]}
        if stream_k_validation is not None:
            row["stream_k_validation"] = stream_k_validation
        if replay["rc"] == 0 and int(retune_budget) > 0:
            # Tuning per shape: the tip retuned at this shape, from the configurations
            # ranked at the shape before (retune starts from the checkpoint's top-K).
            space = neighbourhood(m, n, k)
            narrowed = [a for name, values in space.items() for a in ("--set", f"{name}={values}")]
            started = time.time()
            try:
                r = sh([peak, "retune", "-w", wf, "--budget", retune_budget, "--time", retune_time, "--no-sanitize-winner", *sizes, *narrowed], timeout=timeout)
                row["retune"] = {"rc": r.returncode, "log": r.stderr[-1500:], "seconds": round(time.time() - started, 1), "space": space}
            except subprocess.TimeoutExpired:
                row["retune"] = {"rc": "timeout", "seconds": round(time.time() - started, 1), "space": space}
        best = tip_to_time(peak, wf, entries, replay)
        if best:
            tuned = baseline(peak, os.path.join(wf, "context"), inputs, best, reps)
            row.update({k2: tuned.get(k2) for k2 in ("peak_ms", "cublaslt_ms", "pct", "matches_cublaslt")})
            row["tuned"] = tuned
            device = device or tuned.get("device")
        if best:
            design = baseline(peak, os.path.join(wf, "context"), inputs, DESIGN, reps)
            row["design_configuration"] = design
            device = device or design.get("device")
        if entries and resume and not reused and not any(r.get("bundle") for r in rows):
            # The resumed workflow with its new steps, one file to bring back and keep (also
            # after a failed replay: the steps it did reproduce, to see where it stopped).
            row["bundle"] = pack(peak, wf, out, shapes[0])
        print(json.dumps({k2: row.get(k2) for k2 in ("m", "n", "k", "peak_ms", "cublaslt_ms", "pct")}), flush=True)
        rows.append(row)
        merge(rows, device, f32_command(shapes, pin, budget, step_time, retune_budget, retune_time, reps), out)


def f32_command(shapes, pin, budget, step_time, retune_budget, retune_time, reps):
    return f"{'BRANCH=' + BRANCH + ' ' if BRANCH else ''}bash bench/h200-gemm-shapes.sh run (SHAPES={' '.join(shapes)} PIN={int(pin)} BUDGET={budget} STEP_TIME={step_time} RETUNE_BUDGET={retune_budget} RETUNE_TIME={retune_time} REPS={reps}): peak replay {os.path.relpath(BUNDLE, ROOT)} --into WF at the first shape (each row's replay.command); per shape peak retune -w WF --set M= --set N= --set K= (the row's retune.space); peak baseline WF/context --against cublaslt --reps {reps} --set <inputs and the tip's best configuration at that shape>"


if __name__ == "__main__":
    main(sys.argv[1])
