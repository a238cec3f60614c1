# Hand experiment (not a recorded step; bench/hand/tile-switch.py says why and what each
# ABLATE value removes): the bf16 and f16 tips (TIP=multicast-a, the default, or column-stage) at the three K = 768 / MLP shapes,
# each at its row's tuned configuration (bench/results/h200-gemm-shapes.json), with ABLATE 0
# (the tip), 1 (no bias loads), 2 (no TMA stores) and 3 (no epilogue), each against cuBLASLt
# in one `peak baseline` call (warm-up, events, medians, L2 flushed), two alternating rounds.
# Variants 1-3 compute wrong outputs on purpose: only their times are read.
# Here: the contexts under carry/exp/tsw-{bf16,f16} (bench/hand/tile-switch.py on copies of the
# TIP replays' tips: bench/results/h200-replayed-gemm-nt-bias-cuda-<dtype>-<TIP>.bundle) and bash bench/h200-gemm-shapes.sh build; there (carry
# carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/tile-switch-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"
python3 - "$P" "$OUT" <<'PY'
import os, sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, tuned_rows, write
peak, out = sys.argv[1:]
tip = os.environ.get("TIP", "multicast-a")
configs = tuned_rows(("bf16", "f16"))
shapes = ["8192x3072x768", "8192x2304x768", "8192x768x3072"]
rows = [timed(peak, f"carry/exp/tsw-{d}", dict(configs[(d, s)], ABLATE=a, **dict(zip("MNK", s.split("x")))), dtype=d, shape=s, ablate=a, round=rnd)
        for rnd in range(2) for d in ("bf16", "f16") for s in shapes for a in range(4)]
write(f"{out}/tile-switch.json", "h200-compare-tile-switch-hand", f"OUT=dir TIP={tip} bash bench/hand/tile-switch-run.sh", rows, tip=tip)
PY
