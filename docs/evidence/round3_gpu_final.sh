#!/usr/bin/env bash
# Round 3, last H200 call (issue 14): cold selection of the six force-step ops and the cold P147
# regressions under --smem-limit 101376 after the look-ahead at a ladder's head, then the cold
# step's wall time phase by phase in fresh processes, and the eager host profile.
#     OUT=/path/to/output bash docs/evidence/round3_gpu_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
: > "$OUT/summary.txt"
run selection-cold 100 python3 benchmarks/bench_selection.py --cold --workers 1 16 --repeats 1
run regressions-cold-smem-101376 120 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
for precision in bf16-amp float32; do
    run "phases-$precision" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
        python3 docs/evidence/cold_phases.py multi-focus $precision
done
run profile-bf16 100 python3 benchmarks/profile_eager.py --dtype bf16-amp --steps 30
cd "$OUT" && grep -h -v "^2026" selection-cold.log phases-*.log; grep -h "^== " profile-bf16.log
tar czf logs.tgz *.log && rm -f *.log
