#!/usr/bin/env bash
# Round 5, third H200 call (issue 14), on the committed code: bytecode compiled once first (as
# an installed environment has it, see call 2); the tests changed this round; the two capped
# multi-focus cold regressions with their report (cold-h200.json) and every regression cold;
# the six capped selections at 4, 8 and 16 workers (is the look-ahead too wide for the GIL?);
# a cold force step with Inductor's compile pool (TORCHINDUCTOR_COMPILE_THREADS=16) against one
# thread, alternating.
#     OUT=/path/to/output bash docs/evidence/round5_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run gpu-tests 300 "${PYTEST[@]}" -n 4 tests/gridpair/test_early_rejection.py \
    tests/gridpair/test_selector.py tests/plugin/test_isolation.py \
    "tests/gridpair/test_cuda.py::test_a_profile_compile_is_the_specialization_the_jit_launches" \
    -k "not xdist"
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
run regressions-all-cold 300 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 4 --cold-compile-report="$OUT/all-report.json"
run selection-capped 200 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 4 8 16 --repeats 2 --smem-limit 101376
run selection-uncapped 100 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2
for round in 1 2; do
    for threads in 1 16; do
        run "inductor-threads-$threads-$round" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
            TORCHINDUCTOR_COMPILE_THREADS=$threads python3 docs/evidence/cold_phases.py multi-focus bf16-amp
    done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
