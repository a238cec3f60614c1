#!/usr/bin/env bash
# Tuning on every GPU of one host (issue 12, part 2: at least 1.8x the configurations per
# second on 2 GPUs over 1, and a saturation curve), in one device run:
#
#  for d = 1, 2, 4, ... up to the GPUs nvidia-smi -L lists (and that count itself):
#    peak tune examples/sgemm-cuda-regtiled $SPACE --strategy exhaustive --devices 0,..,d-1
#      --time $TIME_CAP --cache-dir <fresh> --top 100000 --json
#  timed as a whole command, from a cold results cache and reference store each time, then
#  $OUT/h200-scaling.json: one row per d (wall time, configurations/s, speedup over d = 1,
#  devices_served, worker restarts, the best configuration, peak's time_breakdown), whether
#  every d found the same best (same_best), and target_met (speedup at d = 2 >= 1.8).
#  Each run's own JSON is kept beside it as $OUT/h200-scaling.d<d>.peak.json.
#
# The space (SPACE: 119 configurations) is the register-tiled SGEMM example at n = 8192,
# with TX, TY in {4, 8} and BY >= 8, where each configuration's work on its GPU (9 runs of a 41-340 ms kernel and
# the 256 MiB output read back: about 0.7 s, from bench/recordings/sgemm.jsonl's n = 2048
# times scaled by 64) outweighs its compile and output comparison on the CPU (about 0.55
# CPU-s, spread over every core): the n = 2048 space is compile-bound and would not scale.
# Estimated ~80 s at d = 1, ~40 s at d = 2, ~20 s at d = 4 (plus a few seconds each to
# start workers and record the reference): the whole curve in one 10-minute device call.
#
# Here (a CPU machine with Rust):   bash bench/h200-scaling.sh build
#   builds peak (release), strips it to carry/scaling/peak and writes carry/scaling/commit.
# There (an nvidia-h200-x2 or -x4 machine, from the repository root, carrying carry/scaling):
#   OUT=dir bash bench/h200-scaling.sh run
#
# Environment (all optional): OUT=bench/results, PEAK=carry/scaling/peak,
# CONTEXT=examples/sgemm-cuda-regtiled, SPACE="--set n=8192 --set BY=8,16,32 --set TX=4,8
# --set TY=4,8", COUNTS="1 2" (the device counts to run, instead of
# 1, 2, 4, ... up to every GPU), TIME_CAP=240 (passed as --time: no run proposes new
# configurations after it; a row that hit it says "stopped": "time"), RUN_TIMEOUT=300
# (seconds before one `peak tune` is killed; its row then has its exit status).
set -euo pipefail
cd "$(dirname "$0")/.."

# The GPU machines require NVLink multicast off; peak uses none of these, but keep them set.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

say() { echo "h200-scaling: $*" >&2; }

build() {
  source bench/carry.sh
  carry_peak carry/scaling
  du -sh carry/scaling
  say "carry: carry/scaling"
}

run() {
  OUT="${OUT:-bench/results}"
  PEAK="${PEAK:-carry/scaling/peak}"
  CONTEXT="${CONTEXT:-examples/sgemm-cuda-regtiled}"
  SPACE="${SPACE:---set n=8192 --set BY=8,16,32 --set TX=4,8 --set TY=4,8}"
  TIME_CAP="${TIME_CAP:-240}"
  RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
  mkdir -p "$OUT"
  [ -x "$PEAK" ] || { say "no $PEAK: run \`bash bench/h200-scaling.sh build\` first"; exit 1; }
  # The device's copy of the tree has no usable git history: name the build's commit.
  source bench/stamp.sh
  stamp carry/scaling/commit
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
  [ "${gpus:-0}" -ge 1 ] || { say "nvidia-smi lists no GPU"; exit 1; }
  local counts=()
  if [ -n "${COUNTS:-}" ]; then
    read -r -a counts <<< "$COUNTS"
  else
    local d=1
    while [ "$d" -le "$gpus" ]; do counts+=("$d"); d=$((d * 2)); done
    [ "${counts[-1]}" -eq "$gpus" ] || counts+=("$gpus")
  fi
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  now() { date +%s.%N; }
  nvidia-smi -L > "$WORK/gpus.txt" 2>&1 || true
  nvidia-smi topo -m > "$WORK/topo.txt" 2>&1 || true
  nproc > "$WORK/cores.txt"
  say "$gpus GPUs, $(cat "$WORK/cores.txt") cores; device counts: ${counts[*]}"

  local d list t0 t1 rc done_counts=()
  for d in "${counts[@]}"; do
    list="$(seq -s, 0 $((d - 1)))"
    say "d = $d: peak tune $CONTEXT $SPACE --strategy exhaustive --devices $list (cold cache)"
    t0=$(now)
    rc=0
    # shellcheck disable=SC2086
    timeout -k 15 "$RUN_TIMEOUT" "$PEAK" tune "$CONTEXT" $SPACE --strategy exhaustive --devices "$list" --time "$TIME_CAP" \
      --top 100000 --cache-dir "$WORK/cache-$d" --json > "$WORK/tune-$d.json" 2> "$WORK/tune-$d.log" || rc=$?
    t1=$(now)
    echo "$rc $t0 $t1 $list" > "$WORK/tune-$d.meta"
    if [ "$rc" -ne 0 ]; then
      say "d = $d: exit status $rc; the last lines it wrote:"
      tail -n 20 "$WORK/tune-$d.log" >&2 || true
    else
      cp "$WORK/tune-$d.json" "$OUT/h200-scaling.d$d.peak.json"
    fi
    done_counts+=("$d")
    # Written after every run, so a device call cut short keeps the rows it finished.
    assemble "${done_counts[@]}"
  done
  say "done: $OUT/h200-scaling.json"
}

