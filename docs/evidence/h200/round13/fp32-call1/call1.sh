#!/bin/bash
# fp32 variants side by side, ncu profiles of the key kernels, the force-step baseline.
cd "$(dirname "$0")"
export PYTHONPATH=$(pwd) PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L
{ python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"; nvidia-smi -L; which ncu; } > $L/versions.log 2>&1
timeout 230 python3 docs/evidence/fp32_variants.py > $L/variants.log 2>&1; echo "exit $?" >> $L/variants.log
SECS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats"
for p in bwd,shipped,16,32,2,4,tf32x3 bwd,chunk,16,16,1,4,tf32x3 fwd,chunk,16,16,1,4,tf32x3; do
  op=${p%%,*}
  timeout 60 ncu --clock-control none $SECS -k regex:$op python3 docs/evidence/fp32_variants.py --profile $p > $L/ncu-${p//,/-}.log 2>&1; echo "exit $?" >> $L/ncu-${p//,/-}.log
done
timeout 100 python3 benchmarks/bench_gridpair.py --shapes P147 --dtypes float32 --passes force --impls fused,reference-eager --out $OUT/bench-baseline.json > $L/bench-baseline.log 2>&1; echo "exit $?" >> $L/bench-baseline.log
cp $L/variants.log $OUT/variants.log
tar czf $OUT/logs.tgz -C $OUT logs
