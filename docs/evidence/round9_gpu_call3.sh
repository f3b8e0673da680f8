#!/usr/bin/env bash
# Round 9, third H200 call, on the round's final code: what the regressions prove with children
# readied ahead importing the compile stack (the proof; every regression cold, several per
# worker), the plugin's GPU, fork-ahead and isolation tests, and gridpair's CUDA tests.
#     OUT=/path/to/output bash docs/evidence/round9_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run proof 200 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
run regressions-all-cold 200 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 2 --cold-compile-report="$OUT/all-report.json"
run plugin-gpu 200 "${PYTEST[@]}" -n 4 tests/plugin/test_gpu.py tests/plugin/test_smem.py \
    tests/plugin/test_zygote.py tests/plugin/test_gpu_fork.py tests/plugin/test_fork_ahead.py \
    tests/plugin/test_isolation.py
run cuda-tests 150 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py \
    tests/gridpair/test_early_rejection.py
grep -c "assuming every input is mutated\|missing 3 required positional" "$OUT"/*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
