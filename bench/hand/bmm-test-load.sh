# The gated test batched_in_place_tn_gemm_interior_loop_branch_replays run by its own test
# binary on the H200 machine: alone (one test thread) five times, with the other batched_*
# tests, and the whole gemm_workflows binary. Not a recorded step.
# Here: bash bench/h200-gpu-tests.sh build; there (carry carry/gpu-tests): bash bench/hand/bmm-test-load.sh
C=carry/gpu-tests; b="$(cat $C/built-in)"; [ "$b" != "$PWD" ] && [ ! -e "$b" ] && mkdir -p "$(dirname "$b")" && ln -s "$PWD" "$b"
rm -rf $C/bin && mkdir -p $C/bin && python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' $C/binaries.tar.xz $C/bin
chmod +x $C/bin/*; mkdir -p target/release && cp $C/bin/peak target/release/peak
T=peak-cli-gemm_workflows
for i in 1 2 3 4 5; do timeout 60 $C/bin/$T batched_in_place_tn_gemm_interior_loop_branch_replays --exact --test-threads=1 > /tmp/t$i.log 2>&1; echo "alone $i rc=$? $(grep -o 'wrong-output.\{0,90\}' /tmp/t$i.log | head -1)"; done
for i in 1 2; do timeout 200 $C/bin/$T batched_in_place > /tmp/u$i.log 2>&1; echo "batched_* together $i rc=$? $(grep -c '... ok' /tmp/u$i.log) ok $(grep -o 'wrong-output.\{0,90\}' /tmp/u$i.log | head -1)"; done
timeout 250 $C/bin/$T > /tmp/w.log 2>&1; echo "whole binary rc=$? $(grep -E '^test result' /tmp/w.log) $(grep -o 'wrong-output.\{0,90\}' /tmp/w.log | head -1)"
