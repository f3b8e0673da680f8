#!/usr/bin/env bash
# Round 8, first H200 call, on the code of round 7: where the eager bf16 force step's host time
# goes now (the breakdown and a cProfile of 30 steps), before cutting it.
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run breakdown-bf16 150 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp --cprofile
grep -hE '^(step|part)' "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
cp "$OUT/breakdown-bf16.log" "$OUT/profile-bf16.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
