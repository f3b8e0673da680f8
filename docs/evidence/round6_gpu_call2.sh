#!/usr/bin/env bash
# Round 6, second H200 call: launch scalars specialized by class (as Inductor compiles them) and
# the eager path's resolved-kernel launch. The CUDA tests (the new Inductor-specialization and
# resolved-launch tests among them); the Inductor test again on the code before the change
# (gridpair of 0cc9856, shipped as _old_gridpair.tgz), where it must fail; the eager step's host
# breakdown in bf16 and fp32.
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 420 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py \
    tests/gridpair/test_early_rejection.py tests/gridpair/test_parallel_selection.py
ROOT=$(pwd) OLD=$(mktemp -d)
cp -r . "$OLD/repo" && rm -rf "$OLD/repo/gridpair" && tar xzf _old_gridpair.tgz -C "$OLD/repo"
(cd "$OLD/repo" && export PYTHONPATH="${PYTHONPATH/$ROOT/$OLD/repo}" \
    && run inductor-test-old-code 240 "${PYTEST[@]}" \
    "tests/gridpair/test_cuda.py::test_inductor_compiles_the_specialization_that_was_validated")
grep -E "^E  |AssertionError" "$OUT/inductor-test-old-code.log" | head -8 >> "$OUT/summary.txt"
run breakdown-bf16 200 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
run breakdown-fp32 200 python3 docs/evidence/eager_host_breakdown.py --dtype float32
grep -hE '^(step|part|fwd tile|torch )' "$OUT"/breakdown-*.log >> "$OUT/summary.txt"
grep -hE "compiled by Inductor" "$OUT"/cuda-tests.log | head -3 >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
