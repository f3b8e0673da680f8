#!/usr/bin/env bash
# Round 10, first H200 call: where a cold capped force step's Inductor phase goes. The phases of
# one cold step per precision with the Triton compiles of each phase listed (validation's, and
# Inductor's compiles of gridpair's kernels and of its own), in-process as a cold child compiles
# (compile_threads=1) and with Inductor's compile worker pool started and awaited in the
# warm-up phase; each compile stage of the six shipped P147 kernels on this host's CPU, and
# Triton's CUDA driver helper built into an empty cache.
#     OUT=/path/to/output bash docs/evidence/round10_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run stage-times 120 python3 docs/evidence/compile_stage_times.py --repeat
grep -hE '^stages|^driver' "$OUT/stage-times.log" >> "$OUT/summary.txt"
for workers in 1 16 1 16; do
    for precision in float32 bf16-amp; do
        name="phases-$precision-workers$workers"
        [ -e "$OUT/$name.log" ] && name="$name-again"
        run "$name" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
            COLD_PHASES_INDUCTOR_WORKERS=$workers \
            python3 docs/evidence/cold_phases.py multi-focus "$precision"
        grep -hE '^[a-zA-Z ]+ +[0-9.]+ s|of which|Triton compiles' "$OUT/$name.log" \
            >> "$OUT/summary.txt"
    done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
