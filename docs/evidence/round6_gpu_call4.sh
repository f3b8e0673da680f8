#!/usr/bin/env bash
# Round 6, fourth H200 call: the P147 tiles swept again now that launches specialize unit
# strides and multiples of 16 (the built-in table came from sweeps of the unspecialized
# kernels), then the fused P147 force step, eager and compiled, with the built-in table and with
# the swept one, side by side.
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run sweep 330 python3 benchmarks/sweep_tiles.py --out "$OUT/sweep.json" --plan "P147:bf16,fp32" \
    --tuned-out "$OUT/tuned-tiles.json"
run bench-builtin 100 python3 benchmarks/bench_gridpair.py --shapes P147 --passes force \
    --impls fused,fused-compiled --out "$OUT/bench-builtin.json"
[ -s "$OUT/tuned-tiles.json" ] && (export GRIDPAIR_TUNED_TILES="$OUT/tuned-tiles.json" \
    && run bench-swept 100 python3 benchmarks/bench_gridpair.py --shapes P147 --passes force \
    --impls fused,fused-compiled --out "$OUT/bench-swept.json")
grep -hE "^P147 " "$OUT/sweep.log" >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
