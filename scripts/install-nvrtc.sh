#!/usr/bin/env bash
# Install NVRTC, the CUDA runtime headers and the CRT headers from PyPI, so that
# `peak compile` can compile CUDA and HIP kernels on a machine without a GPU or a CUDA
# toolkit. peak finds the wheels' libraries and headers by itself (it asks python3 where
# site-packages are); see crates/peak-cuda/README.md.
#
# The version defaults to 13.0.88, which matches the CUDA 13.0 toolkit and driver 580 of
# the H200 machines: a cubin from a newer NVRTC may not load on an older driver.
#
# It also installs nvcc (with cicc from nvidia-nvvm and the CCCL headers nvcc's own headers
# include): crates/peak-cli/tests/export_tips.rs compiles every exported case-study harness
# with its own nvcc build line, so a build line that cannot build what it exports (issue 27:
# `-arch=sm_90a` also compiling wgmma for plain sm_90) fails here, not on the GPU. That is
# about 100 MB to download (nvcc 37, nvvm 62, cccl 3) and 215 MB installed, the size of the
# NVRTC wheel again; PEAK_SKIP_NVCC=1 leaves it out (those tests then skip, saying so).
#   PEAK_CUDA_WHEEL_VERSION=13.0.88   wheel version to install
#   PEAK_CCCL_WHEEL_VERSION=13.0.85   CCCL's version in the same CUDA release
#   PYTHON=python3                    interpreter whose pip installs them
set -euo pipefail
version="${PEAK_CUDA_WHEEL_VERSION:-13.0.88}"
cccl_version="${PEAK_CCCL_WHEEL_VERSION:-13.0.85}"
python="${PYTHON:-python3}"
wheels=("nvidia-cuda-nvrtc==${version}" "nvidia-cuda-runtime==${version}" "nvidia-cuda-crt==${version}")
if [ -z "${PEAK_SKIP_NVCC:-}" ]; then
  wheels+=("nvidia-cuda-nvcc==${version}" "nvidia-nvvm==${version}" "nvidia-cuda-cccl==${cccl_version}")
fi
log="$(mktemp)"
if ! "$python" -m pip install --quiet --disable-pip-version-check "${wheels[@]}" 2>"$log"; then
  # A distribution's own python3 (Debian 12, Ubuntu 24.04) refuses system-wide pip
  # installs (PEP 668); the user's site-packages is where peak also looks.
  if grep -q externally-managed "$log"; then
    "$python" -m pip install --quiet --disable-pip-version-check --user --break-system-packages "${wheels[@]}"
  else
    cat "$log" >&2
    exit 1
  fi
fi
rm -f "$log"
# Show what peak will find, so a CI log says where NVRTC came from.
"$python" - <<'PY'
import glob, os, nvidia
roots = list(nvidia.__path__)
libs = sorted(l for r in roots for l in glob.glob(os.path.join(r, "cu*", "lib", "libnvrtc*.so*")))
incs = sorted(i for r in roots for i in glob.glob(os.path.join(r, "cu*", "include", "cuda_runtime.h")))
print("nvrtc libraries:", *libs, sep="\n  ")
print("cuda headers:", *incs, sep="\n  ")
print("nvcc:", *sorted(n for r in roots for n in glob.glob(os.path.join(r, "cu*", "bin", "nvcc"))) or ["(not installed)"], sep="\n  ")
if not libs or not incs:
    raise SystemExit("install-nvrtc.sh: the wheels installed but libnvrtc or cuda_runtime.h is missing")
PY
