# Shared by the GPU evidence scripts (sourced, not run): register the plugin and gridpair's
# selector as an installation would, and `run NAME SECONDS COMMAND...`, which keeps the command
# line, output and exit status in $OUT/NAME.log and the lines that carry the evidence in
# $OUT/summary.txt. Needs OUT and the repository root as the working directory.
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The GPU machine cannot install the project: a dist-info on PYTHONPATH declares the pytest11
# and selector entry points instead.
DIST=$(mktemp -d)
mkdir "$DIST/pytest_coldcompile-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: pytest-coldcompile\nVersion: 0.1.0\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/METADATA"
printf '[pytest11]\ncoldcompile = pytest_coldcompile.plugin\n\n[pytest_coldcompile.selectors]\ngridpair = gridpair:SELECTOR\n' \
    > "$DIST/pytest_coldcompile-0.1.0.dist-info/entry_points.txt"
export PYTHONPATH="$DIST:$(pwd)" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PYTEST=(python3 -m pytest -p no:cacheprovider -rA)

run() {  # run NAME SECONDS COMMAND...
    local name=$1 limit=$2 began=$SECONDS
    shift 2
    { echo "+ $*"; date -u +%FT%TZ; } > "$OUT/$name.log"
    timeout -k 5 "$limit" "$@" >> "$OUT/$name.log" 2>&1
    local rc=$?
    echo "# exit status $rc after $((SECONDS - began))s" >> "$OUT/$name.log"
    { echo "== $name: exit $rc, $((SECONDS - began))s: $*"
      grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL) |^=+ .*(passed|failed|error)|^cold-compile: |^[0-9]+ run as |^pytest process|^test  |^\.\.\..*(passed|failed)|^tests/.*(passed|failed)|^\| |^P[0-9]+[ -]|^compiled ' "$OUT/$name.log" | tail -n 60
    } >> "$OUT/summary.txt"
}

versions() {  # Python, torch, triton, pytest and each GPU's opt-in shared memory per block
    run versions 60 bash -c 'python3 -c "import sys, torch, triton, pytest; print(sys.version.split()[0], \"torch\", torch.__version__, \"triton\", triton.__version__, \"pytest\", pytest.__version__); [print(i, torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).shared_memory_per_block_optin) for i in range(torch.cuda.device_count())]"; nvidia-smi -L'
}

bytecode() {  # compile site-packages' bytecode once, as an installed environment has it: the
    # GPU machine's ships without, and PYTHONDONTWRITEBYTECODE above keeps imports from writing it
    local site
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    run bytecode 300 bash -c "time python3 -m compileall -q -j 0 $site > /dev/null; echo compiled $site"
}

begin() {  # a call's first steps: an empty summary, the versions, the bytecode
    : > "$OUT/summary.txt"
    versions
    bytecode
}
