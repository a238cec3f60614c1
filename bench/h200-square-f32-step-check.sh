#!/usr/bin/env bash
# Before replaying a new step of the square fp32 NN line (about ten minutes of device time),
# a check of minutes: the step's deferred context (its walk's checkpoint, compile-checked
# only) beside the replayed tip it starts from, each configuration against cuBLASLt in one
# `peak baseline` call (n = 4096, warm-up, events, medians, L2 flushed), two alternating
# rounds; the step validated first where no tile divides (n = 200, 456) under memcheck,
# racecheck and synccheck. Then, if the call has time left, Nsight Compute's source page of
# the step at the tip's configuration (bench/h200-gemm-profile.sh).
# Here: carry/exp/f32step/context (the step's context, its TRD range widened to the replayed
# tip's: pow2 [1, 16], TRD_X * TRD_Y <= 128), carry/exp/f32tip/context (the context of
# bench/results/h200-replayed-matmul-cuda-f32-epilogue-vector.bundle), and
# bash bench/h200-gemm-shapes.sh build. There (carry carry/gemm-shapes and carry/exp):
#   OUT=dir STEP=fragment-prefetch bash bench/h200-square-f32-step-check.sh
cd "$(dirname "$0")/.."
P="${PEAK:-carry/gemm-shapes/peak}"; STEP="${STEP:?name the step}"
timeout 150 $P validate carry/exp/f32step/context --against examples/matmul-cuda-f32 --set n=200,456 --set TRD_X=4,8 --set TRD_Y=8,16 \
  --set CHUNK_X=1,4 --set VEC=4 --set K_SPLITS=1,2 --samples 8 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json \
  > $OUT/validate.json 2> $OUT/validate.log
echo "validate rc=$?"
python3 - "$P" "$OUT" "$STEP" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import SQUARE_F32_TIP, timed, write
peak, out, step = sys.argv[1:]
tip = SQUARE_F32_TIP
configs = {"tip": tip, "two stages": dict(tip, NUM_STAGES=2),
           "128 threads, two blocks an SM": dict(tip, BLOCK_Y=8, MIN_BLOCKS=2),
           "16 x 8 outputs": dict(tip, TRD_X=16, TRD_Y=8)}
rows = [timed(peak, f"carry/exp/{ctx}/context", cfg, reps=20, context=label, config=name, round=rnd)
        for rnd in range(2) for name, cfg in configs.items() for ctx, label in (("f32tip", "epilogue-vector tip"), ("f32step", step))]
write(f"{out}/square-f32-{step}-check.json", f"h200-square-f32-{step}-check", f"OUT=dir STEP={step} bash bench/h200-square-f32-step-check.sh", rows)
PY
if [ -n "${PROFILE:-}" ]; then
  OUT=$OUT/profile WF=carry/exp/f32step SHAPES=n=4096 KERNEL=matmul \
    PARAMS="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=8 K_SPLITS=1 MIN_BLOCKS=1 NUM_STAGES=4 OFFSET=1 TILE_K=8 TRD_X=8 TRD_Y=16 VEC=4" \
    timeout "$PROFILE" bash bench/h200-gemm-profile.sh
  tar czf $OUT/profile.tgz -C $OUT profile && rm -rf $OUT/profile
fi
