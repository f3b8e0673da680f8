#!/usr/bin/env bash
# GPU evidence for device emulation (issue 32, issue 29 item 6): the named-device and
# emulation tests on an H200, the requires_cuda one included (real sm_90 compile and load
# beside the emulated device's compile), then the interpreter path under this machine's Triton.
#     OUT=/path/to/output bash docs/evidence/emulate_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/evidence/lib.sh
versions
run emulate-tests 420 "${PYTEST[@]}" tests/plugin/test_emulate.py tests/plugin/test_named_devices.py
run bench-emulation 120 env TRITON_INTERPRET=1 python3 benchmarks/bench_emulation.py
