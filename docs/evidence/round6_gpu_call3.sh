#!/usr/bin/env bash
# Round 6, third H200 call: the CUDA tests after the unit-stride fix (the 64-bit offset tests
# failed in call 2: a unit channel stride is a constant now) and with the shared memory in the
# Inductor-specialization test; the eager breakdown after the signature's layout memo, with a
# cProfile of 30 bf16 steps.
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 420 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py
run breakdown-bf16 200 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp --cprofile
run breakdown-fp32 200 python3 docs/evidence/eager_host_breakdown.py --dtype float32
grep -hE '^(step|part|fwd tile|torch )' "$OUT"/breakdown-*.log >> "$OUT/summary.txt"
grep -hE "compiled by Inductor" "$OUT"/cuda-tests.log | head -3 >> "$OUT/summary.txt"
cp "$OUT/breakdown-bf16.log" "$OUT/profile-bf16.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
