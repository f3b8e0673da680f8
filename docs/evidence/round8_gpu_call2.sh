#!/usr/bin/env bash
# Round 8, second H200 call, on the code of round 7: the eager bf16 force step's host time split
# by grid_pair's parts inside the step (docs/evidence/eager_step_split.py).
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run split-bf16 150 python3 docs/evidence/eager_step_split.py --dtype bf16-amp
run breakdown-bf16 150 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
grep -hE '^(split|step|part)' "$OUT"/split-bf16.log "$OUT"/breakdown-bf16.log >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
