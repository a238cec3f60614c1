#!/usr/bin/env bash
# Fault handling on the H200, as commands a person can re-run (issue 3 item 4, issue 4):
#  - an illegal-address kernel among tuning variants: reported `crashed`, the worker
#    restarts, the correct variant is still measured;
#  - compute-sanitizer findings: a shared-memory race (racecheck) and an out-of-bounds
#    write (memcheck), with outputs that still match.
# Usage (repo root, GPU machine): PEAK=carry/peak OUT=bench/results bash bench/h200-faults.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PEAK="${PEAK:-carry/peak}"; OUT="${OUT:-bench/results}"; mkdir -p "$OUT"
F=bench/h200-faults
"$PEAK" tune $F/fault --strategy exhaustive --cache-dir "$(mktemp -d)" --json > "$OUT/h200-fault-tune.json"; echo "tune rc=$?"
"$PEAK" validate $F/race --against $F/good --samples 2 --sanitize racecheck --json > "$OUT/h200-sanitize-race.json"; echo "race rc=$?"
"$PEAK" validate $F/oob --against $F/good --samples 2 --sanitize memcheck --json > "$OUT/h200-sanitize-oob.json"; echo "oob rc=$?"
