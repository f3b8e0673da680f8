#!/bin/bash
# 64-row warpgroup fp32 variants beside the shipped kernels, and ncu profiles of them.
cd "$(dirname "$0")"
export PYTHONPATH=$(pwd) PYTHONUNBUFFERED=1
L=$OUT/logs; mkdir -p $L
{ python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"; nvidia-smi -L; } > $L/versions.log 2>&1
timeout 170 python3 docs/evidence/fp32_variants.py > $L/variants.log 2>&1; echo "exit $?" >> $L/variants.log
cp $L/variants.log $OUT/variants.log
SECS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats"
for p in bwd,pair,64,16,1,8,tf32x3 fwd,pair,64,16,1,8,tf32x3; do
  timeout 45 ncu --clock-control none $SECS -k regex:pair python3 docs/evidence/fp32_variants.py --profile $p > $L/ncu-${p//,/-}.log 2>&1; echo "exit $?" >> $L/ncu-${p//,/-}.log
done
tar czf $OUT/logs.tgz -C $OUT logs
