# Shared by the fp32 hand experiments (bench/hand/f32-*.sh; sourced from the repository root):
# the carried peak and scratch contexts, the two configurations they compare (NNCFG: the square
# NN case-study tip's 16 x 8 tile; JCFG: the joint-staging rows' 8 x 8 tile), and one timing
# against cuBLASLt printed as a JSON line.
P="${PEAK:-carry/gemm-shapes/peak}"; D=carry/exp/f32; export PATH=/usr/local/cuda/bin:$PATH
NNCFG="BLOCK_X=16 BLOCK_Y=16 TRD_X=16 TRD_Y=8 CHUNK_X=2 CHUNK_Y=4 NUM_STAGES=4 OFFSET=8 TILE_K=8 VEC=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1"
JCFG="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=2 NUM_STAGES=2 OFFSET=1 TILE_K=16 TRD_X=8 TRD_Y=8 VEC=4"
# sets "A=1 B=2": --set A=1 --set B=2
sets() { for a in $1; do printf -- "--set %s " "$a"; done; }
# time_case ROUND MxNxK CONTEXT "CONFIG" [LABEL]: peak baseline of carry/exp/f32/CONTEXT against
# cuBLASLt, one JSON line on stdout (its "ctx" LABEL, else CONTEXT), or the error's tail.
time_case() {
  local m n k; IFS=x read -r m n k <<< "$2"
  "$P" baseline "$D/$3" --against cublaslt --reps 30 --json --set M=$m --set N=$n --set K=$k $(sets "$4") > /tmp/b.json 2> /tmp/b.err
  python3 - "$1" "$2" "${5:-$3}" "$4" <<'PY' || tail -3 /tmp/b.err
import json, sys
d = json.load(open("/tmp/b.json"))
print(json.dumps({"round": int(sys.argv[1]), "shape": sys.argv[2], "ctx": sys.argv[3], "cfg": sys.argv[4], "peak_ms": d["kernel_timing"]["median_ms"],
                  "cublaslt_ms": d["cublas_timing"]["median_ms"], "pct": d["percent_of_cublas"], "matches": d["validation"]["passed"]}))
PY
}
# best_config TOP.json: the first configuration a `peak tune --top-out` file ranks, as "A=1 B=2 ...".
best_config() {
  python3 -c "import json,sys;e=json.load(open(sys.argv[1]))[0]['entries'][0]['tuning'];print(' '.join(f'{a}={b}' for a,b in e.items()))" "$1"
}
