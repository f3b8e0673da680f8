#!/usr/bin/env bash
# Round 7, sixth H200 call, on the final commit (after call 4 only documentation and tests
# changed; kernels.py's module docstring moved the kernels' line numbers): the CUDA tests.
#     OUT=/path/to/output bash docs/evidence/round7_gpu_call6.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 150 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
