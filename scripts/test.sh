#!/usr/bin/env bash
# The test command: the style checks (rustfmt, clippy), every crate's tests, then the MCP
# Inspector check. Hardware tests (CUDA, HIP on AMD) skip with a printed reason on machines
# without that hardware; OpenCL and Vulkan tests run on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# The GPU-tests runner's own tests (bench/gpu_tests.py: which targets are gated, and a lost
# binary counts as failed).
python3 -m unittest discover -s bench -p 'test_*.py'
# Style: rustfmt's layout (rustfmt.toml) and clippy with warnings as errors. A toolchain
# without the component (`rustup component add rustfmt clippy`) skips the check and says so.
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "SKIPPED cargo fmt --check: rustfmt is not installed (rustup component add rustfmt)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets -- -D warnings
else
  echo "SKIPPED cargo clippy: clippy is not installed (rustup component add clippy)"
fi
cargo test --workspace "$@"
# `peak mcp` against the MCP Inspector CLI: tools/list and a tools/call.
bash scripts/mcp-inspector-check.sh
