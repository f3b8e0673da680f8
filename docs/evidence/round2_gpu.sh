#!/usr/bin/env bash
# GPU evidence for the second round (issues 11, 12, 14), in one call of the device tool:
#     OUT=/path/to/output bash docs/evidence/round2_gpu.sh
# Phase 1 runs the isolation benchmark alone (its timings must not share the machine); phase 2
# runs the CUDA operator tests, the cold P147 force-step regressions under --smem-limit 101376
# with the cold report, the proof (an unvalidated selector fails cold, a warm run masks it),
# cold launch selection of the six force-step ops, and the plugin's GPU tests side by side.
# Each step's command, output and exit status go to $OUT/<step>.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh

: > "$OUT/summary.txt"
versions

# Phase 1, alone: issue 11's isolation benchmark.
run bench-isolation "${ISOLATION_LIMIT:-200}" python3 benchmarks/bench_isolation.py --spawn-tests 2 \
    --out "$OUT/isolation-h200.json"

# Phase 2, side by side.
run gridpair-cuda "${LIMIT:-260}" "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 3 &
run regressions-cold-smem-101376 "${LIMIT:-260}" "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json" &
run selection-cold "${LIMIT:-260}" python3 benchmarks/bench_selection.py --cold --workers 1 4 --repeats 1 &
run proof "${LIMIT:-260}" "${PYTEST[@]}" tests/regressions/test_proof.py &
run plugin-gpu "${LIMIT:-260}" "${PYTEST[@]}" tests/plugin/test_gpu.py tests/plugin/test_gpu_fork.py \
    --cold-compile-report="$OUT/plugin-gpu-report.json" &
wait
cat "$OUT/summary.txt"
