# Hand experiment (not a recorded step; bench/hand/column-pairs.py says why): the Column-Stage
# tips with COL_PAIRS 0 (the tip) and 1 (the bias held as packed 16-bit pairs). Prepared
# 2026-11-30, not yet run. Each dtype's copy is validated first with COL_PAIRS = 1 where no
# tile divides (200 x 456 x 96; MCAST_A 0 / 1, WGMMA_N 128 / 192) under memcheck, racecheck
# and synccheck; then both values are timed at the four NT shapes, each at its row's
# configuration (bench/results/h200-gemm-shapes.json), against cuBLASLt in one `peak baseline`
# call, two alternating rounds.
# Here: for d in bf16 f16 e4m3: copy the context of bench/results/h200-replayed-gemm-nt-bias-cuda-$d-column-stage.bundle
# to carry/exp/pairs-$d and run bench/hand/column-pairs.py on it; bash bench/h200-gemm-shapes.sh build.
# There (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/column-pairs-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
for d in bf16 f16 e4m3; do
  timeout 90 $P validate carry/exp/pairs-$d --against examples/gemm-nt-bias-cuda-$d --set M=200 --set N=456 --set K=96 --set COL_PAIRS=1 \
    --set MCAST_A=0,1 --set CLUSTER_M=2 --set TILES_PER_CTA=1,2 --set WGMMA_N=128,192 --samples 4 --sanitize memcheck,racecheck,synccheck \
    --sanitize-samples 2 --json > $OUT/validate-$d.json 2> $OUT/validate-$d.log
  echo "validate $d rc=$?"
done
python3 - "$P" "$OUT" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, tuned_rows, write
peak, out = sys.argv[1:]
configs = tuned_rows(("bf16", "f16", "e4m3"))
shapes = ["8192x3072x768", "8192x2304x768", "8192x768x3072", "4096x4096x4096"]
rows = [timed(peak, f"carry/exp/pairs-{d}", dict(configs[(d, s)], COL_PAIRS=p, **dict(zip("MNK", s.split("x")))), dtype=d, shape=s, col_pairs=p, round=rnd)
        for rnd in range(2) for d in ("bf16", "f16", "e4m3") for s in shapes for p in (0, 1)]
write(f"{out}/column-pairs.json", "h200-compare-column-pairs-hand", "OUT=dir bash bench/hand/column-pairs-run.sh", rows)
PY
