# The bmm-tn Interior-Loop replay with a cold results cache (the gated test's own PEAK_CACHE_DIR)
# against a warm one, on the H200 machine's NVIDIA OpenCL; a failed replay's candidate kept:
# its kernel diffed against the recorded tip and validated alone. Not a recorded step.
# There: OUT=dir bash bench/hand/bmm-cold-cache-run.sh (carry carry/gemm-shapes).
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
B=examples/workflows/bmm-tn-opencl-agent.bundle
SETS="--set BATCH=3 --set M=50 --set N=41 --set K=35 --set BLOCK_X=16 --set BLOCK_Y=1 --set TRD_X=2 --set TRD_Y=2 --set TILE_K=8 --set CHUNK_X=2 --set CHUNK_Y=2 --set VEC=4 --set GROUP_M=2 --set OFFSET=1 --set NUM_STAGES=2 --set K_SPLITS=2"
rm -rf /tmp/rec && git clone -q $B /tmp/rec && git -C /tmp/rec checkout -q origin/interior-loop
for run in cold1 warm cold2; do
  [ "${run#cold}" != "$run" ] && rm -rf /tmp/cache-$run
  rm -rf /tmp/wf-$run
  PEAK_CACHE_DIR=/tmp/cache-${run/warm/cold1} timeout 120 $P replay $B --into /tmp/wf-$run --samples 2 --budget 2 $SETS --branch interior-loop > "$OUT/replay-$run.log" 2>&1
  echo "$run rc=$? $(grep -o 'wrong-output.\{0,100\}' $OUT/replay-$run.log | head -1)"
  c=/tmp/wf-$run/.git/peak/apply/candidate
  if [ -d "$c" ]; then
    diff /tmp/rec/context/kernel.cl $c/kernel.cl > "$OUT/candidate-$run.diff"; echo "  candidate vs recorded kernel.cl: diff rc=$? ($(wc -l < $OUT/candidate-$run.diff) lines)"
    diff /tmp/rec/context/peak.toml $c/peak.toml > "$OUT/candidate-$run-toml.diff"; echo "  peak.toml diff lines: $(wc -l < $OUT/candidate-$run-toml.diff)"
    echo "  candidate validated alone: $(PEAK_CACHE_DIR=/tmp/cache-v timeout 60 $P validate $c --against examples/bmm-tn-opencl $SETS --samples 2 2>&1 | grep -E '^(PASS|FAIL)' | cut -c1-120)"
  fi
done 2>&1 | tee "$OUT/bmm-cold-cache.txt"
