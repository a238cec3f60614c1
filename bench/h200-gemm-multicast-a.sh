#!/usr/bin/env bash
# Multicast-A measured on the H200 for one dtype (bf16, f16 or e4m3): the branch multicast-a of
# examples/workflows/gemm-nt-bias-cuda-<dtype>-deferred.bundle replayed by bench/gemm_shapes.py,
# resumed from that dtype's Three-Consumers replay (only the new step validated, sanitized and
# tuned; the tip validated again at TILES_PER_CTA 1, 2, 4), retuned over MCAST_A and the tile
# space at four shapes and timed against cuBLASLt; then the tip validated with MCAST_A = 1 and
# clusters of 2 where no tile divides (200 x 456 x 96) under memcheck, racecheck and synccheck.
# Here: bash bench/h200-gemm-shapes.sh build; there (carry carry/gemm-shapes):
#   OUT=dir bash bench/h200-gemm-multicast-a.sh bf16   -> $OUT/bf16.tgz (the merged rows, the replayed bundle, logs)
# Rows are merged here with bench/keep_fastest.py. (The bf16 and f16 runs of 2026-11-29 used K = 88.)
D="${1:?usage: bench/h200-gemm-multicast-a.sh bf16|f16|e4m3}"
RESUME_FROM=bench/results/h200-replayed-gemm-nt-bias-cuda-$D-three-consumers.bundle DTYPE=$D BRANCH=multicast-a REPLAY_ONCE=1 \
 SHAPES="8192x3072x768 8192x2304x768 8192x768x3072 4096x4096x4096" \
 RETUNE_WIDEN="MCAST_A=0,1 WG_M=2,3 BLOCK_Y=2,3 FRAG_M=1,2 WGMMA_N=128,192 NUM_STAGES=4,5 CLUSTER_M=1,2 EPI_BOXES=2,4 TILES_PER_CTA=1,2,4" \
 RETUNE_BUDGET=200 RETUNE_TIME=60 WF=/tmp/wf OUT=$OUT/$D timeout 480 bash bench/h200-gemm-shapes.sh run > $OUT/$D-run.log 2>&1
echo "run rc=$?"
W=/tmp/wf/$D-multicast-a-8192x3072x768
timeout 90 carry/gemm-shapes/peak validate $W/context --against examples/gemm-nt-bias-cuda-$D --set M=200 --set N=456 --set K=96 --set MCAST_A=1 --set CLUSTER_M=2 --set TILES_PER_CTA=1,2,4 --set WGMMA_N=128 \
  --samples 6 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > $OUT/$D/validate-mcast.json 2> $OUT/$D/validate-mcast.log
echo "validate rc=$?"; tail -3 $OUT/$D/validate-mcast.log
tar czf $OUT/$D.tgz -C $OUT $D && rm -rf $OUT/$D
grep -E '^\{"dtype' $OUT/$D-run.log
