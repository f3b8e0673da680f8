#!/usr/bin/env bash
# Round 3, issue 15 item 2 on the H200: fp32 tiles with more warps (less register pressure per
# thread) timed against the tuned ones, and the 64-row 8-warp tf32x3 forward tiles that fit the
# device, each under compute-sanitizer.
#     OUT=/path/to/output bash docs/evidence/round3_gpu_fp32.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
: > "$OUT/summary.txt"
export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=0
for tile in 64,16,1,8,tf32x3 64,16,2,8,tf32x3 64,16,3,8,tf32x3 64,32,1,8,tf32x3; do
    run "sanitizer-fwd-$tile" 150 compute-sanitizer --tool memcheck python3 docs/evidence/tile_check.py --op fwd --tile $tile &
done
wait
D=tf32x3
run times-fwd 150 python3 docs/evidence/fp32_tile_times.py --op fwd --tiles 16,32,2,4,$D 16,32,2,8,$D 16,64,2,8,$D 32,32,2,8,$D 32,16,2,8,$D 16,16,2,4,$D 32,32,1,8,$D 16,32,3,8,$D
run times-bwd 200 python3 docs/evidence/fp32_tile_times.py --op bwd --tiles 16,32,2,4,$D 16,32,2,8,$D 16,16,2,8,$D 16,16,2,4,$D 32,16,2,8,$D 16,64,2,8,$D 32,32,2,8,$D 16,16,1,8,$D 32,16,1,8,$D
run times-bwd2 200 python3 docs/evidence/fp32_tile_times.py --op bwd2 --tiles 16,64,2,8,$D 16,32,2,8,$D 16,16,2,8,$D 16,16,1,8,$D 16,32,1,8,$D 32,16,1,8,$D 16,16,2,4,$D
cd "$OUT" && grep -h -E "^\+|ERROR SUMMARY|relative errors|out of resource|illegal" sanitizer-*.log
grep -h -v "^2026" times-*.log
tar czf logs.tgz *.log && rm -f *.log
