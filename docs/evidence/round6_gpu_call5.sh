#!/usr/bin/env bash
# Round 6, fifth H200 call, on the committed code (launch scalars specialized by class, the
# eager path's resolved launches, the P147 bf16 tiles of call 4's sweep): the benchmark of every
# implementation in one run (benchmarks/results/h200.json and the README's table), the eager
# breakdown, and the two capped cold P147 regressions with their report (cold-h200.json).
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call5.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run bench-all 330 python3 benchmarks/bench_gridpair.py \
    --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled --out "$OUT/h200.json"
run breakdown-bf16 100 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
grep -hE '^(step|part)' "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
