#!/bin/sh
# Compile-check the HIP, OpenCL and HLSL snippets with the compilers peak's backends use
# (hipcc for gfx90a, clang's OpenCL C front end, glslang's HLSL front end). The CUDA
# snippets are run on a GPU instead: see cuda_snippets.cu and nvrtc_snippets.py.
# A missing compiler is reported and skipped, not failed.
set -u
cd "$(dirname "$0")"
status=0
check() { # name, command...
    name=$1; shift
    if ! command -v "$1" >/dev/null 2>&1; then echo "skip $name: $1 is not installed"; return; fi
    if "$@" >/tmp/peak-snippet-check.log 2>&1; then echo "ok   $name"; else echo "FAIL $name"; cat /tmp/peak-snippet-check.log; status=1; fi
}
check "HIP snippets (hipcc, gfx90a)" hipcc --offload-arch=gfx90a --cuda-device-only -c hip_snippets.hip -o /tmp/peak-hip-snippets.o
CLANG=$(command -v clang || command -v clang-15 || echo clang)
check "OpenCL snippets (clang, OpenCL C 1.2)" "$CLANG" -x cl -cl-std=CL1.2 -Xclang -finclude-default-header -fsyntax-only opencl_snippets.cl
cat ../snippets/tile_copy.hlsl ../snippets/tile_copy_transposed.hlsl ../snippets/async_copy.hlsl ../snippets/tile_load.hlsl hlsl_snippets.hlsl >/tmp/peak-hlsl-snippets.hlsl
check "HLSL snippets (glslang)" glslangValidator -D -V -e main -S comp --target-env vulkan1.1 --hlsl-enable-16bit-types -o /tmp/peak-hlsl-snippets.spv /tmp/peak-hlsl-snippets.hlsl
exit $status
