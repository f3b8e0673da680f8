#!/usr/bin/env bash
# Round 4, first H200 call (issue 11): the isolation benchmark after the fork-ahead (the next
# cold child forked and readied while a test runs), then the plugin's GPU, fork-server and
# isolation tests, the gridpair CUDA tests and the proof, beside each other.
#     OUT=/path/to/output bash docs/evidence/round4_gpu_verify.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
: > "$OUT/summary.txt"
versions
run bench-isolation 330 python3 benchmarks/bench_isolation.py --spawn-tests 2 --repeats 1 \
    --out "$OUT/isolation-h200.json"
run plugin-gpu 240 "${PYTEST[@]}" tests/plugin/test_gpu.py tests/plugin/test_gpu_fork.py \
    tests/plugin/test_forkserver.py tests/plugin/test_fork_ahead.py tests/plugin/test_zygote.py \
    tests/plugin/test_isolation.py tests/plugin/test_crash.py -n 4 &
run gridpair-cuda 240 "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 3 &
run proof 240 "${PYTEST[@]}" tests/regressions/test_proof.py &
wait
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
