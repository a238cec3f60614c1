# Hand experiment (bench/results/h200-compare-f32-nt-diagnosis-hand.json); bash bench/hand/prepare.sh here, carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
timeout 100 $P validate $D/first --against examples/gemm-nt-bias-cuda --set M=61,130 --set N=47,200 --set K=33,72 --samples 10 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
for r in 0 1 2; do for s in 4096x4096x4096 8192x3072x768; do
 for c in "joint:$JCFG" "first:$JCFG" "joint:$NNCFG" "first:$NNCFG"; do
  time_case $r $s "${c%%:*}" "${c#*:}" | tee -a $OUT/rows-$(basename $0 .sh).jsonl
 done; done; done
SP="--set BLOCK_X=8,16 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=2,4 --set CHUNK_Y=4 --set NUM_STAGES=2,4 --set OFFSET=1,8 --set TILE_K=8,16 --set VEC=4 --set GROUP_M=1,8 --set K_SPLITS=1 --set MIN_BLOCKS=1,2"
for s in 4096x4096x4096 8192x3072x768; do IFS=x read -r m n k <<< "$s"
 timeout 170 $P tune $D/first --strategy auto --budget 300 --time 150 --set M=$m --set N=$n --set K=$k $SP --top-out $OUT/top-$s.json --json > $OUT/tune-$s.out 2> $OUT/tune-$s.log; echo tune $s rc=$?
done
for s in 4096x4096x4096 8192x3072x768; do
 cfg=$(best_config $OUT/top-$s.json) || continue
 for r in 0 1; do time_case $r $s first "$cfg" first-tuned | tee -a $OUT/rows-$(basename $0 .sh).jsonl; done
done
