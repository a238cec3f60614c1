# Hand experiment (not a recorded step; bench/hand/multicast-a.py says why): the bf16
# Pair-Round tip with MCAST_A = 1 (clusters along N sharing A's 256-row tile, as cuBLASLt's
# 1 x 2 clusters do) against MCAST_A = 0 (the tip: clusters along M sharing weight's tile).
# 1. Validated at shapes that divide no tile, TILES_PER_CTA 1/2/4, CLUSTER_M 1/2/4 (those whose
#    column blocks form whole clusters), under memcheck, racecheck and synccheck.
# 2. At each issue-25 shape, the tip's tuned configuration, it with clusters of 2 sharing B
#    (MCAST_A 0) and A (MCAST_A 1), and the best
#    of a small exhaustive tune over MCAST_A x CLUSTER_M x NUM_STAGES x WGMMA_N, each against
#    cuBLASLt in one `peak baseline` call, two alternating rounds.
# Here: bash bench/hand/prepare.sh && bash bench/h200-gemm-shapes.sh build; there (carry
# carry/gemm-shapes and carry/exp): OUT=dir bash bench/hand/multicast-a-run.sh
cd "$(dirname "$0")/../.."
P="${PEAK:-carry/gemm-shapes/peak}"; C=carry/exp/mca
timeout 240 $P validate $C --against examples/gemm-nt-bias-cuda-bf16 --set MCAST_A=1 --set CLUSTER_M=1,2,4 --set TILES_PER_CTA=1,2,4 \
  --samples 8 --sanitize memcheck,racecheck,synccheck --sanitize-samples 2 --json > $OUT/validate.json 2> $OUT/validate.log
echo "validate rc=$?"
python3 - "$P" "$C" "$OUT" <<'PY'
import json, subprocess, sys
peak, ctx, out = sys.argv[1:]
# The tip's tuned configurations (bench/results/h200-gemm-shapes.json, Pair-Round's rows).
base = {"BLOCK_X": 128, "BLOCK_Y": 2, "EPI_BOXES": 2, "FRAG_N": 1, "TILE_K": 64, "WARP_X": 32, "WG_M": 2, "TILES_PER_CTA": 1, "NUM_STAGES": 4}
shapes = {"8192x3072x768": dict(base, CLUSTER_M=2, FRAG_M=2, WGMMA_N=128),
          "8192x2304x768": dict(base, CLUSTER_M=1, FRAG_M=2, WGMMA_N=128),
          "8192x768x3072": dict(base, CLUSTER_M=2, FRAG_M=1, WGMMA_N=192, TILES_PER_CTA=2, EPI_BOXES=4),
          "4096x4096x4096": dict(base, CLUSTER_M=1, FRAG_M=2, WGMMA_N=128, TILES_PER_CTA=4)}
def sets(d):
    return [a for k, v in d.items() for a in ("--set", f"{k}={v}")]
def timed(shape, cfg, label, rnd):
    m, n, k = shape.split("x")
    r = subprocess.run([peak, "baseline", ctx, "--against", "cublaslt", "--reps", "20", "--json", *sets({"M": m, "N": n, "K": k, **cfg})], capture_output=True, text=True)
    try:
        rep = json.loads(r.stdout)
        row = {"shape": shape, "label": label, "round": rnd, "params": cfg, "peak_ms": rep["kernel_timing"]["median_ms"],
               "cublaslt_ms": rep["cublas_timing"]["median_ms"], "pct": rep["percent_of_cublas"], "matches": rep["validation"]["passed"]}
    except Exception:
        row = {"shape": shape, "label": label, "round": rnd, "params": cfg, "error": r.stderr[-800:]}
    print(json.dumps(row), flush=True)
    return row
rows, tuned = [], {}
for shape, cfg in shapes.items():
    m, n, k = shape.split("x")
    space = sets({"M": m, "N": n, "K": k, **{k2: v for k2, v in cfg.items() if k2 not in ("CLUSTER_M", "NUM_STAGES", "WGMMA_N")}})
    r = subprocess.run([peak, "tune", ctx, "--strategy", "exhaustive", *space, "--set", "MCAST_A=0,1", "--set", "CLUSTER_M=1,2,4",
                        "--set", "NUM_STAGES=3,4,5", "--set", "WGMMA_N=128,192,256", "--top-out", "/tmp/mca-top.json", "--json"], capture_output=True, text=True, timeout=150)
    try:
        top = json.load(open("/tmp/mca-top.json"))[0]["entries"]
        tuned[shape] = [e["tuning"] for e in top[:3]]
    except Exception:
        tuned[shape] = {"error": r.stderr[-800:]}
for rnd in range(2):
    for shape, cfg in shapes.items():
        rows.append(timed(shape, dict(cfg, MCAST_A=0), "tip", rnd))
        rows.append(timed(shape, dict(cfg, MCAST_A=0, CLUSTER_M=2), "tip, clusters of 2", rnd))
        rows.append(timed(shape, dict(cfg, MCAST_A=1, CLUSTER_M=2), "mcast_a, clusters of 2", rnd))
        best = tuned.get(shape)
        if isinstance(best, list) and best:
            rows.append(timed(shape, best[0], "tuned best", rnd))
json.dump({"tuned_top3": tuned, "rows": rows}, open(f"{out}/multicast-a.json", "w"), indent=1)
PY
