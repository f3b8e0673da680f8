#!/usr/bin/env bash
# Round 8, fourth H200 call: prepared eager launches, and gridpair's front-end lock no longer
# hides ASTSource.make_ir's signature from wrap_triton (which then failed to analyse our
# kernels and took every operand for written). The CUDA tests first; only if they pass, the
# benchmark of every implementation in one run, the capped cold P147 regressions, and the
# eager step's host split.
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 150 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py \
    tests/gridpair/test_early_rejection.py
if grep -q '^# exit status 0 ' "$OUT/cuda-tests.log"; then
    run bench-all 320 python3 benchmarks/bench_gridpair.py \
        --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled --out "$OUT/h200.json"
    run regressions-cold-smem-101376 60 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
        tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
        -n 2 --cold-compile-report="$OUT/cold-report.json"
    run split-bf16 30 python3 docs/evidence/eager_step_split.py --dtype bf16-amp
    grep -hE '^split' "$OUT"/split-bf16.log >> "$OUT/summary.txt"
fi
grep -c "assuming every input is mutated\|missing 3 required positional" "$OUT"/*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
