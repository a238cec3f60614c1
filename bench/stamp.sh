# What every benchmark JSON records about its run. Source this file, then call
#   stamp [CARRIED_COMMIT_FILE]
# to set COMMIT ($PEAK_COMMIT, else the carried build's commit file, else git's HEAD: the
# GPU machine's copy of the tree has no usable git history), DEVICE (nvidia-smi's name and
# driver) and DATE (UTC, ISO 8601).
stamp() {
  COMMIT="${PEAK_COMMIT:-$(cat "${1:-/nonexistent}" 2>/dev/null || git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}"
  DEVICE="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
  DEVICE="${DEVICE:-unknown}"
  DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
