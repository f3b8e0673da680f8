#!/usr/bin/env bash
# Round 3 on the H200, issue 15 first look: the eager step's host time through grid_pair's eager
# path and through the custom ops, the P147 force benchmark with both, the suspect 64-row
# tf32x3 tile under compute-sanitizer, and Nsight Compute on the fp32 kernels.
#     OUT=/path/to/output bash docs/evidence/round3_gpu_perf.sh [steps...]
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
steps=${*:-"versions profile bench sanitizer ncu"}
for step in $steps; do case $step in
versions) versions
    run importtime 60 bash -c 'python3 -X importtime -c "import torch, triton" 2> /tmp/base.txt; python3 -X importtime -c "import gridpair" 2> /tmp/gp.txt; for f in /tmp/base.txt /tmp/gp.txt; do echo "== $f: top 12 cumulative (us)"; sort -t"|" -k2 -n -r $f | head -12; done; python3 -c "
import time, importlib; t=time.perf_counter(); import torch, triton; b=time.perf_counter(); import gridpair; e=time.perf_counter(); print(f\"import torch+triton {b-t:.2f} s, gridpair beyond them {e-b:.3f} s\")"' ;;
profile) run profile-bf16 150 python3 benchmarks/profile_eager.py --dtype bf16-amp --steps 30
    run profile-fp32 150 python3 benchmarks/profile_eager.py --dtype float32 --steps 30 ;;
bench) run bench-p147-force 300 python3 benchmarks/bench_gridpair.py --shapes P147 --passes force \
        --impls fused,fused-ops,fused-compiled,reference-eager --out "$OUT/bench-p147-force.json" ;;
sanitizer) for op in fwd bwd bwd2; do
        run sanitizer-$op 120 compute-sanitizer --tool memcheck python3 docs/evidence/tile_check.py --op $op --tile 64,32,2,8,tf32x3
    done ;;
ncu) for op in fwd bwd bwd2; do
        tile=$(case $op in bwd2) echo 16,64,2,8,tf32x3;; *) echo 16,32,2,4,tf32x3;; esac)
        run ncu-fp32-$op 120 ncu -k regex:grid_pair --section SpeedOfLight --section Occupancy \
            --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
            --section WarpStateStats python3 docs/evidence/tile_check.py --op $op --tile $tile
    done ;;
esac; done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
