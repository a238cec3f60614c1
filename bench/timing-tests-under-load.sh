#!/usr/bin/env bash
# The timing-dependent tests (issue 31), N times in a row under load: the kill -9 test of
# peak-workflow, the two compile-order tests of peak-eval's OpenCL binary and the SLURM
# kill test, while stress-ng keeps every CPU busy. Writes OUT (JSON): command, date,
# commit, each run's outcome, and the pass count per test.
#
#   bash bench/timing-tests-under-load.sh [N=10] [OUT=bench/results/timing-tests-under-load.json]
#
# Needs stress-ng (apt-get install stress-ng), PoCL, and root with slurm-wlm for the SLURM
# test (it skips otherwise, and a skip is not counted as a pass). The test binaries and the
# peak binary are copied first and the copy of peak is bind-mounted over target/debug/peak
# in a private mount namespace (unshare -m), so a rebuild by someone else in the same
# checkout cannot pull the binary out from under a running test.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10}"
out="${2:-bench/results/timing-tests-under-load.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

binary() { # crate target -> path of the test executable
  cargo test -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except json.JSONDecodeError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"] and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$2"
}
cp "$(binary peak-workflow safety)" "$work/safety"
cp "$(binary peak-eval opencl)" "$work/opencl"
cp "$(binary peak-cli slurm)" "$work/slurm"
cargo build -p peak-cli
cp target/debug/peak "$work/peak"

cat > "$work/loop.sh" <<'LOOP'
set -u
work="$1"; n="$2"
stress-ng --cpu "$(nproc)" --timeout 7200s >/dev/null 2>&1 &
stress=$!
sleep 2
for i in $(seq 1 "$n"); do
  for t in "safety kill_9_mid_checkpoint_leaves_every_checkpoint_whole" \
           "opencl jobs_run_and_answer_in_the_order_their_compiles_end" \
           "opencl a_crash_that_runs_before_an_earlier_job_is_blamed_on_its_own_job" \
           "slurm workers_started_through_srun_tune_survive_a_lost_worker_and_spread_over_devices"; do
    set -- $t
    start=$(date +%s.%N)
    "$work/$1" --exact "$2" --nocapture --test-threads 1 >"$work/log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    outcome=passed
    if [ $rc -ne 0 ]; then outcome=failed
    elif grep -q SKIPPED "$work/log"; then outcome=skipped
    elif ! grep -q " 1 passed" "$work/log"; then outcome=nothing-ran; fi
    [ "$outcome" = passed ] || tail -c 3000 "$work/log" >&2
    python3 -c 'import json, sys; print(json.dumps({"iteration": int(sys.argv[1]), "test": sys.argv[2], "outcome": sys.argv[3], "seconds": round(float(sys.argv[4]), 1), "loadavg1": float(sys.argv[5])}))' \
      "$i" "$1/$2" "$outcome" "$(echo "$end - $start" | bc)" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$work/runs.jsonl"
  done
done
kill "$stress"; wait "$stress" 2>/dev/null || true
LOOP
unshare -m bash -c 'mount --bind "$1/peak" "$PWD/target/debug/peak" && bash "$1/loop.sh" "$1" "$2"' _ "$work" "$n"

python3 - "$work/runs.jsonl" "$out" "$n" <<'PY'
import collections, datetime, json, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
passed = collections.Counter(r["test"] for r in runs if r["outcome"] == "passed")
tests = list(dict.fromkeys(r["test"] for r in runs))
result = {
    "benchmark": "timing-tests-under-load",
    "command": f"bash bench/timing-tests-under-load.sh {sys.argv[3]}",
    "load": "stress-ng --cpu $(nproc) for the whole loop, on top of whatever else ran",
    "machine": f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} CPUs",
    "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "iterations": int(sys.argv[3]),
    "passed": {t: f"{passed[t]}/{sum(1 for r in runs if r['test'] == t)}" for t in tests},
    "all_passed": all(r["outcome"] == "passed" for r in runs),
    "runs": runs,
}
with open(sys.argv[2], "w") as f:
    json.dump(result, f, indent=1)
print(json.dumps({k: result[k] for k in ("commit", "passed", "all_passed")}, indent=1))
PY
