#!/usr/bin/env bash
# The GPU evidence, one step at a time, without installing the project (lib.sh registers the
# plugin and gridpair's selector through a dist-info on PYTHONPATH):
#     OUT=/path/to/output bash docs/evidence/gpu.sh STEP [STEP...]
# Steps (docs/evidence/README.md says which claim each one measures):
#   tests       gridpair's CUDA tests
#   plugin      the plugin's GPU tests (fork, zygote, shared-memory cap, isolation, a kernel
#               that faults the CUDA context)
#   two-gpus    xdist on two GPUs: each worker's cold children see one GPU (nvidia-h200-x2)
#   regressions every cold regression, and the proof in prove mode (the unvalidated selector
#               fails cold: caught; a warm run masks it)
#   gates       every cold regression with the warm-cache check and a compile budget, then
#               against the first run's report as a baseline
#   emulate     device emulation: the named-device and emulation tests (the requires_cuda one
#               too: the real sm_90 compile beside the emulated device's), the emulation bench
#   cold        the capped P147 regressions one after another and two at once, with reports
#   zygote      the same one after another: fork, zygote, zygote preloading the compile stack
#   phases      the phases of one cold capped step per precision, each phase's Triton compiles
#   selection   six cold selections: 1, 4, 8 and 16 validation workers; capped: 4, 8, 16
#   bench       every implementation of the benchmark (benchmarks/results/h200.json)
#   eager       the eager step's host time, split and side by side with unprepared launches
#   isolation   the cold overhead per test and mode (benchmarks/results/isolation-h200.json)
#   sweep       the P147 tile sweep (tuned tiles for gridpair/tuned.py)
#   triton-suite  400 items of Triton's language tests (carried in TRITON_SUITE_DIR), -n 8,
#               in-process then cold: wall times, their ratio, outcomes compared
#               (TRITON_COLD_ARGS: more options of the cold run)
#   first-launch  each phase of a fresh process's first Triton launch in an empty cache, the
#               driver's C utilities compiled per process and shared (triton_first_launch.py)
#   timeline    where a cold GPU test's wall time goes, phase by phase, with CUDA contexts made
#               ahead or in the test and one child forked ahead (cold_child_timeline.py)
#   contexts    whether the driver makes CUDA contexts in parallel: 1 to 16 processes at once
#               (cuda_context_concurrency.py)
#   plain       what a session with no cold test pays for the plugin, NVML's CUDA check against
#               the driver's included (docs/evidence/plain_session_cost.py)
#   suite       the README's test command, `pytest -n 8`, with what the machine lacks installed
#               from wheels carried in .whl/: pytest-forked 1.7.5, pytest-rerunfailures 16.7,
#               pytest-split 0.11.0, numpy 2.3.5 (Triton 3.6's interpreter)
# Each step's command, output and exit status go to $OUT/<name>.log; $OUT/summary.txt keeps the
# lines that carry the evidence. Every call starts with the versions and compiles
# site-packages' bytecode, as an installed environment has it.
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
(($#)) || { sed -n '2,38p' "$0"; exit 2; }

CAP=101376
T=tests/regressions/test_cold_force_loss.py::test_compiled_force_loss_step_cold
SERIAL=("$T[single-focus-packed-bf16-amp]" "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]")
STACK=$'torch\ntriton\ntorch._dynamo\ntorch._functorch.aot_autograd\ntorch._inductor.compile_fx'

records() {  # one line per record of a --cold-compile-report file, into the summary
    python3 - "$1" >> "$OUT/summary.txt" <<'PY'
import json, os, sys
records = json.load(open(sys.argv[1]))
print(os.path.basename(sys.argv[1]), "; ".join(
    f"{test.split('[')[-1].rstrip(']')} {r['outcome']} {r['total_s'] or 0:.1f} s "
    f"(select {r['selection_s'] or 0:.1f}, trace {r['tracing_s'] or 0:.1f}, "
    f"inductor {r['inductor_s'] or 0:.1f}, {r['mode']}{', warmed' if r.get('warmed_ahead') else ''})"
    for test, r in records.items()))
PY
}

step() {
    case "$1" in
    tests)
        run cuda-tests 200 "${PYTEST[@]}" -n 8 tests/gridpair/test_cuda.py \
            tests/gridpair/test_launch.py tests/gridpair/test_early_rejection.py ;;
    plugin)
        run plugin-gpu 300 "${PYTEST[@]}" -p no:randomly -n 4 tests/plugin/test_gpu.py \
            tests/plugin/test_smem.py tests/plugin/test_zygote.py tests/plugin/test_gpu_fork.py \
            tests/plugin/test_fork_ahead.py tests/plugin/test_isolation.py \
            tests/plugin/test_cuda_init.py tests/plugin/test_prove.py tests/plugin/test_gpu_fault.py
        run cold-cuda-after-is-available 120 env COLDCOMPILE_TEST_CUDA_AT_COLLECTION=1 \
            "${PYTEST[@]}" -p no:randomly tests/plugin/test_gpu.py --cold-compile -v \
            -k "test_cold_child_uses_cuda or test_device_facts_match_what_cuda_reports" \
            --cold-compile-report="$OUT/cold-cuda-after-is-available.json" ;;
    two-gpus)
        run xdist-two-gpus 120 "${PYTEST[@]}" -p no:randomly tests/plugin/test_gpu_fork.py -v \
            -n 2 --cold-compile -k test_each_worker_child_sees_one_gpu --junitxml="$OUT/xdist.xml"
        grep -ho 'name="[a-z_]*" value="[^"]*"' "$OUT/xdist.xml" | sort | uniq -c \
            >> "$OUT/summary.txt" ;;
    regressions)
        run regressions-all-cold 200 "${PYTEST[@]}" --cold-compile \
            tests/regressions/test_cold_force_loss.py -n 2 \
            --cold-compile-report="$OUT/all-report.json"
        run prove 240 "${PYTEST[@]}" tests/regressions/test_proof.py -n 4 --cold-compile-prove \
            --cold-compile-report="$OUT/prove-report.json" --junitxml="$OUT/prove.xml"
        python3 - "$OUT/prove-report.json" >> "$OUT/summary.txt" <<'PY'
