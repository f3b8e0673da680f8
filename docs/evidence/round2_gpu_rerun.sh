set -uo pipefail
OUT=${OUT:?}
DIST=$(mktemp -d); mkdir "$DIST/pytest_coldcompile-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: pytest-coldcompile\nVersion: 0.1.0\n' > "$DIST/pytest_coldcompile-0.1.0.dist-info/METADATA"
printf '[pytest11]\ncoldcompile = pytest_coldcompile.plugin\n\n[pytest_coldcompile.selectors]\ngridpair = gridpair:SELECTOR\n' > "$DIST/pytest_coldcompile-0.1.0.dist-info/entry_points.txt"
export PYTHONPATH="$DIST:$PWD" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
(echo "+ pytest tests/regressions/test_proof.py"; timeout 110 python3 -m pytest -p no:cacheprovider -rA tests/regressions/test_proof.py; echo "# exit $?") > $OUT/proof.log 2>&1 &
(echo "+ pytest --cold-compile --smem-limit 101376 multi-focus regressions, alone"; timeout 110 python3 -m pytest -p no:cacheprovider -rA --cold-compile --smem-limit 101376 tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" -n 2 --cold-compile-report=$OUT/cold-report.json; echo "# exit $?") > $OUT/regressions.log 2>&1 &
wait
tail -3 $OUT/proof.log; tail -25 $OUT/regressions.log
