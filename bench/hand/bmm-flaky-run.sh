# Is the batched in-place TN GEMM's Interior-Loop tip flaky, or the replay? (not a recorded step)
# On 2026-11-29 the H200 machine's replay of branch interior-loop failed 1 of 5 sequential runs
# (on its PoCL) and 6 of 12 runs made four at a time, always wrong at [612] against the same
# expected value, while 15 validations here passed. Here: `peak validate` of the recorded tip
# and of its parent (joint-staging), N times each with fresh data seeds, on the NVIDIA OpenCL
# device and on PoCL, then the tip four at a time; the first failing log of each kept.
# There: OUT=dir bash bench/hand/bmm-flaky-run.sh (carry carry/gemm-shapes).
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"; N="${N:-10}"
B=examples/workflows/bmm-tn-opencl-agent.bundle
SETS="--set BATCH=3 --set M=50 --set N=41 --set K=35 --set BLOCK_X=16 --set BLOCK_Y=1 --set TRD_X=2 --set TRD_Y=2 --set TILE_K=8 --set CHUNK_X=2 --set CHUNK_Y=2 --set VEC=4 --set GROUP_M=2 --set OFFSET=1 --set NUM_STAGES=2 --set K_SPLITS=2"
for br in interior-loop joint-staging; do
  rm -rf /tmp/rec-$br && git clone -q $B /tmp/rec-$br && git -C /tmp/rec-$br checkout -q origin/$br
done
check() {  # check LABEL BRANCH SEED [ENV=VALUE ...]
  local label=$1 br=$2 seed=$3; shift 3
  env "$@" timeout 60 $P validate /tmp/rec-$br/context --against examples/bmm-tn-opencl $SETS --samples 2 --seed $seed > /tmp/v-$label-$seed.log 2>&1
  local rc=$?
  [ $rc -ne 0 ] && [ ! -e "$OUT/fail-$label.log" ] && cp /tmp/v-$label-$seed.log "$OUT/fail-$label.log"
  echo "$label seed=$seed rc=$rc"
}
{
  for s in $(seq 1 $N); do
    check tip-nvidia interior-loop $s; check parent-nvidia joint-staging $s
    check tip-pocl interior-loop $s PEAK_OPENCL_DEVICE=0:0; check parent-pocl joint-staging $s PEAK_OPENCL_DEVICE=0:0
  done
  for s in $(seq 1 12); do check tip-nvidia-x4 interior-loop $s & [ $((s % 4)) -eq 0 ] && wait; done; wait
  for s in $(seq 1 12); do check parent-nvidia-x4 joint-staging $s & [ $((s % 4)) -eq 0 ] && wait; done; wait
} > "$OUT/bmm-flaky.txt" 2>&1
awk '{split($1,a," "); n[$1]++; if ($3 != "rc=0") f[$1]++} END {for (k in n) print k, f[k]+0, "failed of", n[k]}' "$OUT/bmm-flaky.txt" | sort
