# Hand experiment (bench/results/h200-compare-interior-loop-hand.json, "tuned"): the interior-loop
# copy (bench/hand/interior-loop.py) tuned at 4096^3 and 8192 x 3072 x 768 over the tiles around
# both configurations, its best timed against cuBLASLt. Carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
SP="--set BLOCK_X=8,16 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=2,4 --set CHUNK_Y=4 --set NUM_STAGES=2,4 --set OFFSET=1,8 --set TILE_K=8,16 --set VEC=4 --set GROUP_M=1,8 --set K_SPLITS=1 --set MIN_BLOCKS=1,2"
for s in 4096x4096x4096 8192x3072x768; do IFS=x read -r m n k <<< "$s"
 timeout 100 $P tune $D/inl --strategy auto --budget 200 --time 70 --set M=$m --set N=$n --set K=$k $SP --top-out $OUT/top-$s.json --json > /dev/null 2> $OUT/tune-$s.log; echo tune $s rc=$?
 cfg=$(best_config $OUT/top-$s.json) || continue
 time_case 0 $s inl "$cfg" inl-tuned | tee -a $OUT/tuned.jsonl
done
