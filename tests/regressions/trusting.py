"""The launch selection the project exists to replace, kept for the proof that the cold
regressions catch it: it trusts a successful trace.

Eagerly it behaves like the old retry loop - launch a candidate, and on Triton's
OutOfResources move on to the next - and caches what launched. Under tracing (fake tensors,
no kernel is loaded) nothing can fail, so it takes the first candidate, as the old loop did when
wrap_triton recorded the call.
"""

import torch

from gridpair.launch import launch
from gridpair.selector import LaunchSelector
from gridpair.signature import is_plain
from gridpair.validation import Compiled


class TrustingSelector(LaunchSelector):
    name = "gridpair-trusting"

    def choose(self, op, operands, projectors, n_frames):
        self._tracing = not is_plain(operands[0])
        self._device = operands[0].device
        return super().choose(op, operands, projectors, n_frames)

    def validate(self, key, tile, limits):
        if self._tracing:
            return Compiled(shared=0, registers=None)  # "the trace succeeded"
        degrees, focus, frames = key.geometry.degrees, key.geometry.focus, key.geometry.frames
        shape = (1, degrees, focus, frames * key.geometry.channels)
        operands = [torch.zeros(shape, dtype=dtype, device=self._device)
                    for dtype in key.signature.dtypes()]
        projector = torch.zeros(key.geometry.grid, key.geometry.slots,
                                dtype=key.signature.dtype, device=self._device)
        # The retry loop's try: a candidate over the device's limit raises OutOfResources here,
        # which the search takes as "next candidate".
        launch(key.op, operands, projector, projector, frames, tile)
        return Compiled(shared=0, registers=None)
