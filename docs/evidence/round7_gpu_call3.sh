#!/usr/bin/env bash
# Round 7, third H200 call, on the final code: what the regressions prove after the eager
# path's autocast change and the selector's operand dtypes. The proof (cold fails on the
# trusting selector, passes on the validated one; a warm run masks it), every regression cold,
# the plugin's GPU tests, the six cold P147 selections with 16 workers, capped and not, and the
# eager breakdown again.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run proof 240 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
run regressions-all-cold 240 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 4 --cold-compile-report="$OUT/all-report.json"
run plugin-gpu 200 "${PYTEST[@]}" -n 4 tests/plugin/test_gpu.py tests/plugin/test_smem.py \
    tests/plugin/test_zygote.py tests/plugin/test_gpu_fork.py
run selection-uncapped 100 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2
run selection-capped 120 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2 --smem-limit 101376
run breakdown-bf16 100 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
grep -hE '^(step|part)' "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
