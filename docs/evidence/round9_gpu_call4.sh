#!/usr/bin/env bash
# Round 9, fourth H200 call, on the round's final code (children warm ahead by the last finished
# test of their file): the fork-ahead tests, and the capped cold regressions one after another
# in one worker, as in call 1.
#     OUT=/path/to/output bash docs/evidence/round9_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
T=tests/regressions/test_cold_force_loss.py::test_compiled_force_loss_step_cold
run fork-ahead-tests 150 "${PYTEST[@]}" tests/plugin/test_fork_ahead.py tests/plugin/test_pristine.py
run regressions-serial 200 "${PYTEST[@]}" -p no:randomly --cold-compile --smem-limit 101376 \
    "$T[single-focus-packed-bf16-amp]" "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]" \
    --cold-compile-report="$OUT/cold-report-serial.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
