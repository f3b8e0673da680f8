#!/usr/bin/env bash
# Round 5, first H200 call (issue 14): early rejection of over-limit candidates at Triton's
# LLVM IR stage. Its tests and the selector's on the GPU; the six cold P147 selections,
# uncapped and under 101376 bytes, serial and with 16 workers; the two capped multi-focus cold
# regressions with their report; where the rest of a cold regression's time goes (phases, then
# cProfile of the same body); what importing Dynamo, Inductor and make_fx's modules costs.
#     OUT=/path/to/output bash docs/evidence/round5_gpu_call1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
: > "$OUT/summary.txt"
versions
run imports 120 python3 -c '
import time; t = time.perf_counter()
import torch, triton; t1 = time.perf_counter(); print(f"torch+triton {t1-t:.2f} s")
import gridpair; t2 = time.perf_counter(); print(f"gridpair {t2-t1:.2f} s")
from torch.fx.experimental.proxy_tensor import make_fx; import torch.fx.experimental.symbolic_shapes; t3 = time.perf_counter(); print(f"make_fx+symbolic_shapes {t3-t2:.2f} s")
import torch._dynamo; t4 = time.perf_counter(); print(f"torch._dynamo {t4-t3:.2f} s")
import torch._inductor.compile_fx; t5 = time.perf_counter(); print(f"torch._inductor.compile_fx {t5-t4:.2f} s")
import torch._inductor.codegen.triton, torch._inductor.runtime.triton_heuristics; t6 = time.perf_counter(); print(f"inductor triton codegen+heuristics {t6-t5:.2f} s")'
run gpu-tests 300 "${PYTEST[@]}" -n 4 tests/gridpair/test_early_rejection.py \
    tests/gridpair/test_selector.py tests/gridpair/test_parallel_selection.py tests/gridpair/test_cuda.py
run selection-uncapped 200 python3 benchmarks/bench_selection.py --cold --profile cuda --workers 1 16 --repeats 2
run selection-capped 200 python3 benchmarks/bench_selection.py --cold --profile cuda --workers 1 16 --repeats 2 --smem-limit 101376
run regressions-cold-smem-101376 150 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json"
for precision in bf16-amp float32; do
    run "phases-$precision" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 \
        python3 docs/evidence/cold_phases.py multi-focus "$precision"
    run "profile-$precision" 150 env PYTEST_COLDCOMPILE_SMEM_LIMIT=101376 python3 -m cProfile \
        -o "$OUT/profile-$precision.pstats" docs/evidence/cold_phases.py multi-focus "$precision"
    python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(45); pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(25)" \
        "$OUT/profile-$precision.pstats" > "$OUT/profile-$precision.txt" 2>&1
    rm -f "$OUT/profile-$precision.pstats"
done
cd "$OUT" && tar czf logs.tgz *.log profile-*.txt && rm -f *.log profile-*.txt && cat summary.txt
