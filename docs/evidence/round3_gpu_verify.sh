#!/usr/bin/env bash
# Round 3 on the H200 (issues 11, 14, 15), one call of the device tool:
#     OUT=/path/to/output bash docs/evidence/round3_gpu_verify.sh
# Timed steps run alone, one after another: the isolation benchmark, cold selection of the six
# force-step ops, the cold P147 force-step regressions under --smem-limit 101376 with the cold
# report. Then, side by side: the CUDA operator tests (the eager path included), the proof (an
# unvalidated selector fails cold, a warm run masks it) and the plugin's GPU tests.
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh

: > "$OUT/summary.txt"
versions
run bench-isolation 170 python3 benchmarks/bench_isolation.py --spawn-tests 2 \
    --out "$OUT/isolation-h200.json"
run selection-cold 100 python3 benchmarks/bench_selection.py --cold --workers 1 16 --repeats 1
run regressions-cold-smem-101376 120 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
run gridpair-cuda 170 "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 3 &
run proof 170 "${PYTEST[@]}" tests/regressions/test_proof.py &
run plugin-gpu 170 "${PYTEST[@]}" tests/plugin/test_gpu.py tests/plugin/test_gpu_fork.py &
wait
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
