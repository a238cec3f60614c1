#!/usr/bin/env bash
# The gated tests, run where the GPU is (issues 16 and 31): every test target whose code can
# print "SKIPPED" (its own source, or a gate it calls: tests/support, peak-backend's
# backend_test_suite!, opened_or_skip, run_gated), derived from the code by
# `python3 bench/gpu_tests.py targets`, is built here, carried to the GPU machine and run
# there, and `peak profile` is run once; bench/gpu_tests.py writes h200-gpu-tests.json
# (tests run, passed, failed, skipped with each reason, each test's outcome, commit, date).
# A gated binary that was not carried, fails to list its tests or lists none counts as failed.
#
# Here (a CPU machine with Rust):   bash bench/h200-gpu-tests.sh build
# There (the GPU machine, no Rust): OUT=some/folder bash bench/h200-gpu-tests.sh run
#
# `build` strips the binaries and packs them (with `peak`) into one xz archive, so that
# carry/gpu-tests stays under the 64 MiB a device call carries; `run` unpacks it.
# CARRY=DIR builds into (and runs from) DIR instead of carry/gpu-tests.
# GPU_TESTS_JOBS=N runs N binaries side by side (default 1); h200-gpu-tests.json is
# rewritten after each binary, so a run cut short leaves what it found ("complete": false).
# `run` then runs the CUDA snippet checks (cuda-snippets.log) and bench/h200-export.sh
# (exported CUDA harness vs peak run; SKIP_EXPORT=1 skips).
#
# Test binaries find the repository (examples, fixtures) and the peak binary through the
# absolute paths they were built with; `run` makes those paths lead to this checkout.
set -uo pipefail
cd "$(dirname "$0")/.."
# Where the build goes (and where `run` reads it): carry/gpu-tests unless CARRY names another.
CARRY="${CARRY:-carry/gpu-tests}"

build() {
  set -e
  rm -rf $CARRY
  source bench/carry.sh
  carry_peak $CARRY
  local targets staging
  targets="$(python3 bench/gpu_tests.py targets)"
  staging="$(mktemp -d)"
  mv $CARRY/peak "$staging/peak"
  # One cargo call (one feature resolution, so shared crates build once): every crate with
  # a gated target, every gated target's name; `executables` keeps the gated ones.
  local packages="" names=""
  for crate in $(printf '%s\n' $targets | cut -d/ -f1 | sort -u); do packages="$packages -p $crate"; done
  for name in $(printf '%s\n' $targets | cut -d/ -f2 | sort -u); do names="$names --test $name"; done
  cargo test --release --no-run $packages $names --message-format=json \
    | python3 bench/gpu_tests.py executables "$targets" \
    | while read -r name path; do strip -o "$staging/$name" "$path"; done
  # Every gated target must have been built.
  for t in $targets; do
    local b="${t%/*}-${t#*/}"
    [ -f "$staging/$b" ] || { echo "not built: $t" >&2; exit 1; }
  done
  tar -C "$staging" -cf - . | xz -T1 -6 > $CARRY/binaries.tar.xz
  rm -rf "$staging"
  pwd > $CARRY/built-in
  echo "$targets" | wc -w | xargs echo "gated targets:"
  du -sh $CARRY
  local size; size=$(du -sb $CARRY | cut -f1)
  if [ "$size" -ge $((64 * 1024 * 1024)) ]; then echo "$CARRY is over 64 MiB" >&2; exit 1; fi
}

run() {
  OUT="${OUT:-h200-gpu-tests}"
  mkdir -p "$OUT"
  local built_in; built_in="$(cat $CARRY/built-in)"
  if [ "$built_in" != "$PWD" ] && [ ! -e "$built_in" ]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"
  fi
  local bin=$CARRY/bin
  rm -rf "$bin" && mkdir -p "$bin"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' $CARRY/binaries.tar.xz "$bin"
  cp $CARRY/commit "$bin/commit"
  mkdir -p target/release && cp "$bin/peak" target/release/peak
  python3 bench/gpu_tests.py run "$bin" "$OUT" 2>&1 | tee "$OUT/gpu-tests.log"
  # Every CUDA snippet run once on the GPU and compared with the host
  # (transformations/checks/cuda_snippets.cu: it includes the snippet files, the text peak inserts).
  if command -v nvcc >/dev/null 2>&1; then
    nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o "$bin/cuda_snippets" transformations/checks/cuda_snippets.cu -lcuda \
      && "$bin/cuda_snippets" 2>&1 | tee "$OUT/cuda-snippets.log" || echo "cuda_snippets: failed (see $OUT/cuda-snippets.log)" >&2
  fi
  # peak export's round trip (issue 13): the exported CUDA harness, built with nvcc, against
  # peak run on the same configuration; writes $OUT/h200-export.json. Needs nvcc.
  if [ -z "${SKIP_EXPORT:-}" ]; then
    # The device's copy of the tree has no usable git history: name the build's commit.
    PEAK_COMMIT="$(cat $CARRY/commit)" PEAK="$bin/peak" OUT="$OUT" bash bench/h200-export.sh 2>&1 | tee "$OUT/export.log" || echo "h200-export: failed (see $OUT/export.log)" >&2
  fi
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
