#!/usr/bin/env bash
# Round 8, third H200 call, with prepared eager launches (gridpair.eager._PREPARED): the CUDA
# tests, and the eager bf16 force step's host time (split inside the step, and the breakdown).
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 400 "${PYTEST[@]}" -n 4 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
run split-bf16 150 python3 docs/evidence/eager_step_split.py --dtype bf16-amp
run breakdown-bf16 150 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
run breakdown-fp32 150 python3 docs/evidence/eager_host_breakdown.py --dtype float32
grep -hE '^(split|step|part)' "$OUT"/split-bf16.log "$OUT"/breakdown-*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
