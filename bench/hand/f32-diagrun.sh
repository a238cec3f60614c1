# Hand experiment (bench/results/h200-compare-f32-nt-diagnosis-hand.json); bash bench/hand/prepare.sh here, carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
for r in 0 1; do for c in "joint:$JCFG" "d-rowstore:$JCFG" "d-rowload:$JCFG" "joint:$NNCFG" "d-rowstore:$NNCFG" "d-rowload:$NNCFG"; do
  time_case $r 4096x4096x4096 "${c%%:*}" "${c#*:}"
done; done
