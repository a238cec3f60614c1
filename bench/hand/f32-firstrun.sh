# Hand experiment (bench/results/h200-compare-f32-nt-diagnosis-hand.json); bash bench/hand/prepare.sh here, carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
P=carry/gemm-shapes/peak; D=carry/exp/f32; export PATH=/usr/local/cuda/bin:$PATH
NNCFG="BLOCK_X=16 BLOCK_Y=16 TRD_X=16 TRD_Y=8 CHUNK_X=2 CHUNK_Y=4 NUM_STAGES=4 OFFSET=8 TILE_K=8 VEC=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1"
JCFG="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=2 NUM_STAGES=2 OFFSET=1 TILE_K=16 TRD_X=8 TRD_Y=8 VEC=4"
sets() { for a in $1; do printf -- "--set %s " "$a"; done; }
timeout 100 $P validate $D/first --against examples/gemm-nt-bias-cuda --set M=61,130 --set N=47,200 --set K=33,72 --samples 10 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
for r in 0 1 2; do for s in "4096 4096 4096" "8192 3072 768"; do set -- $s
 for c in "joint:$JCFG" "first:$JCFG" "joint:$NNCFG" "first:$NNCFG"; do ctx=${c%%:*}; cfg=${c#*:}
  $P baseline $D/$ctx --against cublaslt --reps 30 --json --set M=$1 --set N=$2 --set K=$3 $(sets "$cfg") > /tmp/b.json 2>&1
  python3 -c "
import json;d=json.load(open('/tmp/b.json'));print(json.dumps({'round':$r,'shape':'$1x$2x$3','ctx':'$ctx','cfg':'$cfg','peak_ms':d['kernel_timing']['median_ms'],'cublaslt_ms':d['cublas_timing']['median_ms'],'pct':d['percent_of_cublas'],'matches':d['validation']['passed']}))" | tee -a $OUT/rows-$(basename $0 .sh).jsonl
 done; done; done
SP="--set BLOCK_X=8,16 --set BLOCK_Y=8,16 --set TRD_X=8,16 --set TRD_Y=8,16 --set CHUNK_X=2,4 --set CHUNK_Y=4 --set NUM_STAGES=2,4 --set OFFSET=1,8 --set TILE_K=8,16 --set VEC=4 --set GROUP_M=1,8 --set K_SPLITS=1 --set MIN_BLOCKS=1,2"
for s in 4096x4096x4096 8192x3072x768; do IFS=x read -r m n k <<< "$s"
 timeout 170 $P tune $D/first --strategy auto --budget 300 --time 150 --set M=$m --set N=$n --set K=$k $SP --top-out $OUT/top-$s.json --json > $OUT/tune-$s.out 2> $OUT/tune-$s.log; echo tune $s rc=$?
done
for s in 4096x4096x4096 8192x3072x768; do IFS=x read -r m n k <<< "$s"
 cfg=$(python3 -c "import json;e=json.load(open('$OUT/top-$s.json'))[0]['entries'][0]['tuning'];print(' '.join(f'{a}={b}' for a,b in e.items()))") || continue
 for r in 0 1; do $P baseline $D/first --against cublaslt --reps 30 --json --set M=$m --set N=$n --set K=$k $(sets "$cfg") > /tmp/b.json 2>&1
  python3 -c "
import json;d=json.load(open('/tmp/b.json'));print(json.dumps({'round':$r,'shape':'$s','ctx':'first-tuned','cfg':'$cfg','peak_ms':d['kernel_timing']['median_ms'],'cublaslt_ms':d['cublas_timing']['median_ms'],'pct':d['percent_of_cublas'],'matches':d['validation']['passed']}))" | tee -a $OUT/rows-$(basename $0 .sh).jsonl
 done; done
