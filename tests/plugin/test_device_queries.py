"""Collection's device queries answered from a probe process (devices/device_queries.py).

Unit tests drive the answering on a stand-in torch.cuda module whose functions fail when they
are called (they stand for the driver), with a fake probe; two run the real probe, a child
forked from this process, against a stand-in torch.cuda that answers. The sessions, with a
generated module of thousands of items, are in test_device_queries_session.py.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile.devices import cuda, device_probe, device_queries

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

REAL_START_PROBE = device_queries._start_probe
PROPS_REPR = ("_CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, "
              "total_memory=143167MB, multi_processor_count=132, uuid=0a0b)")
RECORD = {
    "is_available": True,
    "device_count": 2,
    "current_device": 0,
    "devices": [
        {"repr": PROPS_REPR.replace("H200", f"H200 #{i}"),
         "attrs": {"name": f"NVIDIA H200 #{i}", "major": 9, "minor": i, "total_memory": 150 + i,
                   "multi_processor_count": 132,
                   "uuid": {"__object__": {"type": "_CUuuid", "str": "0a0b", "repr": "0a0b",
                                           "attrs": {"bytes": {"__bytes__": "0a0b"}}}}}}
        for i in range(2)
    ],
    "is_bf16_supported": [True, True],
}


class FakeProbe:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.read = 0

    def record(self) -> device_probe.Record:
        self.read += 1
        return device_probe.Record(self.data)

    def stop(self) -> None:
        pass


def _driver(name: str) -> Any:
    def touched(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{name} reached the driver")

    touched.__name__ = name
    return touched


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A torch.cuda whose queries stand for the driver; answering on; a fake probe started."""
    module = types.ModuleType("torch.cuda")
    for name in device_queries.ANSWERS:
        setattr(module, name, _driver(name))
    module._get_device_index = lambda device, optional=False: (  # type: ignore[attr-defined]
        int(str(device).rpartition(":")[2]))
    probes: list[FakeProbe] = []
    module.data = dict(RECORD)  # type: ignore[attr-defined]

    def start_probe() -> FakeProbe:
        probes.append(FakeProbe(module.data))  # type: ignore[attr-defined]
        return probes[-1]

    monkeypatch.setattr(device_queries, "_start_probe", start_probe)
    monkeypatch.setattr(cuda, "NVIDIA_CONTROL", __file__)  # "a driver is installed"
    # A process that has not initialized CUDA, as the pytest process during collection: on a
    # GPU machine an earlier test of this xdist worker may have initialized it for real.
    monkeypatch.setattr(cuda, "torch_cuda_initialized", lambda: False)
    monkeypatch.setitem(sys.modules, "torch.cuda", module)
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    device_queries.start()
    module.probes = probes  # type: ignore[attr-defined]
    yield module
    device_queries.stop()


def test_queries_are_answered_from_the_probe_without_the_driver(
    fake_cuda: types.ModuleType,
) -> None:
    assert fake_cuda.get_device_capability() == (9, 0)
    assert fake_cuda.get_device_capability(1) == (9, 1)
    assert fake_cuda.get_device_name("cuda:1") == "NVIDIA H200 #1"
    assert fake_cuda.current_device() == 0
    assert fake_cuda.is_bf16_supported() is True
    props = fake_cuda.get_device_properties(0)
    assert repr(props) == PROPS_REPR.replace("H200", "H200 #0")
    assert (props.name, props.major, props.minor, props.total_memory) == ("NVIDIA H200 #0", 9, 0,
                                                                          150)
    assert props.uuid.bytes == b"\x0a\x0b" and str(props.uuid) == "0a0b"
    with pytest.raises(AttributeError):
        props.major = 8
    with pytest.raises(AssertionError, match="Invalid device id"):
        fake_cuda.get_device_properties(2)
    assert len(fake_cuda.probes) == 1, "one probe for the process"


def test_the_account_names_each_query_and_where_it_came_from(fake_cuda: types.ModuleType) -> None:
    line = sys._getframe().f_lineno + 1
    fake_cuda.get_device_capability()
    fake_cuda.get_device_name(0)
    here = f"{Path(__file__).relative_to(Path.cwd())}" if Path(__file__).is_relative_to(
        Path.cwd()) else __file__
    assert device_queries.account() == (
        "collection's 2 device queries (torch.cuda.get_device_capability from "
        f"{here}:{line}, torch.cuda.get_device_name from {here}:{line + 1}) were answered from "
        "a probe process")
    assert device_queries.header_lines() == [f"cold-compile: so far {device_queries.account()}"]


def test_harmless_queries_go_to_torch_and_start_no_probe(
    fake_cuda: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AssertionError, match="is_available reached the driver"):
        fake_cuda.is_available()  # NVML answers it in torch: the original's call
    assert fake_cuda.probes == [] and device_queries.account() == ""
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "0")  # torch would ask the driver
    assert fake_cuda.is_available() is True


