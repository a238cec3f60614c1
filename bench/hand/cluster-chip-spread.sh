# Hand check (not a recorded step), after bench/hand/cluster-chip-check.sh: the replayed
# Column-Stage and Column-Pairs tips at 8192 x 3072 x 768, at the row's configuration (clusters
# of two), REPEATS (default 3) fresh `peak baseline` processes each, the tips taking turns, on
# whatever H200 this call gets; records the GPU's serial, so that calls on different machines
# can be told apart.
# There (carry carry/gemm-shapes): OUT=dir bash bench/hand/cluster-chip-spread.sh
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,serial,uuid,clocks.max.sm --format=csv > $OUT/gpu.csv
for d in bf16 f16 e4m3; do
  s=bench/results/h200-replayed-gemm-nt-bias-cuda-$d-column-stage-retune.bundle
  [ -f $s ] || s=bench/results/h200-replayed-gemm-nt-bias-cuda-$d-column-stage.bundle
  rm -rf /tmp/cs-$d /tmp/cp-$d && git clone -q $s /tmp/cs-$d && git clone -q bench/results/h200-replayed-gemm-nt-bias-cuda-$d-column-pairs.bundle /tmp/cp-$d
done
python3 - "${PEAK:-carry/gemm-shapes/peak}" "$OUT" "${REPEATS:-3}" <<'PY'
import sys
sys.path.insert(0, "bench/hand")
from against_cublaslt import timed, tuned_rows, write
peak, out, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
configs = tuned_rows(("bf16", "f16", "e4m3"))
rows = [timed(peak, f"/tmp/{tip}-{d}/context", dict(configs[(d, "8192x3072x768")], M=8192, N=3072, K=768),
              dtype=d, tip={"cs": "Column-Stage", "cp": "Column-Pairs"}[tip], repeat=i)
        for i in range(repeats) for d in ("bf16", "f16", "e4m3") for tip in ("cs", "cp")]
write(f"{out}/cluster-chip-spread.json", "h200-cluster-chip-spread-hand", "OUT=dir bash bench/hand/cluster-chip-spread.sh", rows,
      gpu=open(f"{out}/gpu.csv").read())
PY
