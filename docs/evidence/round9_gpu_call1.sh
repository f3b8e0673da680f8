#!/usr/bin/env bash
# Round 9, first H200 call: children readied ahead import torch's compile stack
# (pristine.warm_compile_stack). The warm-ahead test; the capped cold regressions one after
# another in one worker (each child after the first is readied, and warmed, ahead) and, side by
# side, two at once (-n 2: each the first child of its worker, as round 8 measured); the phases
# of one cold step per precision; six cold selections with and without Triton's installation
# hash computed first; the eager step's host split.
#     OUT=/path/to/output bash docs/evidence/round9_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
T=tests/regressions/test_cold_force_loss.py::test_compiled_force_loss_step_cold
run warm-ahead-test 120 "${PYTEST[@]}" tests/plugin/test_fork_ahead.py
run regressions-serial 200 "${PYTEST[@]}" -p no:randomly --cold-compile --smem-limit 101376 \
    "$T[single-focus-packed-bf16-amp]" "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]" \
    --cold-compile-report="$OUT/cold-report-serial.json"
run regressions-n2 100 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]" -n 2 \
    --cold-compile-report="$OUT/cold-report-n2.json"
for precision in bf16-amp float32; do
    run "phases-$precision" 90 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
        python3 docs/evidence/cold_phases.py multi-focus "$precision"
    grep -hE '^[a-zA-Z ]+ +[0-9.]+ s|of which' "$OUT/phases-$precision.log" >> "$OUT/summary.txt"
done
run selection 150 python3 benchmarks/bench_selection.py --cold --profile cuda --workers 16 \
    --repeats 2
run selection-hashed 150 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2 --hashed
grep -h '^cold selection' "$OUT"/selection*.log >> "$OUT/summary.txt"
run split-bf16 60 python3 docs/evidence/eager_step_split.py --dtype bf16-amp
grep -hE '^split' "$OUT"/split-bf16.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
