#!/usr/bin/env bash
# GPU evidence for the second round (issues 11, 12, 14), in one call of the device tool:
#     OUT=/path/to/output bash docs/evidence/round2_gpu.sh
# Phase 1 runs the isolation benchmark alone (its timings must not share the machine); phase 2
# runs the CUDA operator tests, the cold P147 force-step regressions under --smem-limit 101376
# with the cold report, the proof (an unvalidated selector fails cold, a warm run masks it),
# cold launch selection of the six force-step ops, and the plugin's GPU tests side by side. Each step's command, output and exit status go to $OUT/<step>.log.
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.."
REPO=$(pwd)
# An installation registers the plugin (pytest11) and gridpair's selector entry point; a
# dist-info on PYTHONPATH does the same without installing (the GPU machine cannot install).
DIST=$(mktemp -d)
mkdir "$DIST/pytest_coldcompile-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: pytest-coldcompile\nVersion: 0.1.0\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/METADATA"
printf '[pytest11]\ncoldcompile = pytest_coldcompile.plugin\n\n[pytest_coldcompile.selectors]\ngridpair = gridpair:SELECTOR\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/entry_points.txt"
export PYTHONPATH="$DIST:$REPO" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PYTEST=(python3 -m pytest -p no:cacheprovider -rA)

run() {  # run NAME SECONDS COMMAND...
    local name=$1 limit=$2 began=$SECONDS
    shift 2
    { echo "+ $*"; date -u +%FT%TZ; } > "$OUT/$name.log"
    timeout -k 5 "$limit" "$@" >> "$OUT/$name.log" 2>&1
    local rc=$?
    echo "# exit status $rc after $((SECONDS - began))s" >> "$OUT/$name.log"
    { echo "== $name: exit $rc, $((SECONDS - began))s: $*"
      grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL) |^=+ .*(passed|failed|error)|^cold-compile: |^[0-9]+ run as |^pytest process|^test  |^\.\.\..*(passed|failed)|^tests/.*(passed|failed)|^mode |^plain|^auto|^fork|^zygote|^spawn|^workers|^six ' "$OUT/$name.log" | tail -n 60
    } >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
run versions 60 bash -c 'python3 -c "import sys, torch, triton, pytest; print(sys.version.split()[0], \"torch\", torch.__version__, \"triton\", triton.__version__, \"pytest\", pytest.__version__); [print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).shared_memory_per_block_optin) for i in range(torch.cuda.device_count())]"; nvidia-smi -L; nproc'

# Phase 1, alone: issue 11's isolation benchmark.
run bench-isolation "${ISOLATION_LIMIT:-200}" python3 benchmarks/bench_isolation.py --spawn-tests 2 \
    --out "$OUT/isolation-h200.json"

# Phase 2, side by side.
run gridpair-cuda "${LIMIT:-260}" "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 3 &
run regressions-cold-smem-101376 "${LIMIT:-260}" "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
    tests/regressions/test_cold_force_loss.py -k "test_compiled_force_loss_step_cold and multi-focus" \
    -n 2 --cold-compile-report="$OUT/cold-report.json" &
run selection-cold "${LIMIT:-260}" python3 benchmarks/bench_selection.py --cold --workers 1 4 --repeats 1 &
run proof "${LIMIT:-260}" "${PYTEST[@]}" tests/regressions/test_proof.py &
run plugin-gpu "${LIMIT:-260}" "${PYTEST[@]}" tests/plugin/test_gpu.py tests/plugin/test_gpu_fork.py \
    --cold-compile-report="$OUT/plugin-gpu-report.json" &
wait
cat "$OUT/summary.txt"
