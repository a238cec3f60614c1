#!/usr/bin/env bash
# cuBLASLt through `peak baseline` against PyTorch's own call for the same GEMM, in the same
# device run (issue 25, item 2): llm.c's GPT-2 matmuls at B·T = 8192 tokens, out = inp · Wᵀ +
# bias (NT, bias fused, and the fc layer with GELU fused too), a square NN product and a
# 16-token NT, in f32 (no TF32), f16 and bf16 (f32 accumulation). Each case is a context
# generated into a temporary folder (bench/gemm_vendor.py: a [kernel.matmul] manifest and a
# plain tiled kernel that peak baseline checks cuBLASLt's output against); PyTorch times
# F.linear, torch._addmm_activation(use_gelu=True) or torch.matmul the way peak times
# cuBLASLt. Writes OUT/h200-gemm-vendor.json and bench/results/h200-gemm-vendor.json: per row
# dtype, m, n, k, layout, epilogue, cublaslt_ms, torch_ms, tflops (cuBLASLt's), what each
# side ran, and the command, device, commit and date.
#
# Here (a CPU machine with Rust):   bash bench/h200-gemm-vendor.sh build
# Check without a GPU:              bash bench/h200-gemm-vendor.sh dry-run   (PEAK=path/to/peak)
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-gemm-vendor.sh run
# Settings: REPS (timed calls per side, default 30), WARMUP (default 5), DTYPES (default
# "f32 f16 bf16"), CASES (indices into bench/gemm_vendor.py's CASES, default all), PEAK,
# PEAK_COMMIT.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  set -e
  source bench/carry.sh
  carry_peak carry/gemm-vendor
  ls -la carry/gemm-vendor
}

run() {
  OUT="${OUT:-h200-gemm-vendor}"
  mkdir -p "$OUT"
  export PEAK="${PEAK:-carry/gemm-vendor/peak}"
  export PEAK_COMMIT="${PEAK_COMMIT:-$(cat "$(dirname "$PEAK")/commit" 2>/dev/null || git rev-parse --short HEAD)}"
  "$PEAK" info > "$OUT/info.txt" 2>&1
  PYTHONUNBUFFERED=1 python3 bench/gemm_vendor.py run "$OUT" 2>&1 | tee "$OUT/gemm-vendor.log"
}

dry_run() {
  export PEAK="${PEAK:-carry/gemm-vendor/peak}"
  local dir; dir="$(mktemp -d)"
  python3 bench/gemm_vendor.py dry-run "$dir"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  dry-run) dry_run ;;
  *) echo "usage: $0 build|run|dry-run" >&2; exit 2 ;;
esac