import json, sys
for test, r in json.load(open(sys.argv[1])).items():
    if r.get("proof"):
        p = r["proof"]
        print("proof", test, p.get("verdict"), p.get("exception"), p.get("masked"))
PY
        ;;
    gates)
        run gates-warm-check 300 "${PYTEST[@]}" --cold-compile --cold-compile-warm-check \
            --cold-compile-budget=120 tests/regressions/test_cold_force_loss.py -n 4 \
            --cold-compile-report="$OUT/warm-check-report.json"
        run gates-baseline 200 "${PYTEST[@]}" --cold-compile tests/regressions/test_cold_force_loss.py \
            -n 4 --cold-compile-baseline="$OUT/warm-check-report.json" \
            --cold-compile-report="$OUT/baseline-report.json" ;;
    emulate)
        run emulate-tests 300 "${PYTEST[@]}" -n 4 tests/plugin/test_emulate.py \
            tests/plugin/test_named_devices.py
        run bench-emulation 120 env TRITON_INTERPRET=1 python3 benchmarks/bench_emulation.py ;;
    cold)
        run regressions-serial 200 "${PYTEST[@]}" -p no:randomly --cold-compile \
            --smem-limit $CAP "${SERIAL[@]}" --cold-compile-report="$OUT/cold-report-serial.json"
        run regressions-n2 120 "${PYTEST[@]}" --cold-compile --smem-limit $CAP \
            "$T[multi-focus-float32]" "$T[multi-focus-bf16-amp]" -n 2 \
            --cold-compile-report="$OUT/cold-report-n2.json"
        records "$OUT/cold-report-serial.json"
        records "$OUT/cold-report-n2.json" ;;
    zygote)
        for round in 1 2; do
            run "fork-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile --smem-limit $CAP \
                "${SERIAL[@]}" --cold-compile-report="$OUT/fork-$round.json"
            run "zygote-default-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile \
                --cold-compile-mode=zygote --smem-limit $CAP "${SERIAL[@]}" \
                --cold-compile-report="$OUT/zygote-default-$round.json"
            run "zygote-stack-$round" 200 "${PYTEST[@]}" -p no:randomly --cold-compile \
                --cold-compile-mode=zygote -o "cold_compile_preload=$STACK" --smem-limit $CAP \
                "${SERIAL[@]}" --cold-compile-report="$OUT/zygote-stack-$round.json"
        done
        for report in "$OUT"/fork-*.json "$OUT"/zygote-*.json; do records "$report"; done ;;
    phases)
        run stage-times 120 python3 docs/evidence/compile_stage_times.py --repeat
        grep -hE '^stages|^driver' "$OUT/stage-times.log" >> "$OUT/summary.txt"
        for precision in bf16-amp float32; do
            run "phases-$precision" 120 env PYTEST_COLDCOMPILE_SMEM_LIMIT=$CAP \
                python3 docs/evidence/cold_phases.py multi-focus "$precision"
            grep -hE '^[a-zA-Z ]+ +[0-9.]+ s|of which|Triton compiles' \
                "$OUT/phases-$precision.log" >> "$OUT/summary.txt"
        done ;;
    selection)
        run selection 200 python3 benchmarks/bench_selection.py --cold --profile cuda \
            --workers 1 4 8 16 --repeats 2
        run selection-capped 200 python3 benchmarks/bench_selection.py --cold --profile cuda \
            --workers 4 8 16 --repeats 2 --smem-limit $CAP
        grep -h '^cold selection' "$OUT"/selection*.log >> "$OUT/summary.txt" ;;
    bench)
        run bench-all 400 python3 benchmarks/bench_gridpair.py \
            --impls fused,fused-ops,fused-compiled,reference-eager,reference-compiled \
            --out "$OUT/h200.json" ;;
    eager)
        for dtype in bf16-amp float32; do
            run "breakdown-$dtype" 60 python3 docs/evidence/eager_host_breakdown.py --dtype "$dtype"
            run "split-$dtype" 60 python3 docs/evidence/eager_step_split.py --dtype "$dtype"
        done
        grep -hE '^(step|part|split)' "$OUT"/breakdown-*.log "$OUT"/split-*.log \
            >> "$OUT/summary.txt" ;;
    isolation)
        # ISOLATION_ARGS narrows the run (every kind and mode takes far longer than one call).
        run bench-isolation 420 python3 benchmarks/bench_isolation.py \
            ${ISOLATION_ARGS:---spawn-tests 2 --repeats 1} --out "$OUT/isolation-h200.json" ;;
    sweep)
        run sweep 500 python3 benchmarks/sweep_tiles.py --out "$OUT/sweep.json" \
            --plan "P147:bf16,fp32" --tuned-out "$OUT/tuned-tiles.json" ;;
    triton-suite)
        # A real third-party GPU suite: 400 items of Triton's language test module, whose
        # collection asks the device (Triton's driver); in-process, then every test cold, -n 8
        # both times. The module is not ours and never committed: carried in TRITON_SUITE_DIR
        # (test_core.py, its conftest and select400.sh; docs/evidence/README.md says where from).
        local dir=${TRITON_SUITE_DIR:-.tp/triton_core}
        run triton-collect 150 bash -c "cd $dir && ${PYTEST[*]} --collect-only -q test_core.py \
            | grep '^test_core.py::' > collected.txt; ./select400.sh collected.txt ids400.txt"
        run triton-in-process 240 bash -c "cd $dir && TRITON_CACHE_DIR=\$(mktemp -d) \
            ${PYTEST[*]} -n 8 @ids400.txt"
        run triton-cold 300 bash -c "cd $dir && ${PYTEST[*]} -n 8 --cold-compile \
            ${TRITON_COLD_ARGS:-} --cold-compile-report=$OUT/triton-cold.json @ids400.txt"
        python3 docs/evidence/compare_runs.py "$OUT/triton-in-process.log" "$OUT/triton-cold.log" \
            >> "$OUT/summary.txt" ;;
    first-launch)
        run first-launch 200 python3 docs/evidence/triton_first_launch.py --runs 3
        grep -hE '^(private|shared)' "$OUT/first-launch.log" >> "$OUT/summary.txt" ;;
    timeline)
        run timeline 300 python3 docs/evidence/cold_child_timeline.py --tests 40
        grep -hE 'per test|first op' "$OUT/timeline.log" >> "$OUT/summary.txt" ;;
    contexts)
        run contexts 200 bash -c "nvidia-smi -q | grep -i persistence; \
            python3 docs/evidence/cuda_context_concurrency.py; \
            python3 docs/evidence/cuda_context_concurrency.py --hold"
        grep -hiE 'at once|persistence' "$OUT/contexts.log" >> "$OUT/summary.txt" ;;
    plain)
        run plain-session 300 python3 docs/evidence/plain_session_cost.py --repeats 3
        grep -hE 'trivial tests|wall .* cpu' "$OUT/plain-session.log" >> "$OUT/summary.txt" ;;
    suite)
        # --target /tmp/site and PYTHONPATH, not site-packages: the machine's own image stays as
        # it is, and the carried numpy shadows its numpy for this step only.
        if compgen -G '.whl/*.whl' > /dev/null; then
            run suite-wheels 120 python3 -m pip install -q --no-index --no-deps --no-compile \
                --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
        fi
        run suite "${SUITE_LIMIT:-540}" env PYTHONPATH="/tmp/site:$PYTHONPATH" "${PYTEST[@]}" -n 8 ;;
    *)
        echo "gpu.sh: unknown step '$1' (see the list at the top of $0)" >&2
        return 2 ;;
    esac
}

for name in "$@"; do  # refuse a misspelt step before spending any device time
    case "$name" in
    tests|plugin|two-gpus|regressions|gates|emulate|cold|zygote|phases|selection|bench|eager|isolation|sweep|plain|suite|triton-suite|first-launch|timeline|contexts) ;;
    *) step "$name"; exit 2 ;;
    esac
done
begin
for name in "$@"; do step "$name"; done
cat "$OUT/summary.txt"
