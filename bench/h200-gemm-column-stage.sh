#!/usr/bin/env bash
# Column-Stage measured on the H200 for one dtype (bf16, f16 or e4m3): the branch column-stage of
# examples/workflows/gemm-nt-bias-cuda-<dtype>-deferred.bundle replayed by bench/gemm_shapes.py,
# resumed from that dtype's Multicast-A replay (only the new step validated, sanitized and
# tuned; the tip validated again at TILES_PER_CTA 1, 2, 4), retuned around the Multicast-A rows'
# configurations at four shapes and timed against cuBLASLt; then the tip validated where no
# tile divides (200 x 456 x 96) with both operands shared (MCAST_A 0 / 1, clusters of 2) and
# both tile widths (WGMMA_N 128 / 192: the last tile-column's bias box runs past N) under
# memcheck, racecheck and synccheck.
# Here: bash bench/h200-gemm-shapes.sh build; there (carry carry/gemm-shapes):
#   OUT=dir bash bench/h200-gemm-column-stage.sh bf16   -> $OUT/bf16.tgz (the merged rows, the replayed bundle, logs)
# Rows are merged here with bench/keep_fastest.py.
D="${1:?usage: bench/h200-gemm-column-stage.sh bf16|f16|e4m3}"
RESUME_FROM=bench/results/h200-replayed-gemm-nt-bias-cuda-$D-multicast-a.bundle DTYPE=$D BRANCH=column-stage REPLAY_ONCE=1 \
 SHAPES="8192x3072x768 8192x2304x768 8192x768x3072 4096x4096x4096" \
 RETUNE_WIDEN="MCAST_A=0,1 WG_M=2,3 BLOCK_Y=2,3 FRAG_M=1,2 WGMMA_N=128,192 NUM_STAGES=3,4 CLUSTER_M=1,2 EPI_BOXES=2,4 TILES_PER_CTA=1,2,4" \
 RETUNE_BUDGET="${RETUNE_BUDGET:-60}" RETUNE_TIME=25 WF=/tmp/wf OUT=$OUT/$D timeout 420 bash bench/h200-gemm-shapes.sh run > $OUT/$D-run.log 2>&1
echo "run rc=$?"
W=/tmp/wf/$D-column-stage-8192x3072x768
timeout 100 carry/gemm-shapes/peak validate $W/context --against examples/gemm-nt-bias-cuda-$D --set M=200 --set N=456 --set K=96 --set MCAST_A=0,1 --set CLUSTER_M=2 --set TILES_PER_CTA=1,2 --set WGMMA_N=128,192 \
  --samples 6 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > $OUT/$D/validate-edges.json 2> $OUT/$D/validate-edges.log
echo "validate rc=$?"; tail -3 $OUT/$D/validate-edges.log
tar czf $OUT/$D.tgz -C $OUT $D && rm -rf $OUT/$D
grep -E '^\{"dtype' $OUT/$D-run.log
