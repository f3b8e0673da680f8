"""The eager launch: padded projectors reused while the projector is unchanged, padded again
after any write to it, never cached under tracing; and the key that finds a resolved kernel."""

import dataclasses

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair.launch import pad_projector, padded_projector
from gridpair.selector import LaunchSelector
from gridpair.tracing import nothing_traces


def test_a_padded_projector_is_reused_while_unchanged():
    projector = torch.randn(23, 27)
    first = padded_projector(projector)
    assert torch.equal(first, pad_projector(projector))
    assert padded_projector(projector) is first


def test_any_write_to_the_projector_pads_it_again():
    base = torch.randn(23, 27)
    stale = padded_projector(base)
    base.mul_(2)  # in place
    assert torch.equal(padded_projector(base), pad_projector(base))
    before = padded_projector(base)
    base[:, :3].zero_()  # through a view: the version counter is shared
    after = padded_projector(base)
    assert after is not before and torch.equal(after, pad_projector(base))
    with torch.no_grad():
        base.set_(torch.randn(23, 27))  # new storage
    assert torch.equal(padded_projector(base), pad_projector(base))
    assert not torch.equal(stale, padded_projector(base))


def test_distinct_projectors_with_equal_values_are_padded_separately():
    one = torch.randn(5, 9)
    two = one.clone()
    assert padded_projector(one) is not padded_projector(two)


def test_inference_tensors_and_traces_are_padded_every_time():
    with torch.inference_mode():
        frozen = torch.randn(5, 9)
    assert padded_projector(frozen) is not padded_projector(frozen)

    projector = torch.randn(5, 9)
    padded_projector(projector)  # cached eagerly
    graph = make_fx(padded_projector)(projector)
    assert any("pad" in str(node.target) or "constant_pad" in str(node.target)
               for node in graph.graph.nodes), graph.code

    seen = []

    def record(x):
        seen.append(nothing_traces([x], anywhere=True))
        return x * 2

    torch.jit.trace(record, projector, check_trace=False)  # TorchScript must see every op
    assert seen == [False] and nothing_traces([projector], anywhere=True)


def test_the_eager_autocast_cast_of_a_projector_is_kept_until_it_changes():
    from gridpair.eager import autocast_inputs

    left, right = torch.randn(2, 4, 1, 3), torch.randn(2, 4, 1, 3)
    to_grid, from_grid = torch.randn(5, 4), torch.randn(5, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first = autocast_inputs((left, right, to_grid, from_grid))
        again = autocast_inputs((left, right, to_grid, from_grid))
        # float32 operands go to the kernels as they are (rounded as they are loaded)
        assert [t.dtype for t in first] == [torch.float32] * 2 + [torch.bfloat16] * 2
        assert first[0] is left and first[1] is right
        assert again[2] is first[2] and again[3] is first[3]
        half = autocast_inputs((left.half(), right.half(), to_grid, from_grid))
        assert [t.dtype for t in half] == [torch.bfloat16] * 4  # other dtypes are cast
        to_grid.add_(1)
        fresh = autocast_inputs((left, right, to_grid, from_grid))
    assert torch.equal(fresh[2], to_grid.to(torch.bfloat16)) and fresh[3] is first[3]
    assert autocast_inputs((left, right, to_grid, from_grid))[2] is to_grid  # autocast off


class _CoarseKeySelector(LaunchSelector):
    """Keys launches without their alignment: two specializations would share a key."""

    def key(self, op, operands, projectors, n_frames, limits):
        key = super().key(op, operands, projectors, n_frames, limits)
        signature = dataclasses.replace(key.signature,
                                        aligned=(True,) * len(key.signature.aligned))
        return dataclasses.replace(key, signature=signature)


def test_only_the_selectors_own_key_finds_a_resolved_kernel(monkeypatch):
    """The eager path prepares its launch with the selector's key (which finds a kernel the JIT
    resolved before) only where that key is LaunchSelector's own, the launch's whole
    specialization; a selector that keys otherwise gets launches through the JIT."""
    from gridpair import eager

    monkeypatch.setenv("GRIDPAIR_DEVICE", "h200")
    keys = []

    def recording_launch(op, operands, to_grid, from_grid, n_frames, tile, **kwargs):
        keys.append(("jit", kwargs.get("key")))
        return (torch.empty(operands[0].shape),)

    class RecordingDirectLaunch:
        def __call__(self, operands, to_grid, from_grid):
            return (torch.empty(operands[0].shape),)

    def recording_prepared(op, key, tile, operands, to_grid, from_grid):
        keys.append(("direct", key))
        prepared = RecordingDirectLaunch()
        return prepared, prepared(operands, to_grid, from_grid)

    monkeypatch.setattr(eager, "launch", recording_launch)
    monkeypatch.setattr(eager, "launch_prepared", recording_prepared)
    left, right = torch.zeros(2, 4, 1, 16), torch.zeros(2, 4, 1, 16)
    projector = torch.zeros(16, 4)
    for selector in (LaunchSelector(), _CoarseKeySelector()):
        eager._compute("fwd", (left, right), projector, projector, 1, selector)
    (own_path, own), (coarse_path, coarse) = keys
    assert own_path == "direct" and own.signature.scalars[0] == "i32:16"  # 2 nodes * 16 ch.
    assert (coarse_path, coarse) == ("jit", None)
