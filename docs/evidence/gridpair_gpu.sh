#!/usr/bin/env bash
# GPU evidence for gridpair and its cold regressions (issues 2, 3, 6, 7), without installing:
#     OUT=/path/to/output bash docs/evidence/gridpair_gpu.sh PART
# PART "a": versions, the CUDA operator tests (numerics, real handle loading), the cold
# regressions under --cold-compile; PART "b": the regressions and the proof under
# --smem-limit 101376. Each step's command line, output and exit status go to
# $OUT/<step>.log; $OUT/summary-<step>.txt keeps the lines that carry the evidence.
# Later parts run side by side on a two-GPU machine, each on its own GPU (GPU=0 or GPU=1):
# PART "regressions": every regression run at once, with and without --smem-limit 101376, the
# proof and the CUDA operator tests; PART "sweep": the tile sweep; PART "bench": the benchmark
# (BENCH_ARGS passes shapes, impls...).
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh

case "${1:-a}" in
a)
    versions
    run gridpair-cuda 200 "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 2 -s
    run regressions-cold 230 "${PYTEST[@]}" --cold-compile tests/regressions -n 2 \
        -k "not test_b_c" --cold-compile-report="$OUT/regressions-cold.json"
    ;;
b)
    run regressions-cold-smem-101376 260 "${PYTEST[@]}" --cold-compile --smem-limit 101376 \
        tests/regressions -n 2 -k "not test_b_c" \
        --cold-compile-report="$OUT/regressions-cold-smem-101376.json"
    run proof-warm-masks-cold-catches 300 "${PYTEST[@]}" -s \
        tests/regressions/test_proof.py -k test_b_c
    ;;
regressions)
    export CUDA_VISIBLE_DEVICES=${GPU:-0}
    versions
    run regressions-cold "${LIMIT:-500}" "${PYTEST[@]}" --cold-compile tests/regressions -n 4 \
        -k "not test_b_c" --durations=0 --cold-compile-report="$OUT/regressions-cold.json" &
    run regressions-cold-smem-101376 "${LIMIT:-500}" "${PYTEST[@]}" --cold-compile \
        --smem-limit 101376 tests/regressions -n 4 -k "not test_b_c" --durations=0 \
        --cold-compile-report="$OUT/regressions-cold-smem-101376.json" &
    run proof-warm-masks-cold-catches "${LIMIT:-500}" "${PYTEST[@]}" -s \
        tests/regressions/test_proof.py -k test_b_c &
    run gridpair-cuda "${LIMIT:-500}" "${PYTEST[@]}" tests/gridpair/test_cuda.py -n 2 -s &
    wait
    ;;
sweep)
    export CUDA_VISIBLE_DEVICES=${GPU:-1}
    run sweep "${LIMIT:-500}" python3 benchmarks/sweep_tiles.py --out "$OUT/sweep.json" \
        --plan "P147:bf16,fp32;P49:bf16,fp32"
    run bench-probe "${PROBE_LIMIT:-120}" python3 benchmarks/bench_gridpair.py --shapes P147 \
        --impls fused,fused-compiled,reference-eager --out "$OUT/bench-probe.json"
    ;;
tuned-bench)  # sweep SWEEP_PLAN, then benchmark with its tuned tiles (GRIDPAIR_TUNED_TILES)
    export CUDA_VISIBLE_DEVICES=${GPU:-1}
    run sweep-tuned "${SWEEP_LIMIT:-200}" python3 benchmarks/sweep_tiles.py \
        --out "$OUT/sweep-tuned.json" --plan "${SWEEP_PLAN:-P49:bf16}" \
        --tuned-out "$OUT/tuned-tiles.json"
    [ -s "$OUT/tuned-tiles.json" ] && export GRIDPAIR_TUNED_TILES="$OUT/tuned-tiles.json"
    run "bench${GPU:-1}" "${LIMIT:-330}" python3 benchmarks/bench_gridpair.py \
        --out "$OUT/bench${GPU:-1}.json" ${BENCH_ARGS:-}
    ;;
bench)
    export CUDA_VISIBLE_DEVICES=${GPU:-0}
    run "bench${GPU:-0}" "${LIMIT:-500}" python3 benchmarks/bench_gridpair.py \
        --out "$OUT/bench${GPU:-0}.json" ${BENCH_ARGS:-}
    ;;
esac
cat "$OUT/summary.txt"
