"""A few tests that touch neither torch nor triton."""

import json

import pytest


@pytest.mark.parametrize("k", range(5))
def test_round_trip(k):
    data = {"k": k, "items": list(range(k))}
    assert json.loads(json.dumps(data)) == data
