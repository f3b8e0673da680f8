#!/usr/bin/env bash
# Round 5, second H200 call (issue 14). The H200's Python environment ships without cached
# bytecode and lib.sh forbids writing it, so every process compiled torch's modules from source
# (call 1's profile: builtins.compile 6.8 s of a cold regression). An installed environment has
# its bytecode (pip compiles it at install): compile it once here, first, timed. Then: the
# imports again; the GPU tests of this round's changes; the proof and every regression cold;
# the two capped multi-focus cold regressions with their report (cold-h200.json); their phases.
#     OUT=/path/to/output bash docs/evidence/round5_gpu_call2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
run imports 120 python3 -c '
import time; t = time.perf_counter()
import torch, triton; t1 = time.perf_counter(); print(f"torch+triton {t1-t:.2f} s")
import gridpair; t2 = time.perf_counter(); print(f"gridpair {t2-t1:.2f} s")
from torch.fx.experimental.proxy_tensor import make_fx; t3 = time.perf_counter(); print(f"make_fx {t3-t2:.2f} s")
import torch._dynamo; t4 = time.perf_counter(); print(f"torch._dynamo {t4-t3:.2f} s")
import torch._inductor.compile_fx; t5 = time.perf_counter(); print(f"torch._inductor.compile_fx {t5-t4:.2f} s")'
run gpu-tests 300 "${PYTEST[@]}" -n 4 tests/gridpair/test_early_rejection.py \
    tests/gridpair/test_selector.py tests/gridpair/test_cuda.py \
    tests/plugin/test_isolation.py -k "not xdist"
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
run regressions-all-cold 300 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
    -n 4 --cold-compile-report="$OUT/all-report.json"
run proof 240 "${PYTEST[@]}" tests/regressions/test_proof.py
for precision in bf16-amp float32; do
    run "phases-$precision" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
        python3 docs/evidence/cold_phases.py multi-focus "$precision"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
