#!/usr/bin/env bash
# Round 5, fourth H200 call: the front-end lock (one thread at a time in Triton's AST to TTIR)
# on the GPU. Its tests, the parallel selection tests and the compile-count CUDA tests; the six
# selections with 16 workers, capped and not, to compare with calls 1 and 3.
#     OUT=/path/to/output bash docs/evidence/round5_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run gpu-tests 240 "${PYTEST[@]}" -n 4 tests/gridpair/test_early_rejection.py \
    tests/gridpair/test_parallel_selection.py \
    "tests/gridpair/test_cuda.py::test_one_compile_per_probe_and_none_at_launch" \
    "tests/gridpair/test_cuda.py::test_a_profile_compile_is_the_specialization_the_jit_launches" \
    "tests/gridpair/test_cuda.py::test_compiled_force_step_runs_validated_kernels"
run selection-capped 120 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2 --smem-limit 101376
run selection-uncapped 100 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
