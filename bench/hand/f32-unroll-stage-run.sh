# Hand experiment (not a recorded step; bench/hand/f32-unroll-stage.py says why): the square
# fp32 NN tip at its tuned configuration with the k loop unrolled 1 (the tip), 2 and 4 times,
# at two and four stages, each against cuBLASLt in one `peak baseline` call (n = 4096, warm-up,
# events, medians, L2 flushed), two alternating rounds; validated first at n = 456 (no tile
# divides it) over UNROLL_T 2 and 4.
# Here: the context carry/exp/f32u (f32-unroll-stage.py on a copy of the replayed tip,
# bench/results/h200-replayed-matmul-cuda-f32-epilogue-vector.bundle) and bash bench/h200-gemm-shapes.sh
# build; there (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/f32-unroll-stage-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
BASE="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=8 K_SPLITS=1 MIN_BLOCKS=1 OFFSET=1 TILE_K=8 TRD_X=8 TRD_Y=16 VEC=4"
timeout 120 $P validate carry/exp/f32u --against examples/matmul-cuda-f32 --set n=456 --set UNROLL_T=2,4 --set NUM_STAGES=2,4 \
  --samples 8 --json > $OUT/validate.json 2> $OUT/validate.log
echo "validate rc=$?"
python3 - "$P" "$OUT" "$BASE" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, write
peak, out, base = sys.argv[1:]
tip = dict(kv.split("=") for kv in base.split())
rows = [timed(peak, "carry/exp/f32u", dict(tip, UNROLL_T=u, NUM_STAGES=st, n=4096), reps=20, unroll_t=u, num_stages=st, round=rnd)
        for rnd in range(2) for st in (2, 4) for u in (1, 2, 4)]
write(f"{out}/f32-unroll-stage.json", "h200-compare-f32-unroll-stage-hand", "OUT=dir bash bench/hand/f32-unroll-stage-run.sh", rows)
PY
