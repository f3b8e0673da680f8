#!/usr/bin/env bash
# Round 7, fourth H200 call: the custom ops take the mixed-precision form too. Traced, they
# cast float32 coefficients to bf16 before the launch (Inductor fuses the cast) and the kernels
# store float32 gradients themselves; on real tensors the kernels round float32 operands as they
# load them. The CUDA tests (the Inductor-specialization test now also under bf16-amp) first;
# only if they pass, the benchmark of every implementation in one run, the capped cold P147
# regressions and the proof.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 200 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
if grep -q '^# exit status 0 ' "$OUT/cuda-tests.log"; then
    run bench-all 320 python3 benchmarks/bench_gridpair.py \
        --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled --out "$OUT/h200.json"
    run regressions-cold-smem-101376 60 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
        tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
        -n 2 --cold-compile-report="$OUT/cold-report.json"
fi
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
