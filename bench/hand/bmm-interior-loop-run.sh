# Why the batched in-place TN GEMM's Interior-Loop carry fails its replay on the H200 machine
# (bench/results/h200-gpu-tests.json at 9481947: wrong output, four runs of four) while
# `peak validate` of the recorded checkpoint at the same configuration passes there, on the
# same OpenCL device (peak takes the first GPU: the H200's NVIDIA OpenCL), and CI's PoCL passes
# the replay. Not a recorded step. Each line is one run and names the device the replay
# validated on:
#   the replay as the test pins it, its parent branch (joint-staging) as a control, the same
#   replay on the machine's PoCL (PEAK_OPENCL_DEVICE=0:0) and without K splits; then
#   `peak validate` of the recorded tip, which passed.
# There: OUT=dir bash bench/hand/bmm-interior-loop-run.sh (carry carry/gemm-shapes).
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
B=examples/workflows/bmm-tn-opencl-agent.bundle
SIZES="--set BATCH=3 --set M=50 --set N=41 --set K=35"
PINS="--set BLOCK_X=16 --set BLOCK_Y=1 --set TRD_X=2 --set TRD_Y=2 --set TILE_K=8 --set CHUNK_X=2 --set CHUNK_Y=2 --set VEC=4 --set GROUP_M=2 --set OFFSET=1 --set NUM_STAGES=2"
$P info > "$OUT/info.txt" 2>&1
replay() {  # replay LABEL BRANCH K_SPLITS [ENV=VALUE ...]: one line, rc, device and the first verdict
  local label=$1 branch=$2 splits=$3; shift 3
  rm -rf /tmp/bmm-rp
  env "$@" timeout 120 $P replay $B --into /tmp/bmm-rp --samples 2 --budget 2 $SIZES $PINS --set K_SPLITS=$splits --branch $branch > /tmp/bmm-rp.log 2>&1
  local rc=$? device
  # The device the replay validated its last reproduced step on (the wrong output names none).
  device=$(env "$@" $P show HEAD -w /tmp/bmm-rp --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['validation']['device'][:60])" 2>/dev/null)
  echo "$label rc=$rc [$device] $(grep -E 'wrong-output' /tmp/bmm-rp.log | head -1 | cut -c1-160)"
}
{
  replay "joint-staging (control)" joint-staging 2
  replay "interior-loop" interior-loop 2
  replay "interior-loop again" interior-loop 2
  replay "interior-loop K_SPLITS=1" interior-loop 1
  replay "interior-loop on PoCL" interior-loop 2 PEAK_OPENCL_DEVICE=0:0
  rm -rf /tmp/bmm-rec && git clone -q $B /tmp/bmm-rec && git -C /tmp/bmm-rec checkout -q origin/interior-loop 2>/dev/null
  echo "validate of the recorded tip: $(timeout 60 $P validate /tmp/bmm-rec/context --against examples/bmm-tn-opencl $SIZES $PINS --set K_SPLITS=2 2>&1 | grep -E '^(PASS|FAIL)' | cut -c1-160)"
} | tee "$OUT/bmm-interior-loop.txt"
# CONCURRENT=N: the same replay N times, four processes at a time, as the gated tests run
# (GPU_TESTS_JOBS=4): the standalone replays above all passed on the H200 (2026-11-29).
if [ -n "${CONCURRENT:-}" ]; then
  for i in $(seq 1 "$CONCURRENT"); do
    ( rm -rf /tmp/bmm-c$i; timeout 120 $P replay $B --into /tmp/bmm-c$i --samples 2 --budget 2 $SIZES $PINS --set K_SPLITS=2 --branch interior-loop > /tmp/bmm-c$i.log 2>&1
      echo "concurrent $i rc=$? $(grep -E 'wrong-output' /tmp/bmm-c$i.log | head -1 | cut -c1-160)" ) &
    [ $((i % 4)) -eq 0 ] && wait
  done
  wait
fi | tee -a "$OUT/bmm-interior-loop.txt"
