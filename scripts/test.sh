#!/usr/bin/env bash
# The test command: every crate's tests, then the MCP Inspector check. Hardware tests (CUDA, HIP on AMD) skip with a
# printed reason on machines without that hardware; OpenCL and Vulkan tests run on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# The GPU-tests runner's own tests (bench/gpu_tests.py: which targets are gated, and a lost
# binary counts as failed).
python3 -m unittest discover -s bench -p 'test_*.py'
cargo test --workspace "$@"
# `peak mcp` against the MCP Inspector CLI: tools/list and a tools/call.
bash scripts/mcp-inspector-check.sh
