#!/usr/bin/env bash
# Round 8, fifth H200 call, on the round's final gridpair code: the eager step with and without
# prepared launches side by side in one process (bf16-amp and float32), what the regressions
# prove after the front-end lock's fix (the proof; every regression cold), and the plugin's GPU
# tests.
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run breakdown-bf16 60 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
run breakdown-fp32 60 python3 docs/evidence/eager_host_breakdown.py --dtype float32
grep -hE '^(step|part)' "$OUT"/breakdown-*.log >> "$OUT/summary.txt"
run proof 200 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
run regressions-all-cold 150 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 4 --cold-compile-report="$OUT/all-report.json"
run plugin-gpu 120 "${PYTEST[@]}" -n 4 tests/plugin/test_gpu.py tests/plugin/test_smem.py \
    tests/plugin/test_zygote.py tests/plugin/test_gpu_fork.py
grep -c "assuming every input is mutated\|missing 3 required positional" "$OUT"/*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
