# Hand experiment (not a recorded step; bench/hand/f32-main-loop.py says why): the square fp32
# NN tip at its tuned configuration with its main loop changed one knob at a time (WARP_X,
# ADDR_INC, LOAD_KK, STORE_KK, ASYNC; each knob's value 0, or -1, is the tip; VARIANTS=async
# times the cp.async staging at two to four stages, alone and with WARP_X = 4; VARIANTS=async2
# the same with A's copies along k), each against cuBLASLt in
# one `peak baseline` call (n = 4096, warm-up, events, medians, L2 flushed), two alternating
# rounds, beside the replayed tip itself; validated first at n = 200 and 456 (no tile divides
# them) over the knobs, under memcheck and racecheck.
# Here: the context carry/exp/f32ml/context (f32-main-loop.py on a copy of the context of
# bench/results/h200-replayed-matmul-cuda-f32-epilogue-vector.bundle), the tip's context in
# carry/exp/f32tip/context, and bash bench/h200-gemm-shapes.sh build;
# there (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/f32-main-loop-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
timeout 150 $P validate carry/exp/f32ml/context --against examples/matmul-cuda-f32 --set n=200,456 --set WARP_X=0,4,8 --set ADDR_INC=0 \
  --set LOAD_KK=-1 --set STORE_KK=-1 --set ASYNC=${ASYNC:-1} --set NUM_STAGES=2,3,4 --set VEC=4 --set K_SPLITS=1,2 --samples 16 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json \
  > $OUT/validate.json 2> $OUT/validate.log
echo "validate rc=$?"
python3 - "$P" "$OUT" "${VARIANTS:-knobs}" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import SQUARE_F32_TIP, timed, write
peak, out, which = sys.argv[1:]
tip = SQUARE_F32_TIP
knobs = dict(WARP_X=0, ADDR_INC=0, LOAD_KK=-1, STORE_KK=-1, ASYNC=0)
variants = [{}, dict(STORE_KK=3), dict(STORE_KK=4), dict(STORE_KK=6), dict(LOAD_KK=1, STORE_KK=5), dict(WARP_X=8), dict(WARP_X=4),
            dict(ADDR_INC=1), dict(WARP_X=8, STORE_KK=4), dict(TILE_K=16), dict(TILE_K=16, STORE_KK=8)]
if which == "async":
    variants = [{}, dict(WARP_X=4)] + [dict(ASYNC=1, NUM_STAGES=s, **w) for s in (2, 3, 4) for w in ({}, dict(WARP_X=4))]
if which == "async2":
    variants = [{}, dict(WARP_X=4)] + [dict(ASYNC=2, NUM_STAGES=s, **w) for s in (2, 3, 4) for w in ({}, dict(WARP_X=4))]
rows = []
for rnd in range(2):
    rows.append(timed(peak, "carry/exp/f32tip/context", tip, reps=20, variant="replayed tip", round=rnd))
    for v in variants:
        rows.append(timed(peak, "carry/exp/f32ml/context", {**tip, **knobs, **v}, reps=20, variant=v or "knobs at the tip's values", round=rnd))
name = "f32-main-loop" if which == "knobs" else f"f32-main-loop-{which}"
write(f"{out}/{name}.json", f"h200-compare-{name}-hand", f"OUT=dir VARIANTS={which} bash bench/hand/f32-main-loop-run.sh", rows)
PY
