"""A downstream suite of 21 tests: test_forward_eager warms the selector for "forward",
which hides test_forward_traced's cold failure in a plain run."""

from toytiles import launch


def test_shapes_00():
    assert 0 * 2 == 0

def test_backward_01():
    assert launch("backward") == 128

def test_shapes_02():
    assert 2 * 2 == 4

def test_forward_eager():
    assert launch("forward") == 128

def test_shapes_04():
    assert 4 * 2 == 8

def test_backward_05():
    assert launch("backward") == 128

def test_shapes_06():
    assert 6 * 2 == 12

def test_shapes_07():
    assert 7 * 2 == 14

def test_shapes_08():
    assert 8 * 2 == 16

def test_backward_09():
    assert launch("backward") == 128

def test_shapes_10():
    assert 10 * 2 == 20

def test_shapes_11():
    assert 11 * 2 == 22

def test_forward_traced():
    assert launch("forward", traced=True) == 128

def test_backward_13():
    assert launch("backward") == 128

def test_shapes_14():
    assert 14 * 2 == 28

def test_shapes_15():
    assert 15 * 2 == 30

def test_shapes_16():
    assert 16 * 2 == 32

def test_backward_17():
    assert launch("backward") == 128

def test_shapes_18():
    assert 18 * 2 == 36

def test_shapes_19():
    assert 19 * 2 == 38

def test_shapes_20():
    assert 20 * 2 == 40
