# What a device call carries: a stripped release `peak` and the commit it was built from.
# Source this file (from the repository root), then call
#   carry_peak DIR
# to build peak-cli, strip it into DIR/peak and write DIR/commit (bench/stamp.sh reads it
# there: the GPU machine's copy of the tree has no usable git history).
carry_peak() {
  cargo build --release -p peak-cli
  mkdir -p "$1"
  strip -o "$1/peak" target/release/peak
  git rev-parse --short HEAD > "$1/commit"
}
