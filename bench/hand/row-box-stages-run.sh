# Hand experiment (not a recorded step; bench/results/h200-compare-rowbox-stages-hand.json): row-box-run.sh with deeper pipelines,
# NUM_STAGES up to 12 in both copies (a decode stage of WGMMA_N = 64 is 16 KB), over a
# subspace of those stages, the copy validated at the new stage counts under memcheck.
cd "$(dirname "$0")/../.."
for c in orig mod; do sed -i 's/^values = \[2, 3, 4, 5, 6\]$/values = [2, 3, 4, 5, 6, 8, 10, 12]/' carry/exp/rowbox/$c/peak.toml; done
SP="--set K_SPLITS=2,4 --set WGMMA_N=64,128,192 --set NUM_STAGES=4,6,8,10,12 --set CLUSTER_M=1 --set FRAG_M=1 --set TILES_PER_CTA=1" \
VALIDATE="--set K_SPLITS=2,4 --set NUM_STAGES=8,10,12 --set CLUSTER_M=1 --samples 6 --sanitize memcheck --sanitize-samples 1" \
NAME=rowbox-stages-compare exec bash bench/hand/row-box-run.sh
