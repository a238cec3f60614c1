#!/usr/bin/env bash
# Install everything peak needs on a fresh Debian (bookworm) machine:
# - OpenCL on the CPU (PoCL) and the OpenCL headers/loader,
# - hipcc, to compile-check HIP kernels for AMD gfx90a (MI200) without an AMD GPU,
# - Vulkan on the CPU (Mesa's lavapipe), the Vulkan loader, and glslang for HLSL -> SPIR-V,
# - NVRTC and the CUDA headers from PyPI, to compile-check CUDA without a GPU,
# - Node.js, for the MCP Inspector check,
# - the official MCP SDKs (Python `mcp` from PyPI, TypeScript `@modelcontextprotocol/sdk`
#   from npm) in crates/peak-mcp/tests/clients/, for the SDK client tests,
# - Chromium, to render `peak report --html` headless in the tests (a screenshot check),
# - SLURM (slurmctld, slurmd, munge), for the one-node cluster the SLURM test starts.
# Rust itself comes from rustup (https://rustup.rs) and is not installed here; its rustfmt
# and clippy components, which scripts/test.sh checks the style with, are added if missing.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  pocl-opencl-icd ocl-icd-opencl-dev clinfo
  mesa-vulkan-drivers libvulkan-dev glslang-tools vulkan-tools
  python3-pip python3-venv pkg-config git
  slurm-wlm munge
)

echo "peak: installing system packages: ${APT_PACKAGES[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null

# hipcc with its recommended packages (the ROCm device libraries it compiles against).
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq hipcc >/dev/null

# Node.js runs the MCP Inspector, the protocol's reference client, in the tests.
if ! command -v npx >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# Chromium draws the HTML report in the browser check (crates/peak-cli/tests/report.rs).
if ! command -v chromium >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# rustfmt and clippy for the style checks in scripts/test.sh. Without rustup, or offline,
# test.sh skips the checks and says so instead of failing.
if command -v rustup >/dev/null; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || echo "peak: could not add rustfmt and clippy; scripts/test.sh will skip the style checks" >&2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -x "$here/install-nvrtc.sh" ]; then
  "$here/install-nvrtc.sh"
fi

# The official MCP SDKs, pinned, for crates/peak-cli/tests/mcp_sdks.rs: the Python SDK in a
# virtual environment and the TypeScript SDK from the lock file, both in the clients folder.
clients="$here/../crates/peak-mcp/tests/clients"
echo "peak: installing the MCP SDKs into $clients" >&2
python3 -m venv "$clients/.venv"
"$clients/.venv/bin/pip" install -q -r "$clients/requirements.txt"
npm ci --prefix "$clients" --silent --no-audit --no-fund
echo "peak: system dependencies installed" >&2
