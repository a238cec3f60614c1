#!/usr/bin/env bash
# Is the fp32 NT tip's last gap wave quantization? (A hand measurement, not a recorded step.)
# The Interior-Loop replay's tip at its tuned 128 x 256 tile (16 x 16 threads, 8 x 16 outputs
# each; one block an SM) against cuBLASLt at the issue's two short shapes and at neighbours whose
# tile counts fill whole waves of the H200's 132 SMs:
#   8192 x 3072: 32 x 24 = 768 tiles, 5.82 waves;  8448 x 3072: 33 x 24 = 792 tiles, 6 waves;
#   4096 x 4096:  16 x 32 = 512 tiles, 3.88 waves;  4096 x 4224: 16 x 33 = 528 tiles, 4 waves.
# If peak's time hardly moves between the pair while cuBLASLt's grows with the work, the gap is
# the idle part of the last wave. There: OUT=dir bash bench/hand/f32-waves-run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/hand/f32-common.sh
D=/tmp/f32-waves; rm -rf "$D"; mkdir -p "$D"
git clone -q bench/results/h200-replayed-gemm-nt-bias-cuda-f32-interior-loop.bundle "$D/il"
CFG="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=2 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1 NUM_STAGES=4 OFFSET=1 TILE_K=8 TRD_X=8 TRD_Y=16 VEC=4"
for shape in 8192x3072x768 8448x3072x768 7936x3072x768 4096x4096x4096 4096x4224x4096; do
  time_case 1 "$shape" il/context "$CFG" interior-loop
done | tee "$OUT/f32-waves.jsonl"
