#!/usr/bin/env bash
# Round 6, seventh H200 call, on the final code: the CUDA tests after the eager path's key
# check, and the eager P147 bf16 force step's peak memory through grid_pair's eager path and
# through the custom ops, twice (call 5 had them at 210 and 146 MiB).
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call7.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run cuda-tests 300 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py tests/gridpair/test_launch.py
for round in 1 2; do
    run "memory-$round" 100 python3 benchmarks/bench_gridpair.py --shapes P147 --passes force \
        --dtypes bf16-amp --impls fused,fused-ops --out "$OUT/memory-$round.json"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