def test_after_collection_torch_cuda_has_its_own_functions_again(
    fake_cuda: types.ModuleType,
) -> None:
    held = fake_cuda.get_device_capability  # `from torch.cuda import ...` at collection
    assert held() == (9, 0)
    device_queries.stop()
    assert fake_cuda.get_device_capability.__name__ == "get_device_capability"
    assert not hasattr(fake_cuda.get_device_capability, "_coldcompile_answers")
    with pytest.raises(AssertionError, match="reached the driver"):
        held()  # the holder gets the real function through the wrapper


def test_an_unusable_probe_lets_queries_through_and_says_why(
    fake_cuda: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cuda.data.clear()
    fake_cuda.data.update({"is_available": True, "error": "RuntimeError: boom"})
    with pytest.raises(AssertionError, match="reached the driver"):
        fake_cuda.get_device_capability()
    assert device_queries.declined() == "RuntimeError: boom"
    assert device_queries.header_lines() == [
        "cold-compile: device queries were not answered: RuntimeError: boom"]


def test_without_an_nvidia_driver_nothing_is_probed(
    fake_cuda: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    device_queries.stop()
    monkeypatch.setattr(device_queries, "_start_probe", REAL_START_PROBE)
    monkeypatch.setattr(cuda, "NVIDIA_CONTROL", str(tmp_path / "nvidiactl"))
    monkeypatch.setattr(cuda, "torch_cuda_initialized", lambda: False)  # as above
    device_queries.start()
    with pytest.raises(AssertionError, match="reached the driver"):
        fake_cuda.get_device_capability()
    # Nothing to say either: torch fails or answers as it does without the plugin.
    assert device_queries.declined() == "" and device_queries.header_lines() == []


def _answering_cuda(log: Path) -> types.ModuleType:
    """A torch.cuda whose functions answer and write down which process asked them."""
    module = types.ModuleType("torch.cuda")

    def note(name: str, value: Any) -> Any:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {name}\n")
        return value

    class Props:
        def __init__(self, index: int) -> None:
            self.name, self.major, self.minor, self.total_memory = "Fake", 9, index, 7
            self.uuid = types.SimpleNamespace(bytes=[index, index])

        def __repr__(self) -> str:
            return f"_CudaDeviceProperties(name='Fake', major=9, minor={self.minor})"

    module.is_available = lambda: note("is_available", True)  # type: ignore[attr-defined]
    module.device_count = lambda: 2  # type: ignore[attr-defined]
    module.current_device = lambda: note("current_device", 1)  # type: ignore[attr-defined]
    module.get_device_properties = (  # type: ignore[attr-defined]
        lambda device=None: note("get_device_properties", Props(int(device))))
    module.get_device_capability = lambda device=None: note(  # type: ignore[attr-defined]
        "get_device_capability", (9, 0))
    module.get_device_name = lambda device=None: "Fake"  # type: ignore[attr-defined]
    module.is_bf16_supported = (  # type: ignore[attr-defined]
        lambda including_emulation=True: note("is_bf16_supported", including_emulation))
    return module


@needs_fork
def test_the_probe_is_a_forked_child_that_asks_torch_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "asked"
    module = _answering_cuda(log)
    monkeypatch.setitem(sys.modules, "torch.cuda", module)
    monkeypatch.setattr(cuda, "NVIDIA_CONTROL", __file__)
    monkeypatch.setattr(cuda, "torch_cuda_initialized", lambda: False)  # as in fake_cuda
    device_queries.start()
    try:
        assert module.get_device_capability(1) == (9, 1)  # the probe's record, not (9, 0)
        assert repr(module.get_device_properties(0)) == (
            "_CudaDeviceProperties(name='Fake', major=9, minor=0)")
        assert module.get_device_properties(1).uuid.bytes == [1, 1]
        assert module.current_device() == 1
        assert module.is_bf16_supported(False) is False
        asked = [line.split() for line in log.read_text().splitlines()]
        assert str(os.getpid()) not in {pid for pid, _ in asked}, "asked in the pytest process"
        assert {name for _, name in asked} == {"is_available", "current_device",
                                               "get_device_properties", "is_bf16_supported"}
    finally:
        device_queries.stop()
    assert module.get_device_capability() == (9, 0), "torch's own function again"


@needs_fork
def test_a_probe_that_fails_says_why() -> None:
    def fails() -> dict[str, Any]:
        raise RuntimeError("CUDA driver initialization failed")

    record = device_probe.Probe(fails).record()
    assert not record.usable()
    assert record.failed == "RuntimeError: CUDA driver initialization failed"
