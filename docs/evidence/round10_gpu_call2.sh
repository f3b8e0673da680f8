#!/usr/bin/env bash
# Round 10, second H200 call: how many validation threads a cold capped force step should use.
# Call 1 showed, under the 101376-byte cap, 10 bf16 forward candidates compiling at once after
# the first refusal (workers - 1 = 15 ahead), each 2-3x slower than alone, and compiles validated
# ahead still running through Inductor's compile. The phases of one cold step per precision with
# GRIDPAIR_VALIDATION_WORKERS 4, 8 and 16 (the default here: the CPUs), twice each, and six cold
# selections, uncapped and capped, at 4, 8 and 16 workers.
#     OUT=/path/to/output bash docs/evidence/round10_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
for round in 1 2; do
    for workers in 4 8 16; do
        for precision in bf16-amp float32; do
            name="phases-$precision-validation$workers-$round"
            run "$name" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
                GRIDPAIR_VALIDATION_WORKERS=$workers \
                python3 docs/evidence/cold_phases.py multi-focus "$precision"
            { echo "-- $name"; grep -hE '^(make_fx|torch.compile|  of which)' "$OUT/$name.log"; } \
                >> "$OUT/summary.txt"
        done
    done
done
run selection 200 python3 benchmarks/bench_selection.py --cold --profile cuda --workers 4 8 16 \
    --repeats 2
run selection-capped 200 python3 benchmarks/bench_selection.py --cold --profile cuda \
    --workers 4 8 16 --repeats 2 --smem-limit 101376
grep -h '^cold selection' "$OUT"/selection*.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
