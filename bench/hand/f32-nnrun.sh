# Hand experiment (bench/results/h200-compare-f32-nt-diagnosis-hand.json); bash bench/hand/prepare.sh here, carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
# The NN tip's configuration without MIN_BLOCKS, which the NN kernel does not have.
NN="$(sets "${NNCFG% MIN_BLOCKS=1}")"
for r in 0 1; do
 $P baseline $D/nn --against cublaslt --reps 30 --json --set n=4096 $NN > $OUT/nn-$r.json 2>&1
 $P baseline $D/joint --against cublaslt --reps 30 --json --set M=4096 --set N=4096 --set K=4096 $NN --set MIN_BLOCKS=1 > $OUT/nt-nncfg-$r.json 2>&1
 $P baseline $D/joint --against cublaslt --reps 30 --json --set M=8192 --set N=3072 --set K=768 $NN --set MIN_BLOCKS=1 > $OUT/nt3072-nncfg-$r.json 2>&1
done
for f in $OUT/*.json; do python3 -c "
import json,sys;d=json.load(open('$f'));print('$f', d['kernel_timing']['median_ms'], d['cublas_timing']['median_ms'], d['percent_of_cublas'])" 2>&1 | tail -1; done
SP="--set BLOCK_X=16 --set BLOCK_Y=16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=2,4 --set CHUNK_Y=2,4 --set NUM_STAGES=2,3,4 --set OFFSET=1,8 --set TILE_K=8,16 --set VEC=4 --set GROUP_M=1,8 --set K_SPLITS=1 --set MIN_BLOCKS=1"
for s in 4096x4096x4096 8192x3072x768; do IFS=x read -r m n k <<< "$s"
 timeout 200 $P tune $D/joint --strategy exhaustive --time 170 --set M=$m --set N=$n --set K=$k $SP --top-out $OUT/top-$s.json --json > $OUT/tune-$s.out 2> $OUT/tune-$s.log; echo tune $s rc=$?; tail -2 $OUT/tune-$s.log
done
