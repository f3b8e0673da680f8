#!/usr/bin/env bash
# Round 8, seventh H200 call, on the final commit (after call 5 the eager path also leaves a
# selector that overrides choose_keyed unprepared): the CUDA tests of gridpair and the eager
# breakdown once more.
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call7.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 200 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py \
    tests/gridpair/test_early_rejection.py
run breakdown-bf16 60 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
grep -hE '^step' "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
grep -c "assuming every input is mutated\|missing 3 required positional" "$OUT"/*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
