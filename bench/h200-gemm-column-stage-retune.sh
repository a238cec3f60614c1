#!/usr/bin/env bash
# After bench/h200-gemm-column-stage.sh (its 60-evaluation retunes): the rows it left short or below
# their earlier tips retuned with 200 evaluations over a wider space (WGMMA_N up to 256, three to five
# stages), resumed from the returned Column-Stage replays (nothing replayed again).
# There (carry carry/gemm-shapes): OUT=dir bash bench/h200-gemm-column-stage-retune.sh -> $OUT/retune.tgz
cd "$(dirname "$0")/.."
set -u
for spec in "bf16 8192x768x3072" "f16 4096x4096x4096"; do
  set -- $spec
  RESUME_FROM=bench/results/h200-replayed-gemm-nt-bias-cuda-$1-column-stage.bundle DTYPE=$1 BRANCH=column-stage REPLAY_ONCE=1 SHAPES="$2" \
   RETUNE_WIDEN="MCAST_A=0,1 WG_M=2,3 BLOCK_Y=2,3 FRAG_M=1,2 WGMMA_N=128,192,256 NUM_STAGES=3,4,5 CLUSTER_M=1,2 EPI_BOXES=2,4 TILES_PER_CTA=1,2,4" \
   RETUNE_BUDGET=200 RETUNE_TIME=80 WF=/tmp/wf-$1 OUT=$OUT/$1 timeout 260 bash bench/h200-gemm-shapes.sh run > $OUT/$1-run.log 2>&1
  echo "$1 rc=$?"; grep -E '^\{"dtype' $OUT/$1-run.log
done
tar czf $OUT/retune.tgz -C $OUT bf16 f16 && rm -rf $OUT/bf16 $OUT/f16
