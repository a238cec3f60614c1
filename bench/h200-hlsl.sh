#!/usr/bin/env bash
# HLSL matmul on the H200 through Vulkan: the naive fp32 kernel and the two HAND-WRITTEN
# stages of the paper's HLSL sequence (Refactor -> TB-Tiling, -> Thread-Tiling), each
# tuned at n=2048 and n=4096, reported as fp32 TFLOP/s against the H200's fp32 peak and
# cuBLAS fp32 measured in the same device run. One JSON file per size.
#
# Run from the repository root on the device machine:
#   bash bench/h200-hlsl.sh
# It needs:
#   carry/peak-hlsl-bench   built here: cargo build --release -p peak-bench --bin peak-hlsl-bench
#                           && cp target/<dir>/release/peak-hlsl-bench carry/
#   glslangValidator        on PATH, or carry/glslangValidator (cp /usr/bin/glslangValidator carry/;
#                           it needs only libstdc++), or glslang-tools_*.deb in .gl/
#   .gl/*.deb               Debian's libvulkan1 (the Vulkan loader), when the machine has none
#   carry/peak              optional: the CLI, for the cuBLAS hook below
#
# Environment (all optional):
#   SIZES="2048 4096"       sizes, one bench run and one JSON file each (split them across
#                           device calls if one call is short of time: ~2 min for 2048,
#                           ~4 min for 4096 with the default search budgets)
#   VK_DRIVER_FILES         NVIDIA's ICD json (default below)
#   PEAK_FP32_TFLOPS        the device's fp32 peak (default 67, H200 SXM)
#   CUBLAS_FP32_TFLOPS_<n>  cuBLAS fp32 TFLOP/s at size n, if measured elsewhere (see the hook)
#   PEAK_CUBLAS_CONTEXT     CUDA fp32 matmul context for `peak baseline` (default examples/matmul-cuda-f32)
#   OUT                     output folder (the device tool's $OUT); default bench/results
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "h200-hlsl: $*" >&2; }

# --- Vulkan loader and NVIDIA's ICD ---------------------------------------------------
# The machine has NVIDIA's driver and its Vulkan ICD json but no loader (libvulkan.so.1):
# unpack Debian's loader package and point it at NVIDIA's ICD.
# (no grep -q: with pipefail, grep quitting early would fail the pipeline with SIGPIPE)
if ! ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null; then
  debs=(.gl/*.deb)
  [ -e "${debs[0]}" ] || { say "no Vulkan loader and no .gl/*.deb to unpack (need Debian's libvulkan1)"; exit 1; }
  for f in "${debs[@]}"; do dpkg -x "$f" /; done
  ldconfig
  ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null || { say "still no libvulkan.so.1 after unpacking .gl/*.deb: add Debian's libvulkan1_*.deb (apt-get download libvulkan1)"; exit 1; }
fi
export VK_DRIVER_FILES="${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}"
[ -r "$VK_DRIVER_FILES" ] || { say "NVIDIA's ICD file $VK_DRIVER_FILES is missing; set VK_DRIVER_FILES"; exit 1; }

# --- glslang ---------------------------------------------------------------------------
if ! command -v glslangValidator >/dev/null; then
  if [ -x carry/glslangValidator ]; then
    export PEAK_GLSLANG="$PWD/carry/glslangValidator"
  else
    say "glslangValidator not found: put it in carry/ or glslang-tools_*.deb in .gl/"; exit 1
  fi
fi

BENCH=carry/peak-hlsl-bench
[ -x "$BENCH" ] || { say "$BENCH is missing (cargo build --release -p peak-bench --bin peak-hlsl-bench)"; exit 1; }
OUT_DIR="${OUT:-bench/results}"
mkdir -p "$OUT_DIR"
COMMIT="${PEAK_COMMIT:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}"
PEAK="${PEAK_FP32_TFLOPS:-67}"
PEAK_SOURCE="NVIDIA H200 product page / datasheet (https://www.nvidia.com/en-us/data-center/h200/): FP32 67 TFLOPS for H200 SXM (60 for H200 NVL), non-tensor-core"

# --- preflight: the loader must find the NVIDIA device, or say why not -----------------
if ! VK_LOADER_DEBUG=error,warn "$BENCH" --context examples/matmul-hlsl-f32 --n 256 --max-configs 1 \
      --search-repetitions 1 --final-repetitions 1 --warmup 0 --require-device NVIDIA >/dev/null; then
  say "preflight failed; the ICD file says:"
  cat "$VK_DRIVER_FILES" >&2 || true
  echo >&2
  lib="$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' "$VK_DRIVER_FILES")"
  say "its library ${lib:-?}: $(ldconfig -p | grep -F "${lib##*/}" || echo 'not found by ldconfig')"
  exit 1
fi

# --- hook: cuBLAS fp32 in the same device run ------------------------------------------
# Prints cuBLAS fp32 TFLOP/s at size $1, or nothing. CUBLAS_FP32_TFLOPS_<n> wins; else
# carry/peak's `peak baseline` times cuBLAS on a CUDA fp32 matmul context of that size.
cublas_fp32_tflops() {
  local n="$1" var="CUBLAS_FP32_TFLOPS_$1"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  local ctx="${PEAK_CUBLAS_CONTEXT:-examples/matmul-cuda-f32}"
  if [ -x carry/peak ] && [ -d "$ctx" ]; then
    # peak baseline exits 1 when the CUDA kernel disagrees with cuBLAS; the cuBLAS time stands.
    { carry/peak baseline "$ctx" --set "n=$n" --json || true; } \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["cublas_timing"]["tflops"])' 2>/dev/null || true
  fi
}

for n in ${SIZES:-2048 4096}; do
  cublas="$(cublas_fp32_tflops "$n")"
  cublas_args=()
  if [ -n "$cublas" ]; then cublas_args=(--cublas "$n=$cublas"); say "cuBLAS fp32 at n=$n: $cublas TFLOP/s"; else say "no cuBLAS number for n=$n (see the hook)"; fi
  out="$OUT_DIR/h200-hlsl-matmul-f32-n$n.json"
  cmd=("$BENCH"
    --context examples/matmul-hlsl-f32
    --context examples/matmul-hlsl-f32-tiled
    --context examples/matmul-hlsl-f32-thread-tiled
    --n "$n"
    --max-configs 48
    --max-configs-for matmul-hlsl-f32=35
    --max-configs-for matmul-hlsl-f32-tiled=64
    --max-configs-for matmul-hlsl-f32-thread-tiled=96
    --require-device NVIDIA
    --peak-tflops "$PEAK" --peak-source "$PEAK_SOURCE"
    "${cublas_args[@]}")
  say "n=$n: ${cmd[*]}"
  "${cmd[@]}" --command "bash bench/h200-hlsl.sh (SIZES=$n): ${cmd[*]}" --commit "$COMMIT" \
    --date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --out "$out" >/dev/null
  python3 - "$out" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['device']['name']}  fp32 peak {r['peak_fp32_tflops']} TFLOP/s", file=sys.stderr)
for s in r["results"]:
    b = s["best"]
    if b is None:
        print(f"  {s['context']:32} n={s['n']}: no valid configuration {s['verdicts']}", file=sys.stderr)
        continue
    cub = f"{b['percent_of_cublas']:.1f}% of cuBLAS" if b["percent_of_cublas"] is not None else "no cuBLAS number"
    print(f"  {s['context']:32} n={s['n']}: {b['tflops']:7.2f} TFLOP/s  {b['percent_of_peak']:.1f}% of peak  {cub}  {b['params']}", file=sys.stderr)
PY
done
