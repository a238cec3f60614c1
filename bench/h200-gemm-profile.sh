#!/usr/bin/env bash
# Nsight Compute on a GEMM tip and on cuBLASLt doing the same work, in one process: what a
# "% of cuBLASLt" row leaves unexplained (issue 25: "where a target is missed, say what the
# profile shows"). Runs `peak baseline --against cublaslt` once under ncu per shape and
# profiles one launch of peak's kernel (KERNEL, the manifest's kernel name) and one of each
# cuBLASLt kernel (VENDOR: nvjet / sm90 / xmma / cutlass names), clocks not locked, with the
# sections that say where the time goes: speed of light, launch, occupancy, warp stalls,
# compute pipes, memory.
#
# There (the GPU machine; a replayed workflow folder or bundle and a carried peak):
#   OUT=o WF=path/to/workflow-or.bundle SHAPES="8192x3072x768" PARAMS="BLOCK_X=128 ..." \
#     bash bench/h200-gemm-profile.sh
# SHAPES ending in :vendor profile only cuBLASLt's kernel at that shape (its name and limits);
# a shape NAME=VALUE sets that one input (a square context: SHAPES=n=4096 KERNEL=matmul).
# Writes OUT/profile-<shape>.txt, OUT/profile-<shape>-vendor.txt, each side's source page
# (OUT/profile-<shape>[-vendor]-sass.csv: per SASS line, instructions executed and where warps
# stalled, from a second ncu run of one launch) and OUT/h200-gemm-profile.json
# (bench/ncu_summary.py: the numbers per launch and the source pages' summaries; copy it to
# bench/results/).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT}"; WF="${WF:?set WF to a workflow folder or bundle}"
PEAK="${PEAK:-carry/gemm-shapes/peak}"
KERNEL="${KERNEL:-gemm_nt_bias}"
VENDOR="${VENDOR:-nvjet|sm90_|sm80_|xmma|cutlass|gemm.*Kernel}"
SECTIONS=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats
  --section SourceCounters --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio")
# SourceCounters: the SASS lines where warps stall most; the stall metrics: every reason's
# cycles per issued instruction (ncu_summary keeps them all as `stalls`, not only the largest).
mkdir -p "$OUT"
if [ -f "$WF" ]; then
  git clone -q "$WF" "$OUT/wf" && WF="$OUT/wf"
fi
for spec in ${SHAPES:?set SHAPES}; do
  shape="${spec%%:*}"
  if [[ "$shape" == *=* ]]; then
    # NAME=VALUE: a context sized by one input (the square case study's n=4096).
    sets=(--set "$shape")
  else
    IFS=x read -r m n k <<< "$shape"
    sets=(--set "M=$m" --set "N=$n" --set "K=$k")
  fi
  for p in ${PARAMS:-}; do sets+=(--set "$p"); done
  run_ncu() { # $1: kernel regex, $2: file
    ncu --clock-control none -k "regex:$1" --launch-skip 1 --launch-count "${3:-1}" "${SECTIONS[@]}" \
      "$PEAK" baseline "$WF/context" --against cublaslt --reps 3 "${sets[@]}" > "$2" 2>&1
    echo "$shape: $(grep -c 'Section:' "$2") sections in $(basename "$2")"
    # The source page of one launch: a report, then its SASS view as CSV.
    local report="${2%.txt}"
    ncu --clock-control none -k "regex:$1" --launch-skip 1 --launch-count 1 --section SourceCounters -o "$report" -f \
      "$PEAK" baseline "$WF/context" --against cublaslt --reps 3 "${sets[@]}" > "$report-ncu.log" 2>&1
    ncu -i "$report.ncu-rep" --page source --csv --print-source sass > "$report-sass.csv" 2>> "$report-ncu.log" \
      || echo "$shape: no source page for $(basename "$2") (see $(basename "$report")-ncu.log)"
  }
  [ "$spec" = "$shape" ] && run_ncu "$KERNEL" "$OUT/profile-$shape.txt"
  run_ncu "$VENDOR" "$OUT/profile-$shape-vendor.txt" 2
done
source bench/stamp.sh
stamp "$(dirname "$PEAK")/commit"
python3 bench/ncu_summary.py "$OUT/h200-gemm-profile.json" \
  "OUT=... WF=... SHAPES=\"${SHAPES}\" PARAMS=\"${PARAMS:-}\" bash bench/h200-gemm-profile.sh" "$COMMIT" "$DEVICE" "$DATE" "$OUT"/profile-*.txt $(ls "$OUT"/profile-*-sass.csv 2>/dev/null)
