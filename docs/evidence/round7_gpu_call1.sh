#!/usr/bin/env bash
# Round 7, first H200 call: the mixed-precision ops (under autocast float32 coefficients are
# rounded to bfloat16 as the kernels load them; gradients come back in float32). The CUDA tests,
# the P147 force step of every implementation (bf16-amp), the eager breakdown, the proof and
# the two capped cold P147 regressions with their report.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 300 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
run bench-p147-bf16 150 python3 benchmarks/bench_gridpair.py --shapes P147 --passes force \
    --dtypes bf16-amp --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled \
    --out "$OUT/p147-bf16.json"
run breakdown-bf16 100 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
grep -hE '^(step|part)' "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
run proof 200 "${PYTEST[@]}" tests/regressions/test_proof.py -n 3
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
