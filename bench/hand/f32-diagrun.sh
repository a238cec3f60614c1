# Hand experiment (bench/results/h200-compare-f32-nt-diagnosis-hand.json); bash bench/hand/prepare.sh here, carry carry/gemm-shapes and carry/exp.
cd "$(dirname "$0")/../.."
P=carry/gemm-shapes/peak; D=carry/exp/f32; export PATH=/usr/local/cuda/bin:$PATH
NNCFG="BLOCK_X=16 BLOCK_Y=16 TRD_X=16 TRD_Y=8 CHUNK_X=2 CHUNK_Y=4 NUM_STAGES=4 OFFSET=8 TILE_K=8 VEC=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=1"
JCFG="BLOCK_X=16 BLOCK_Y=16 CHUNK_X=4 CHUNK_Y=4 GROUP_M=1 K_SPLITS=1 MIN_BLOCKS=2 NUM_STAGES=2 OFFSET=1 TILE_K=16 TRD_X=8 TRD_Y=8 VEC=4"
sets() { for a in $1; do printf -- "--set %s " "$a"; done; }
for r in 0 1; do for c in "joint:$JCFG" "d-rowstore:$JCFG" "d-rowload:$JCFG" "joint:$NNCFG" "d-rowstore:$NNCFG" "d-rowload:$NNCFG"; do ctx=${c%%:*}; cfg=${c#*:}
  $P baseline $D/$ctx --against cublaslt --reps 30 --json --set M=4096 --set N=4096 --set K=4096 $(sets "$cfg") > /tmp/b.json 2>/tmp/b.err
  python3 -c "
import json;d=json.load(open('/tmp/b.json'));print(json.dumps({'round':$r,'ctx':'$ctx','cfg':'$cfg'[:40],'peak_ms':d['kernel_timing']['median_ms'],'cublaslt_ms':d['cublas_timing']['median_ms'],'pct':d['percent_of_cublas'],'matches':d['validation']['passed']}))" || tail -3 /tmp/b.err
done; done
