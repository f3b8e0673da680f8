#!/usr/bin/env bash
# Round 7, second H200 call, on the committed code: only grid_pair's eager path reads float32
# coefficients under autocast; the custom ops (what tracing sees) cast first again, which call 1
# measured faster and leaner compiled. The CUDA tests, the benchmark of every implementation in
# one run (benchmarks/results/h200.json, the README's table and chart), the capped cold P147
# regressions (cold-h200.json) and six cold selections.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 200 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
run bench-all 340 python3 benchmarks/bench_gridpair.py \
    --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled --out "$OUT/h200.json"
run regressions-cold-smem-101376 100 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
