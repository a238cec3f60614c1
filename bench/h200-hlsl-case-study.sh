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

# NVIDIA's Vulkan driver for a machine without a display. The driver's ICD file names
# libGLX_nvidia.so.0, whose vk_icdGetInstanceProcAddr returns no vkCreateInstance on some
# headless machines (the H200 since 2026-11-25: "Could not get 'vkCreateInstance'"); the
# same driver's EGL library exports the same ICD entry points and creates an instance there.
# Uses the first manifest with which vulkaninfo finds an NVIDIA device.
pick_nvidia_icd() {
  local egl="$1/nvidia_egl_icd.json" icd
  printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "libEGL_nvidia.so.0", "api_version": "1.3"}}\n' > "$egl"
  for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json "$egl"; do
    [ -r "$icd" ] || continue
    if VK_DRIVER_FILES="$icd" "$VULKANINFO" --summary 2>/dev/null | grep -q "deviceName.*NVIDIA"; then
      export VK_DRIVER_FILES="$icd"
      echo "Vulkan: NVIDIA's driver through $icd"
      return
    fi
  done
  echo "no Vulkan manifest gives an NVIDIA device (tried the driver's ICD files and $egl); set VK_DRIVER_FILES" >&2
  exit 1
}

run() {
  OUT="${OUT:-bench/results}"
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH="$PWD/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  command -v glslangValidator >/dev/null || export PEAK_GLSLANG="$PWD/$CARRY/glslangValidator"
  export VULKANINFO="${VULKANINFO:-$PWD/$CARRY/vulkaninfo}"
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"   # EGL asks for one; nothing is written there
  [ -n "${VK_DRIVER_FILES:-}" ] || pick_nvidia_icd "$OUT"
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
