#!/usr/bin/env bash
# Round 7, fifth H200 call, on the final code (call 4's): what the regressions prove. The proof
# (cold fails on the trusting selector, passes on the validated one; a warm run masks it) and
# every regression cold.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run proof 200 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
run regressions-all-cold 120 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 4 --cold-compile-report="$OUT/all-report.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