# $OUT/h200-scaling.json from the runs in $WORK for the device counts given.
assemble() {
  python3 - "$WORK" "$OUT/h200-scaling.json" "$COMMIT" "$DEVICE" "$DATE" "$CONTEXT" "$SPACE" "$gpus" "$TIME_CAP" "$@" <<'PY'
import json, sys, tomllib
work, out, commit, device, date, context, restriction, gpus, time_cap = sys.argv[1:10]
counts = [int(c) for c in sys.argv[10:]]
manifest = tomllib.load(open(f"{context}/peak.toml", "rb"))
# The manifest's values, with the restriction's `--set NAME=V,...` in their place.
restricted = dict(item.split("=", 1) for item in restriction.split() if "=" in item)
values = lambda table: {k: [int(v) for v in restricted[k].split(",")] if k in restricted else spec.get("values") for k, spec in table.items()}
read = lambda name: open(f"{work}/{name}").read().strip()
# The run thread's stages (each device's one thread that drives its GPU), summed over devices.
RUN_STAGES = ("plan_s", "inputs_s", "check_run_s", "read_back_s", "timing_s", "release_s")

rows, tunes = [], {}
for d in counts:
    rc, t0, t1, devices = read(f"tune-{d}.meta").split()
    wall = float(t1) - float(t0)
    row = {"devices": d, "device_list": devices, "exit_status": int(rc), "wall_s": wall}
    try:
        tune = json.load(open(f"{work}/tune-{d}.json"))
    except (OSError, ValueError) as e:
        row["error"] = f"no tuning report: {e}"
        row["log_tail"] = read(f"tune-{d}.log").splitlines()[-20:]
        rows.append(row)
        continue
    tunes[d] = tune
    run = tune["runs"][0]
    best = run.get("best") or {}
    breakdown = run.get("time_breakdown") or {}
    run_thread_s = sum(breakdown.get(k) or 0.0 for k in RUN_STAGES)
    row.update({
        "space": run["space"],
        "evaluations": run["evaluations"],
        "measured": run["measured"],
        "failures": run["failures"],
        "stopped": run.get("stopped"),
        "configs_per_s": run["evaluations"] / wall,
        "tuning_loop_s": run.get("elapsed_s"),
        "tuning_loop_configs_per_s": run.get("evaluations_per_s"),
        # As reported: peak names it only for a run spread over several devices (not at d = 1).
        "devices_served": tune.get("devices_served"),
        "worker_restarts": tune.get("worker_restarts"),
        "best": {"tuning": best.get("tuning"), "median_ms": best.get("median_ms"), "min_ms": best.get("min_ms")},
        "run_thread_s": run_thread_s,
        "run_thread_utilisation": run_thread_s / (d * run["elapsed_s"]) if run.get("elapsed_s") else None,
        "time_breakdown": breakdown,
    })
    rows.append(row)

base = next((r for r in rows if r["devices"] == 1 and "configs_per_s" in r), None)
for r in rows:
    if base and "configs_per_s" in r:
        r["speedup_vs_1"] = r["configs_per_s"] / base["configs_per_s"]
        r["efficiency"] = r["speedup_vs_1"] / r["devices"]
        if r.get("tuning_loop_configs_per_s") and base.get("tuning_loop_configs_per_s"):
            r["tuning_loop_speedup_vs_1"] = r["tuning_loop_configs_per_s"] / base["tuning_loop_configs_per_s"]
    else:
        r["speedup_vs_1"] = None

# The same space measured exhaustively: every d should find the same best. Where one does
# not, say how far its best was behind d = 1's best in d = 1's own measurements.
bests = [json.dumps(r["best"]["tuning"], sort_keys=True) for r in rows if "best" in r]
same_best = len(set(bests)) == 1 if len(bests) >= 2 else None
if not same_best and 1 in tunes:
    top1 = {json.dumps(t["tuning"], sort_keys=True): t["median_ms"] for t in tunes[1]["runs"][0].get("top", [])}
    best1 = (tunes[1]["runs"][0].get("best") or {}).get("median_ms")
    for r in rows:
        key = json.dumps((r.get("best") or {}).get("tuning"), sort_keys=True)
        if best1 and key in top1:
            r["best_as_measured_at_1_vs_best_at_1"] = top1[key] / best1

two = next((r for r in rows if r["devices"] == 2), None)
gpu_names = [l.split(":", 1)[1].split("(UUID")[0].strip() for l in read("gpus.txt").splitlines() if l.startswith("GPU ")]
report = {
    "benchmark": "multi-gpu-scaling",
    "command": "bash bench/h200-scaling.sh run",
    "device": {"name_and_driver": device, "gpus": int(gpus), "names": gpu_names, "cpu_cores": int(read("cores.txt")), "topology": read("topo.txt")},
    "commit": commit,
    "date": date,
    "space": {
        "context": context,
        "restriction": restriction,
        "inputs": values(manifest.get("inputs", {})),
        "parameters": values(manifest["tuning"]),
        "constraints": manifest.get("constraints", {}).get("tuning", []),
        "size": next((r["space"] for r in rows if "space" in r), None),
        "why": "measuring-bound: the register-tiled SGEMM at n = 8192 (each kernel 64x the n = 2048 work), "
               "restricted to TX, TY in {4, 8} and BY >= 8, so the timed runs on each GPU outweigh the "
               "NVRTC compile and output comparison that all devices share the CPU for",
    },
    "per_run": f"peak tune {context} {restriction} --strategy exhaustive --devices 0,..,d-1 --time {time_cap} --top 100000 "
               "--cache-dir <fresh> --json, timed as a whole command (worker starts and the reference recording "
               "included); per configuration: NVRTC compile on every core, one run checked against the reference, "
               "1 warm-up, 7 timed runs (1 when slower than 3x the best so far), 2 input sets rotated. "
               "d devices start d + 1 workers (one more records references). configs_per_s = evaluations / wall_s; "
               "tuning_loop_* is peak's own elapsed_s and evaluations_per_s (from the first proposal on, so without "
               "the worker starts and the reference). devices_served is as peak reports it: per device for d >= 2, "
               "absent (null) at d = 1. run_thread_s: the plan, inputs, check run, read-back, timing and release "
               "stages summed over devices; run_thread_utilisation = run_thread_s / (d * tuning_loop_s).",
    "rows": rows,
    "same_best": same_best,
    "rows_failed": [r["devices"] for r in rows if "best" not in r],
    "target": "speedup_vs_1 >= 1.8 at 2 devices (configurations/s of the whole command)",
    "target_met": bool(two and (two.get("speedup_vs_1") or 0) >= 1.8),
    "nccl_nvls_enable": "0 (NVLink multicast off; peak uses none of NCCL)",
}
json.dump(report, open(out, "w"), indent=2)
for r in rows:
    if "configs_per_s" in r:
        print(f"d = {r['devices']}: {r['evaluations']} configurations in {r['wall_s']:.1f} s = {r['configs_per_s']:.2f}/s, "
              f"speedup {r['speedup_vs_1'] or 0:.2f}x, served {r['devices_served']}, restarts {r['worker_restarts']}, "
              f"best {r['best']['tuning']} {r['best']['median_ms']} ms", file=sys.stderr)
    else:
        print(f"d = {r['devices']}: failed (exit status {r['exit_status']})", file=sys.stderr)
print(f"same_best {same_best}, target_met {report['target_met']}", file=sys.stderr)
PY
}

case "${1:-run}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 [build|run]" >&2; exit 2 ;;
esac
