#!/usr/bin/env bash
# Round 8, sixth H200 call: where the eager step's host time goes once launches are prepared.
# The breakdown three times (bf16-amp) with a variant that does everything but the kernel
# launch, to tell the launch's own cost in the step from the Python around it.
#     OUT=/path/to/output bash docs/evidence/round8_gpu_call6.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
for i in 1 2 3; do
    run breakdown-bf16-$i 60 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
    grep -hE '^step' "$OUT"/breakdown-bf16-$i.log >> "$OUT/summary.txt"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
