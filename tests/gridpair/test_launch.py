"""The padded projectors of the eager launch: reused while the projector is unchanged, padded
again after any write to it, never cached under tracing."""

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from gridpair.launch import pad_projector, padded_projector


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
