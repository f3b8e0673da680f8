#!/usr/bin/env bash
# Round 10, third H200 call: a zygote that preloads torch's compile stack. Preloads now import
# with their caches in a scratch directory (importing torch._dynamo creates Inductor's cache
# directory), so cold_compile_preload may list Dynamo, AOTAutograd and Inductor: every zygote
# child, the first included, then starts with them imported. The zygote and isolation tests on
# this torch; then the capped cold regressions one after another in one worker, alternating
# fork (auto: the first child imports the stack itself, later ones are readied and warmed ahead),
# the zygote with its default preload (torch, triton), and the zygote with the compile stack.
#     OUT=/path/to/output bash docs/evidence/round10_gpu_call3.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
begin
T=tests/regressions/test_cold_force_loss.py::test_compiled_force_loss_step_cold
TESTS=("$T[single-focus-packed-bf16-amp]" "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]")
STACK=$'torch\ntriton\ntorch._dynamo\ntorch._functorch.aot_autograd\ntorch._inductor.compile_fx'
run plugin-tests 200 "${PYTEST[@]}" tests/plugin/test_zygote.py tests/plugin/test_isolation.py \
    -k "zygote or dynamo_package or private_caches"
for round in 1 2; do
    run "fork-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile --smem-limit 101376 \
        "${TESTS[@]}" --cold-compile-report="$OUT/fork-$round.json"
    run "zygote-default-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile \
        --cold-compile-mode=zygote --smem-limit 101376 "${TESTS[@]}" \
        --cold-compile-report="$OUT/zygote-default-$round.json"
    run "zygote-stack-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile \
        --cold-compile-mode=zygote -o "cold_compile_preload=$STACK" --smem-limit 101376 \
        "${TESTS[@]}" --cold-compile-report="$OUT/zygote-stack-$round.json"
done
for report in "$OUT"/fork-*.json "$OUT"/zygote-*.json; do
    python3 - "$report" >> "$OUT/summary.txt" <<'PY'
import json, os, sys
records = json.load(open(sys.argv[1]))
print(os.path.basename(sys.argv[1]), "; ".join(
    f"{test.split('[')[-1].rstrip(']')} {r['outcome']} {r['total_s']:.1f} s "
    f"(select {r['selection_s']:.1f}, trace {r['tracing_s']:.1f}, inductor {r['inductor_s']:.1f}, "
    f"{r['mode']}{', warmed' if r.get('warmed_ahead') else ''})"
    for test, r in records.items()))
PY
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log && cat summary.txt
