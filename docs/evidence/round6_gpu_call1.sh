#!/usr/bin/env bash
# Round 6, first H200 call: where the eager force step's host time goes (the step against a
# stand-in with no kernels, and one launch's parts), and which specialization Inductor compiles
# our kernels with.
#     OUT=/path/to/output bash docs/evidence/round6_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run breakdown-bf16 200 python3 docs/evidence/eager_host_breakdown.py --dtype bf16-amp
run breakdown-fp32 200 python3 docs/evidence/eager_host_breakdown.py --dtype float32
run inductor-spec 200 env TORCH_LOGS=output_code python3 docs/evidence/inductor_specialization.py
grep -hE '^(step|part|fwd tile|bare|torch )' "$OUT"/breakdown-*.log >> "$OUT/summary.txt"
grep -hE -A4 'triton_meta|JIT cache entry|compiled == eager' "$OUT/inductor-spec.log" | head -80 >> "$OUT/summary.txt"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
