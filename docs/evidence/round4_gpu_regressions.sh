#!/usr/bin/env bash
# Round 4, second H200 call (issue 14): the cold P147 regressions, judged against float64 of
# the reference composition now (no eager fused step, no second selection): first the two
# multi-focus ones under --smem-limit 101376 with their cold report (cold-h200.json), then the
# whole regression module without a limit (production layouts and the forced fallbacks).
#     OUT=/path/to/output bash docs/evidence/round4_gpu_regressions.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
: > "$OUT/summary.txt"
versions
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
run regressions-all 200 "${PYTEST[@]}" tests/regressions/test_cold_force_loss.py -n 4 \
    --cold-compile-report="$OUT/all-report.json"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
