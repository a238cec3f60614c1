#!/usr/bin/env bash
# Column-Pairs measured on the H200 for the bf16, f16 and fp8 NT lines: the branch column-pairs of
# examples/workflows/gemm-nt-bias-cuda-<dtype>-deferred.bundle replayed by bench/gemm_shapes.py,
# resumed from that dtype's Column-Stage replay (only the new step validated, sanitized and tuned,
# at 8192 x 3072 x 768); the tip validated again where no tile divides (200 x 456 x 96, MCAST_A
# 0 / 1, WGMMA_N 128 / 192: the last bias box runs past N) under memcheck, racecheck and
# synccheck; then timed at the four NT shapes, each at the configuration its row of
# bench/results/h200-gemm-shapes.json was tuned to (the step adds no tuning parameter, so the
# Column-Stage rows' configurations hold), against cuBLASLt in one `peak baseline` call, beside
# the Column-Stage replay at the same configuration, two alternating rounds.
# Here: bash bench/h200-gemm-shapes.sh build; there (carry carry/gemm-shapes):
#   OUT=dir bash bench/h200-gemm-column-pairs.sh   -> $OUT/<dtype>.tgz (replay, bundle, logs), $OUT/column-pairs.json
cd "$(dirname "$0")/.."
P="${PEAK:-carry/gemm-shapes/peak}"
for D in ${DTYPES:-bf16 f16 e4m3}; do
  R=bench/results/h200-replayed-gemm-nt-bias-cuda-$D-column-stage-retune.bundle
  [ -f "$R" ] || R=bench/results/h200-replayed-gemm-nt-bias-cuda-$D-column-stage.bundle
  RESUME_FROM=$R DTYPE=$D BRANCH=column-pairs REPLAY_ONCE=1 SHAPES=8192x3072x768 RETUNE_BUDGET=0 \
    WF=/tmp/wf OUT=$OUT/$D timeout 200 bash bench/h200-gemm-shapes.sh run > $OUT/$D-run.log 2>&1
  echo "$D run rc=$?"
  W=/tmp/wf/$D-column-pairs-8192x3072x768
  timeout 90 $P validate $W/context --against examples/gemm-nt-bias-cuda-$D --set M=200 --set N=456 --set K=96 --set MCAST_A=0,1 --set CLUSTER_M=2 \
    --set TILES_PER_CTA=1,2 --set WGMMA_N=128,192 --samples 6 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json \
    > $OUT/$D/validate-edges.json 2> $OUT/$D/validate-edges.log
  echo "$D validate rc=$?"; tail -2 $OUT/$D/validate-edges.log
  rm -rf /tmp/wf/$D-column-stage && git clone -q $R /tmp/wf/$D-column-stage
done
python3 - "$P" "$OUT" <<'PY'
import os, sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, tuned_rows, write
peak, out = sys.argv[1:]
dtypes = os.environ.get("DTYPES", "bf16 f16 e4m3").split()
configs = tuned_rows(dtypes)
shapes = ["8192x3072x768", "8192x2304x768", "8192x768x3072", "4096x4096x4096"]
rows = [timed(peak, f"/tmp/wf/{d}-{tip}{'-8192x3072x768' if tip == 'column-pairs' else ''}/context", dict(configs[(d, s)], **dict(zip("MNK", s.split("x")))),
              dtype=d, shape=s, tip=tip, round=rnd)
        for rnd in range(2) for d in dtypes for s in shapes for tip in ("column-stage", "column-pairs")]
write(f"{out}/column-pairs.json", "h200-gemm-column-pairs", "OUT=dir bash bench/h200-gemm-column-pairs.sh", rows)
PY
for D in ${DTYPES:-bf16 f16 e4m3}; do tar czf $OUT/$D.tgz -C $OUT $D && rm -rf $OUT/$D; done
