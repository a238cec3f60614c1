#!/usr/bin/env bash
# The HLSL fp32 GEMM line on the H200 through Vulkan (issue 28): replay
# examples/workflows/matmul-hlsl-f32-line.bundle (Refactor ... Block-Swizzle, written by the
# agent executor on lavapipe) at one size per device call, every step validated and tuned
# there, each step's best timed against cuBLAS sgemm in the same call; prints what the
# driver exposes (subgroup size control, shaderFloat16, cooperative matrices, shared memory).
#
# Here (a CPU machine with Rust and the Vulkan tools):
#   bash bench/h200-hlsl-case-study.sh build        # fills carry/hlsl-line/
# There (the GPU machine), one call per size, carrying carry/hlsl-line:
#   SIZES=2048 OUT=$OUT bash bench/h200-hlsl-case-study.sh run
#   SIZES=4096 OUT=$OUT bash bench/h200-hlsl-case-study.sh run
# then, with both calls' files:
#   python3 bench/hlsl_case_study.py --merge bench/results/h200-hlsl-case-study.json \
#       N2048/h200-hlsl-case-study-n2048.json N4096/h200-hlsl-case-study-n4096.json
# Settings: BUDGET (evaluations per step, default 48), STEP_TIME (tuning seconds per step,
# default 20), SAMPLES (validation samples per step, default 16: with few, a step whose sampled configurations all exceed the shared memory is refused), REPLAY_TIMEOUT (seconds,
# default 380: the replay is stopped there and the steps it finished are timed), SIZES.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=carry/hlsl-line

build() {
  set -e
  source bench/carry.sh
  carry_peak "$CARRY"
  # glslang (needs only libstdc++), the Vulkan loader, and vulkaninfo with the X11/Wayland
  # client libraries it links (the GPU machine has NVIDIA's driver and ICD json, none of these).
  cp /usr/bin/glslangValidator "$CARRY/"
  mkdir -p "$CARRY/lib"
  cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$CARRY/lib/"
  cp /usr/bin/vulkaninfo "$CARRY/"
  for lib in $(ldd /usr/bin/vulkaninfo | awk '/=>/ {print $3}'); do
    case "$(basename "$lib")" in libc.so*|libm.so*|libpthread.so*|libstdc++.so*|libgcc_s.so*) ;; *) cp -L "$lib" "$CARRY/lib/" ;; esac
  done
  du -sh "$CARRY"; ls "$CARRY" "$CARRY/lib"
}

run() {
  OUT="${OUT:-bench/results}"
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH="$PWD/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VK_DRIVER_FILES="${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}"
  [ -r "$VK_DRIVER_FILES" ] || { echo "NVIDIA's ICD file $VK_DRIVER_FILES is missing; set VK_DRIVER_FILES" >&2; exit 1; }
  command -v glslangValidator >/dev/null || export PEAK_GLSLANG="$PWD/$CARRY/glslangValidator"
  export VULKANINFO="${VULKANINFO:-$PWD/$CARRY/vulkaninfo}"
  export PEAK="${PEAK:-$CARRY/peak}"
  export PEAK_COMMIT="${PEAK_COMMIT:-$(cat "$CARRY/commit" 2>/dev/null || echo unknown)}"
  "$PEAK" info
  python3 bench/hlsl_case_study.py "$OUT" 2>&1 | tee "$OUT/hlsl-case-study.log"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
