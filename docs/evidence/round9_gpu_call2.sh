#!/usr/bin/env bash
# Round 9, second H200 call: an experiment for fp32 (operand rows read again for each grid block,
# freeing registers for larger row blocks; docs/evidence/fp32_reload_experiment.py), six cold
# selections with Triton's installation hash computed first (as a child readied ahead has it),
# and the eager bf16 P147 force step beside its graph time on this lease.
#     OUT=/path/to/output bash docs/evidence/round9_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run selection-hashed 150 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 16 --repeats 2 --hashed
run selection 150 python3 benchmarks/bench_selection.py --cold --profile cuda --workers 16 \
    --repeats 2
grep -h '^cold selection' "$OUT"/selection*.log >> "$OUT/summary.txt"
run bench-force-bf16 120 python3 benchmarks/bench_gridpair.py --shapes P147 --dtypes bf16-amp \
    --passes force --impls fused,reference-eager --out "$OUT/bench-force-bf16.json"
run fp32-reload 300 python3 docs/evidence/fp32_reload_experiment.py
grep -hE '^(fwd|bwd) ' "$OUT/fp32-reload.log" >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
