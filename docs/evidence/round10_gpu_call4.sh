#!/usr/bin/env bash
# Round 10, fourth H200 call, on the round's final code (the custom ops now refuse a projector
# that needs a gradient; plugin fixes tested on the CPU): gridpair's CUDA tests, every cold
# regression, and the proof (the unvalidated selector fails cold, a warm run masks it).
#     OUT=/path/to/output bash docs/evidence/round10_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 150 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py \
    tests/gridpair/test_early_rejection.py
run regressions-all-cold 120 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 2 --cold-compile-report="$OUT/all-report.json"
run proof 150 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
