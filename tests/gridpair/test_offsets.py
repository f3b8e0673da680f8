"""The 64-bit offset decision on shapes past 2^31, decided from meta tensors (nothing is
allocated): the largest offset a launch forms, not its largest stride, sets it. The WIDE kernels
themselves run in interpreted/ (test_the_64_bit_offset_path_computes_the_same_function)."""

import pytest
import torch

from gridpair.geometry import Geometry
from gridpair.signature import needs_wide_offsets, signature_of

INT32_MAX = 2**31 - 1
D, F, KC = 49, 2, 292  # lmax 6, F=2, K*C = 3*96 + 4: the degree-major case


def degree_major(nodes, base_nodes=None):
    """(N, D, F, K*C) view of (D, base_nodes, F, K*C) meta storage: stride_d = base_nodes*F*KC."""
    base = torch.empty(D, base_nodes or nodes, F, KC, device="meta", dtype=torch.bfloat16)
    return base.transpose(0, 1)[:nodes]


def geometry_of(x):
    """One frame, the packed axis all channels: the launch scalars need nothing more."""
    _, degrees, focus, packed = x.shape
    return Geometry(degrees, focus, 1, packed, 16)


def largest_offset(x):
    """Independent of the code under test: the offset of the last element a kernel reads."""
    return sum((n - 1) * s for n, s in zip(x.shape, x.stride()))


@pytest.mark.parametrize(("nodes", "wide"), [(70_000, False), (80_000, True)])
def test_degree_major_views_widen_where_their_reach_passes_2_31(nodes, wide):
    x = degree_major(nodes)
    assert max(x.stride()) < INT32_MAX  # no single stride says so
    assert (largest_offset(x) > INT32_MAX) == wide
    assert needs_wide_offsets(x) == wide
    assert signature_of([x, x], geometry_of(x)).wide == wide


def test_a_few_nodes_of_a_huge_degree_major_storage_need_64_bits():
    # (D-1) * stride_d passes 2^31 with 10 nodes: numel, rows and every stride stay small.
    x = degree_major(10, base_nodes=100_000)
    assert x.numel() < INT32_MAX and max(x.stride()) < INT32_MAX
    assert largest_offset(x) > INT32_MAX
    assert signature_of([x, torch.empty(x.shape, device="meta", dtype=x.dtype)],
                        geometry_of(x)).wide


def test_contiguous_operands_widen_where_the_results_extent_passes_2_31():
    rows = INT32_MAX // (D * F * KC) + 1
    assert needs_wide_offsets(torch.empty(rows, D, F, KC, device="meta"))
    assert not needs_wide_offsets(torch.empty(rows - 1, D, F, KC, device="meta"))


def test_a_large_stride_on_a_unit_axis_is_still_a_64_bit_launch_scalar():
    x = torch.empty(1, D, F, KC, device="meta").as_strided((1, D, F, KC),
                                                           (2**32, F * KC, KC, 1))
    assert largest_offset(x) < INT32_MAX
    assert needs_wide_offsets(x)


def test_small_operands_stay_32_bit():
    x = torch.randn(3, 9, 2, 15)
    assert not signature_of([x, x.transpose(0, 1).contiguous().transpose(0, 1)],
                            geometry_of(x)).wide
