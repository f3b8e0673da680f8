#!/usr/bin/env bash
# GPU evidence for pytest-coldcompile: issue 4 items 7 and 9, issue 5 item 5.
#
# Run from anywhere in the repository, on a machine with 2 GPUs, without installing it:
#     OUT=/path/to/output PYTHONPATH=. bash docs/evidence/plugin_gpu.sh
# Everything goes to $OUT: one log per step (the command line first, then its output and exit
# status), JUnit XML and cold-compile JSON reports, and summary.txt with the lines that carry
# the evidence. The steps share a time budget so the whole script ends within 6 minutes.
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Absolute entries: pytester runs pytest from temporary directories, where "." is elsewhere.
ABS_PATH=$(python3 -c 'import os, sys; print(os.pathsep.join(os.path.abspath(p) for p in sys.argv[1].split(os.pathsep) if p))' "${PYTHONPATH:-}")
cd "$(dirname "$0")/../.."
REPO=$(pwd)
BUDGET=${BUDGET:-330}
PY=${PYTHON:-python}

# An installation registers the plugin (pytest11) and the selector entry points; a dist-info
# directory on PYTHONPATH does the same without installing anything.
DIST=$(mktemp -d)
trap 'rm -rf "$DIST"' EXIT
mkdir "$DIST/pytest_coldcompile-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: pytest-coldcompile\nVersion: 0.1.0\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/METADATA"
printf '[pytest11]\ncoldcompile = pytest_coldcompile.plugin\n\n[pytest_coldcompile.selectors]\ngridpair = gridpair:SELECTOR\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/entry_points.txt"
export PYTHONPATH="$DIST:$REPO${ABS_PATH:+:$ABS_PATH}"
export PYTHONDONTWRITEBYTECODE=1

: > "$OUT/summary.txt"
# The lines of a log that carry the evidence: outcomes, the cold-compile mode and why, the
# cold summary table, the pytest process's CUDA state, the final count, the xdist check.
EVIDENCE='^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) |^[0-9]+ run as |^pytest process: '
EVIDENCE+='|^cold-compile: |^test +outcome +compile s|::[^ ]+ +(passed|failed|error|skipped|xfailed|xpassed) '
EVIDENCE+='|^=+ .*[0-9]+ (passed|failed|skipped|error)|^[0-9]+ (passed|failed|skipped|error)|^worker=|^each worker|^(python|torch|triton|pytest) |^GPU '

# step NAME SECONDS COMMAND...: run COMMAND with its output in $OUT/NAME.log, within SECONDS
# and within what is left of the budget.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS))
    ((limit > left)) && limit=$left
    local log="$OUT/$name.log"
    if ((limit < 15)); then
        echo "not run: the time budget is spent: $*" > "$log"
        echo "== $name: not run (time budget spent)" >> "$OUT/summary.txt"
        return
    fi
    local began=$SECONDS
    { echo "+ $*"; echo "# started $(date -u +%FT%TZ), limit ${limit}s"; } > "$log"
    timeout -k 5 "$limit" "$@" >> "$log" 2>&1
    local rc=$?
    echo "# exit status $rc after $((SECONDS - began))s" >> "$log"
    {
        echo "== $name: exit status $rc after $((SECONDS - began))s"
        echo "   $*"
        grep -E "$EVIDENCE" "$log" | tail -n 60 | sed 's/^/   /'
    } >> "$OUT/summary.txt"
}

PYTEST=("$PY" -m pytest -p no:cacheprovider -p no:randomly)

step versions 60 bash -c "
    $PY - <<'EOF'
import platform, sys
import pytest, torch, triton
try:
    import xdist
    xdist_version = xdist.__version__
except ImportError:
    xdist_version = 'not installed'
print('python', sys.version.split()[0], platform.platform())
print('torch', torch.__version__, 'cuda', torch.version.cuda)
print('triton', triton.__version__)
print('pytest', pytest.__version__, 'xdist', xdist_version)
EOF
    nvidia-smi -L || true
    nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv || true
    echo CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES-unset}
    git log -1 --format='commit %H %s' 2>/dev/null || true"

