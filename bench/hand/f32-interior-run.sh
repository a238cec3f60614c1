# Hand experiment (bench/results/h200-compare-interior-loop-hand.json): the fp32 NT joint-staging
# tip against a copy whose interior blocks run a k loop with no load test (bench/hand/interior-loop.py),
# validated at shapes that do not divide, then both timed at the tip's configuration and at the
# 16 x 8 tile of the square NN kernel, against cuBLASLt, alternately. bash bench/hand/prepare.sh
# here; carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
timeout 100 $P validate $D/inl --against examples/gemm-nt-bias-cuda --set M=61,130,256 --set N=47,200,256 --set K=33,72,128 --set K_SPLITS=1,2 --samples 12 --sanitize memcheck,racecheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log; echo validate rc=$?
python3 -c "
import json;d=json.load(open('$OUT/validate.json'));import collections;print(collections.Counter(s['verdict']['category'] for s in d['samples']), d['sanitizer']['summary'])"
for r in 0 1; do for s in 4096x4096x4096 8192x3072x768; do
 for c in "joint:$JCFG" "inl:$JCFG" "joint:$NNCFG" "inl:$NNCFG"; do
  time_case $r $s "${c%%:*}" "${c#*:}" | tee -a $OUT/rows.jsonl
 done; done; done
