# Hand experiment (bench/results/h200-compare-epilogue-vector-hand.json): the fp32 NT Interior-Loop
# tip against a copy whose epilogue reads bias once per column and stores interior blocks as
# vectors without tests (bench/hand/epilogue-vector.py), validated at shapes that do not divide
# (and with N a multiple of 2 and 4), then both timed against cuBLASLt, alternately, at each
# shape's tuned configuration. bash bench/hand/prepare.sh here; carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
timeout 120 $P validate $D/ev --against examples/gemm-nt-bias-cuda --set M=61,130,256 --set N=47,200,256 --set K=33,72,128 --set K_SPLITS=1,2 --set CHUNK_X=2,4 --samples 12 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
python3 -c "
import json;d=json.load(open('$OUT/validate.json'));import collections;print(collections.Counter(s['verdict']['category'] for s in d['samples']), d['sanitizer']['summary'])"
TALL="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=2 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1 NUM_STAGES=4 OFFSET=1 TILE_K=8 TRD_X=8 TRD_Y=16 VEC=4"
SQ88="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=2 CHUNK_Y=4 GROUP_M=8 K_SPLITS=1 MIN_BLOCKS=2 NUM_STAGES=2 OFFSET=1 TILE_K=16 TRD_X=8 TRD_Y=8 VEC=4"
SQ88_1="${SQ88/MIN_BLOCKS=2/MIN_BLOCKS=1}"
for r in 0 1; do
  for c in il ev; do
    time_case $r 8192x3072x768 $c "$TALL" | tee -a $OUT/rows.jsonl
    [ $r = 0 ] && time_case $r 4096x4096x4096 $c "$TALL" | tee -a $OUT/rows.jsonl
    for s in 8192x2304x768 8192x768x3072; do
      time_case $r $s $c "$SQ88" | tee -a $OUT/rows.jsonl
      time_case $r $s $c "$SQ88_1" | tee -a $OUT/rows.jsonl
    done
  done
done
