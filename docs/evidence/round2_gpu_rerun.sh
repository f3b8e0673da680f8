#!/usr/bin/env bash
# The round-2 rerun on the H200: the proof and the two cold P147 regressions, side by side.
#     OUT=/path/to/output bash docs/evidence/round2_gpu_rerun.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
(echo "+ pytest tests/regressions/test_proof.py"; timeout 110 python3 -m pytest -p no:cacheprovider -rA tests/regressions/test_proof.py; echo "# exit $?") > $OUT/proof.log 2>&1 &
(echo "+ pytest --cold-compile --smem-limit 101376 multi-focus regressions, alone"; timeout 110 python3 -m pytest -p no:cacheprovider -rA --cold-compile --smem-limit 101376 tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" -n 2 --cold-compile-report=$OUT/cold-report.json; echo "# exit $?") > $OUT/regressions.log 2>&1 &
wait
tail -3 $OUT/proof.log; tail -25 $OUT/regressions.log