# Issue 4 item 9: collection calls torch.cuda.is_available() (test_gpu.py does at import when
# asked to); the cold tests compile and run on CUDA under --cold-compile (auto: spawn); the
# summary's last line says whether the pytest process itself initialized CUDA.
step issue4-item9-cold-cuda-after-is_available 100 \
    env COLDCOMPILE_TEST_CUDA_AT_COLLECTION=1 \
    "${PYTEST[@]}" tests/plugin/test_gpu.py --cold-compile -v -rA \
    -k "test_cold_child_uses_cuda or test_device_facts_match_what_cuda_reports" \
    --junitxml="$OUT/item9.xml" --cold-compile-report="$OUT/item9.json"

# Issue 5 item 5: a Triton kernel over 101376 bytes loads without the marker and fails with
# Triton's OutOfResources under smem_limit(101376) (cold and in-process), Inductor's static
# launcher refuses it under the cap, and device markers against the real device.
step issue5-item5-smem-cap-kernels 150 \
    "${PYTEST[@]}" tests/plugin/test_gpu.py -v -rA -k "not test_inductor_kernels_stay_under_the_cap" \
    --junitxml="$OUT/smem.xml" --cold-compile-report="$OUT/smem.json"

# Issue 5 item 5: Inductor-generated kernels (max-autotune matmul templates, pruned through
# shared_memory_per_block_optin, loaded by the static launcher) under the cap.
step issue5-item5-smem-cap-inductor 120 \
    "${PYTEST[@]}" tests/plugin/test_gpu.py -v -rA -k test_inductor_kernels_stay_under_the_cap \
    --junitxml="$OUT/smem-inductor.xml" --cold-compile-report="$OUT/smem-inductor.json"

# Issue 4 item 7: xdist -n 2 --cold-compile on 2 GPUs; each worker's children see one GPU.
step issue4-item7-xdist-two-gpus 90 \
    "${PYTEST[@]}" tests/plugin/test_gpu_fork.py -v -rA -n 2 --cold-compile \
    -k test_each_worker_child_sees_one_gpu --junitxml="$OUT/xdist.xml"

step issue4-item7-xdist-check 30 "$PY" - "$OUT/xdist.xml" <<'EOF'
import sys
from xml.etree import ElementTree

rows = []
for case in ElementTree.parse(sys.argv[1]).iter("testcase"):
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    rows.append((props.get("worker"), props.get("cuda_visible_devices"),
                 props.get("device_count"), props.get("gpu"), case.get("name")))
for row in sorted(rows, key=str):
    print("worker=%s CUDA_VISIBLE_DEVICES=%s device_count=%s gpu=%s test=%s" % row)
by_worker = {}
for worker, visible, count, gpu, _ in rows:
    by_worker.setdefault(worker, set()).add((visible, count, gpu))
ok = len(rows) == 4 and len(by_worker) == 2 and all(
    len(seen) == 1 and next(iter(seen))[1] == "1" for seen in by_worker.values()
) and len({next(iter(seen))[2] for seen in by_worker.values()}) == 2
print("each worker's children saw one GPU, and the two workers different GPUs:", ok)
sys.exit(0 if ok else 1)
EOF

# Forked children using CUDA (nothing touched CUDA before the fork server was forked), and a
# Triton kernel compiled by an in-process test that a later cold test does not inherit.
step issue4-fork-mode-cuda 75 \
    "${PYTEST[@]}" tests/plugin/test_gpu_fork.py -v -rA -k "not test_each_worker_child_sees_one_gpu"

# The plugin's own pytester suite on this machine's Python, torch and triton.
step plugin-suite 200 \
    "${PYTEST[@]}" tests/plugin -q -rfEs -n 8 \
    --ignore=tests/plugin/test_gpu.py --ignore=tests/plugin/test_gpu_fork.py

echo "total ${SECONDS}s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
