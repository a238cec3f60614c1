# Hand check (not a recorded step): is the 8192 x 3072 x 768 row's clustered configuration
# (CLUSTER_M 2, MCAST_A 1) slower on some H200s than others? The Column-Stage tip at that shape
# ran 61.8-62.2 us in two earlier calls and 65.2 us in a third, at the same configuration, while
# the other shapes (no clusters) agreed within 1%. Times, on this machine, the Column-Stage copy
# of the hand experiment (carry/exp/pairs-<dtype>, COL_PAIRS 0 and 1) and the replayed
# Column-Pairs tip (carry/exp/cp/<dtype>.bundle) at the row's configuration and at the same
# with clusters of one, each against cuBLASLt; records the GPU's serial and SM count.
# There (carry carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/cluster-chip-check.sh
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,serial,uuid,clocks.max.sm --format=csv > $OUT/gpu.csv
for d in bf16 f16 e4m3; do rm -rf /tmp/cp-$d && git clone -q carry/exp/cp/$d.bundle /tmp/cp-$d; done
python3 - "${PEAK:-carry/gemm-shapes/peak}" "$OUT" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, tuned_rows, write
peak, out = sys.argv[1:]
configs = tuned_rows(("bf16", "f16", "e4m3"))
shape = dict(M=8192, N=3072, K=768)
rows = []
for d in ("bf16", "f16", "e4m3"):
    row_cfg = dict(configs[(d, "8192x3072x768")], **shape)
    for name, cfg in (("row's configuration", row_cfg), ("clusters of one", dict(row_cfg, CLUSTER_M=1, MCAST_A=0))):
        rows.append(timed(peak, f"carry/exp/pairs-{d}", dict(cfg, COL_PAIRS=0), dtype=d, config=name, tip="column-stage (hand copy)"))
        rows.append(timed(peak, f"carry/exp/pairs-{d}", dict(cfg, COL_PAIRS=1), dtype=d, config=name, tip="hand COL_PAIRS 1"))
        rows.append(timed(peak, f"/tmp/cp-{d}/context", cfg, dtype=d, config=name, tip="column-pairs (replayed)"))
write(f"{out}/cluster-chip-check.json", "h200-cluster-chip-check-hand", "OUT=dir bash bench/hand/cluster-chip-check.sh", rows,
      gpu=open(f"{out}/gpu.csv").read())
PY
