# Hand experiment (bench/results/h200-compare-interior-loop-hand.json): the fp32 NT joint-staging
# tip against a copy whose interior blocks run a k loop with no load test (bench/hand/interior-loop.py),
# validated at shapes that do not divide, then both timed at the tip's configuration and at the
# 16 x 8 tile of the square NN kernel, against cuBLASLt, alternately. bash bench/hand/prepare.sh
# here; carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
P=carry/gemm-shapes/peak; D=carry/exp/f32; export PATH=/usr/local/cuda/bin:$PATH
NNCFG="BLOCK_X=16 BLOCK_Y=16 TRD_X=16 TRD_Y=8 CHUNK_X=2 CHUNK_Y=4 NUM_STAGES=4 OFFSET=8 TILE_K=8 VEC=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1"
JCFG="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=2 NUM_STAGES=2 OFFSET=1 TILE_K=16 TRD_X=8 TRD_Y=8 VEC=4"
sets() { for a in $1; do printf -- "--set %s " "$a"; done; }
timeout 100 $P validate $D/inl --against examples/gemm-nt-bias-cuda --set M=61,130,256 --set N=47,200,256 --set K=33,72,128 --set K_SPLITS=1,2 --samples 12 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
python3 -c "
import json;d=json.load(open('$OUT/validate.json'));import collections;print(collections.Counter(s['verdict']['category'] for s in d['samples']), d['sanitizer']['summary'])"
for r in 0 1; do for s in "4096 4096 4096" "8192 3072 768"; do set -- $s
 for c in "joint:$JCFG" "inl:$JCFG" "joint:$NNCFG" "inl:$NNCFG"; do ctx=${c%%:*}; cfg=${c#*:}
  $P baseline $D/$ctx --against cublaslt --reps 30 --json --set M=$1 --set N=$2 --set K=$3 $(sets "$cfg") > /tmp/b.json 2>&1
  python3 -c "
import json;d=json.load(open('/tmp/b.json'));print(json.dumps({'round':$r,'shape':'$1x$2x$3','ctx':'$ctx','cfg':'$cfg','peak_ms':d['kernel_timing']['median_ms'],'cublaslt_ms':d['cublas_timing']['median_ms'],'pct':d['percent_of_cublas'],'matches':d['validation']['passed']}))" | tee -a $OUT/rows.jsonl
 done; done; done
