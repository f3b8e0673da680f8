"""Options, ini keys and markers of pytest-coldcompile: help texts, validation, precedence.

Every setting is resolved here, marker > command line > ini, and a bad value is reported
with where it came from. The resolved settings live in ``config.stash``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MODES = ("auto", "fork", "zygote", "spawn")
# What the zygote imports when cold_compile_preload names nothing, each where installed.
DEFAULT_PRELOAD = ("torch", "triton")

COLD_HELP = (
    "Run every collected test cold: in a child process that has compiled nothing before, "
    "with private empty Inductor/FX-graph/AOTAutograd/Triton caches and every launch "
    "selector reset. The cold_compile marker does this for one test."
)
MODE_HELP = (
    "How a cold child starts: 'fork' forks from a fork server taken after collection, before "
    "the first test; 'zygote' forks from a server taken before any conftest was imported, "
    "which re-collects the one test; 'spawn' starts a fresh interpreter. 'auto' (default) "
    "forks when the pytest process has not initialized the CUDA driver, uses the zygote when "
    "it has, and spawns only when neither fork is possible."
)
PRELOAD_HELP = (
    "Modules the zygote (see --cold-compile-mode) imports once, before forking cold children; "
    "it never initializes CUDA. Default: torch and triton, where installed."
)
WARM_AHEAD_HELP = (
    "Let a cold child forked ahead of its test import torch's compile stack while the test "
    "before it runs, when its test asks for compile_counter or the last finished cold test of "
    "its file compiled (default true). false: every child imports it at its first compile, "
    "inside its own timings, as a fresh process does."
)
CUDA_AHEAD_HELP = (
    "auto, true or false (default auto). true: a cold child forked ahead of its test creates "
    "its CUDA context (and Triton's driver, where Triton is imported) while the test before it "
    "runs. The test then finds CUDA initialized, as a test after another GPU test does "
    "in-process: environment variables it sets for CUDA's initialization come too late, and "
    "the who-initialized-CUDA line names the plugin. auto: true where collection asked the "
    "device (device queries answered from the probe process), the sign of a GPU suite. Fork "
    "mode only; nothing is compiled or allocated."
)
FORKED_AHEAD_HELP = (
    "How many cold children the fork server keeps forked ahead of their tests, a whole number "
    ">= 1 (default 1). The first is readied for the next test; the others wait, each with its "
    "CUDA context where contexts are made ahead. Each holds a process while it waits."
)
ANSWER_HELP = (
    "While conftests and test modules are imported and collected, answer torch.cuda's device "
    "queries (get_device_capability, get_device_properties, get_device_name, current_device, "
    "is_bf16_supported) from a probe process, so that the pytest process never initializes "
    "CUDA for them and 'auto' can fork (default true). false: they initialize CUDA as torch "
    "does, and 'auto' then uses the zygote."
)
TIMEOUT_HELP = (
    "Kill a cold child, with its process group, when it runs longer than SECONDS; the test "
    "fails saying 'timeout'. 0 means no limit (the default). cold_compile(timeout=...) "
    "overrides it for one test."
)
SMEM_HELP = (
    "Cap the per-block shared memory, in BYTES or as a device name (a100, h100, rtx-4090, ...: "
    "that device's opt-in limit), that Triton, Inductor and launch selectors see: kernels over "
    "it fail to load with Triton's OutOfResources. Applies to cold children and, from setup to "
    "teardown, to tests run in-process. The smem_limit marker overrides it."
)
EMULATE_HELP = (
    "Emulate the named device (a100, h100, rtx-pro-6000-blackwell, ...): every Triton kernel a "
    "cold child loads, or launches under TRITON_INTERPRET=1, is also compiled for that "
    "device's architecture and refused with Triton's OutOfResources where that compile is "
    "over the device's shared-memory, thread or tensor-memory limit. Tests it applies to run "
    "cold. The emulate_device marker overrides it; a smem limit lowers the device's."
)
REPORT_HELP = "Write a JSON report of every cold test, keyed by node id, to PATH."
PROVE_HELP = (
    "Prove that each test marked guards(bug, raises=...) catches its bug: after its normal "
    "run, run it once more in a fresh cold child with the bug active, as its own item "
    "TEST[prove]. Verdicts: caught (failed with the named exception), vacuous (failed for "
    "another reason), missed (passed), broken (the bug's own set-up failed); all but caught "
    "fail the session."
)
CHILD_HELP = argparse.SUPPRESS  # internal: a spawned cold child reads its spec from this file

MARKERS = {
    "cold_compile": (
        "cold_compile(timeout=None): run this test cold, in a child process that has compiled "
        "nothing before, with private empty caches and launch selectors reset; timeout in "
        "seconds overrides --cold-compile-timeout. Also cold_compile(budget=SECONDS): a "
        "compile-time budget, overriding --cold-compile-budget."
    ),
    "requires_cuda": (
        "requires_cuda: skip unless a CUDA device is visible and torch, where installed, is a "
        "CUDA build."
    ),
    "requires_smem": (
        "requires_smem(BYTES): skip unless the per-block shared memory of the CUDA device "
        "(its opt-in limit, lowered by any smem_limit/--smem-limit cap) is at least BYTES."
    ),
    "smem_limit": (
        "smem_limit(BYTES): emulate a device with at most BYTES of shared memory per block "
        "(or a named device's, smem_limit(\"rtx-4090\")): kernels over it fail to load with "
        "Triton's OutOfResources."
    ),
    "emulate_device": (
        "emulate_device(DEVICE): run this test cold, compiling every Triton kernel also for the "
        "named device's architecture and judging it by that device's limits."
    ),
    "guards": (
        "guards(bug, raises=EXC, match=None, masked_by=None): the regression this test guards; "
        "under --cold-compile-prove a cold child runs it with the bug active and expects it to "
        "fail with EXC (a type or 'pkg.mod.Name') anywhere in the exception chain, matching "
        "the regex match. bug: a context manager factory, a fixture name or 'pkg.mod:attr'; "
        "masked_by: a warm-up callable (or path) that should hide the bug."
    ),
}


@dataclass(frozen=True)
class Settings:
    cold_all: bool
    mode: str
    mode_source: str
    timeout: float | None
    timeout_source: str
    smem_limit: int | None
    smem_source: str
    report_path: Path | None
    child_spec: str | None  # set only in a spawned cold child
    warm_ahead: bool = True
    cuda_ahead: bool | None = None  # None: auto (engine.ColdEngine decides after collection)
    forked_ahead: int = 1
    prove: bool = False  # --cold-compile-prove / ini cold_compile_prove
    smem_device: str | None = None  # the device --smem-limit/ini smem_limit named, if any
    emulate_device: str | None = None
    emulate_source: str = "default"


SETTINGS_KEY = pytest.StashKey[Settings]()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("cold-compile", "cold compile isolation (pytest-coldcompile)")
    group.addoption("--cold-compile", action="store_true", default=None, help=COLD_HELP)
    group.addoption("--cold-compile-mode", metavar="MODE", default=None, help=MODE_HELP)
    group.addoption("--cold-compile-timeout", metavar="SECONDS", default=None, help=TIMEOUT_HELP)
    group.addoption("--smem-limit", metavar="BYTES|DEVICE", default=None, help=SMEM_HELP)
    group.addoption("--emulate-device", metavar="DEVICE", default=None, help=EMULATE_HELP)
    group.addoption("--cold-compile-report", metavar="PATH", default=None, help=REPORT_HELP)
    group.addoption("--cold-compile-child", metavar="SPEC", default=None, help=CHILD_HELP)
    group.addoption("--cold-compile-prove", action="store_true", default=None, help=PROVE_HELP)
    parser.addini("cold_compile", COLD_HELP, type="bool", default=False)
    parser.addini("cold_compile_mode", MODE_HELP, default="auto")
    parser.addini("cold_compile_timeout", TIMEOUT_HELP, default="0")
    parser.addini("cold_compile_preload", PRELOAD_HELP, type="linelist", default=[])
    parser.addini("cold_compile_warm_ahead", WARM_AHEAD_HELP, type="bool", default=True)
    parser.addini("cold_compile_cuda_ahead", CUDA_AHEAD_HELP, default="auto")
    parser.addini("cold_compile_forked_ahead", FORKED_AHEAD_HELP, default="1")
    parser.addini("cold_compile_answer_device_queries", ANSWER_HELP, type="bool", default=True)
    parser.addini("smem_limit", SMEM_HELP, default="")
    parser.addini("cold_compile_prove", PROVE_HELP, type="bool", default=False)
    parser.addini("emulate_device", EMULATE_HELP, default="")


def parse_mode(value: Any, source: str) -> str:
    text = str(value).strip().lower()
    if text not in MODES:
        raise pytest.UsageError(f"{source}: expected one of {', '.join(MODES)}, got {value!r}")
    return text


def parse_timeout(value: Any, source: str) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{source}: expected a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise pytest.UsageError(f"{source}: expected seconds >= 0 (0: no limit), got {value!r}")
    return seconds or None


def parse_bytes(value: Any, source: str, error: type[Exception] = pytest.UsageError) -> int:
    if isinstance(value, bool):
        raise error(f"{source}: expected a positive whole number of bytes, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(str(value).strip().replace("_", ""))
        except ValueError:
            raise error(
                f"{source}: expected a positive whole number of bytes, got {value!r}"
            ) from None
    if number <= 0:
        raise error(f"{source}: expected a positive whole number of bytes, got {value!r}")
    return number


def parse_smem(value: Any, source: str, error: type[Exception] = pytest.UsageError
               ) -> tuple[int, str | None]:
    """(bytes, device name or None) of a shared-memory limit given as bytes or as a device."""
    from pytest_coldcompile.devices import named

    device = named.lookup(value) if isinstance(value, str) else None
    if device is not None:
        return device.shared_per_block, device.name
    try:
        return parse_bytes(value, source, error), None
    except error as exc:
        raise error(f"{exc}; or one of the named devices: {', '.join(named.names())}") from None


def parse_device(value: Any, source: str, error: type[Exception] = pytest.UsageError) -> str:
    """The name of the named device value names; error lists the names otherwise."""
    from pytest_coldcompile.devices import named

    device = named.lookup(value) if isinstance(value, str) else None
    if device is None:
        raise error(f"{source}: expected a device name, got {named.unknown(value)}")
    return device.name


def resolve(
    config: pytest.Config,
    dest: str,
    flag: str,
    ini: str,
    default: str,
    parse: Callable[[Any, str], Any],
) -> tuple[Any, str]:
    """(value, source) for one option: the command line, else the ini file, else the default."""
    return resolve_given(getattr(config.option, dest), config, flag, ini, default, parse)


def resolve_given(
    given: Any,
    config: pytest.Config,
    flag: str,
    ini: str,
    default: str,
    parse: Callable[[Any, str], Any],
) -> tuple[Any, str]:
    """resolve() with the command line's value given (before pytest_configure, the known
    args'), for the early decisions."""
    if given is not None:
        return parse(given, flag), flag
    raw = str(config.getini(ini)).strip()
    if raw and raw != default:
        return parse(raw, f"ini {ini}"), f"ini {ini}"
    return (parse(default, "default") if default else None), "default"


def ini_cold_compile(config: pytest.Config) -> bool:
    """The ini key cold_compile (pytest parses it as a bool); a bad value names the key."""
    return ini_bool(config, "cold_compile")


def ini_bool(config: pytest.Config, key: str) -> bool:
    """A bool ini key as pytest parses it; a bad value names the key."""
    try:
        return bool(config.getini(key))
    except (ValueError, pytest.UsageError) as exc:  # pytest wraps its ValueError in one
        raise pytest.UsageError(f"ini {key}: expected true or false ({exc})") from None


_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


def ini_auto_bool(config: pytest.Config, key: str) -> bool | None:
    """An ini key of auto, true or false (the words pytest's bool keys take); None for auto."""
    value = config.getini(key)
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise pytest.UsageError(f"ini {key}: expected auto, true or false, got {value!r}")


def ini_count(config: pytest.Config, key: str) -> int:
    """An ini key of a whole number >= 1."""
    value = config.getini(key)
    try:
        count = int(str(value).strip())
    except ValueError:
        count = 0
    if count < 1:
        raise pytest.UsageError(f"ini {key}: expected a whole number >= 1, got {value!r}")
    return count


def report_path(value: str | None) -> Path | None:
    """--cold-compile-report's path, checked now rather than when the session ends: not a
    directory, and inside a directory that exists or can be made, writable."""
    if not value:
        return None
    path = Path(value)
    if path.is_dir():
        raise pytest.UsageError(f"--cold-compile-report: {value!r} is a directory, "
                                "expected a file path")
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    try:  # what the directory's mode bits say is not enough (root, /proc, read-only mounts)
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise pytest.UsageError(f"--cold-compile-report: cannot write {value!r} "
                                f"({str(ancestor)!r}: {exc.strerror or exc})") from None
    return path


def load(config: pytest.Config) -> Settings:
    """Resolve command line > ini for every option, validating each with its source named."""
    opt = config.option
    cold_all = bool(opt.cold_compile) or ini_cold_compile(config)
    mode, mode_source = resolve(
        config, "cold_compile_mode", "--cold-compile-mode", "cold_compile_mode", "auto", parse_mode
    )
    timeout, timeout_source = resolve(
        config,
        "cold_compile_timeout",
        "--cold-compile-timeout",
        "cold_compile_timeout",
        "0",
        parse_timeout,
    )
    smem, smem_source = resolve(
        config, "smem_limit", "--smem-limit", "smem_limit", "", parse_smem
    )
    smem_limit, smem_device = smem or (None, None)
    emulate_device, emulate_source = resolve(
        config, "emulate_device", "--emulate-device", "emulate_device", "", parse_device
    )
    report = report_path(opt.cold_compile_report)
    preload_modules(config)  # validated here too: the zygote's early start does not report
    warm_ahead = ini_bool(config, "cold_compile_warm_ahead")
    answer_device_queries(config)  # validated here too: install() leaves a bad value to us
    return Settings(
        cold_all=cold_all,
        mode=mode,
        mode_source=mode_source,
        timeout=timeout,
        timeout_source=timeout_source,
        smem_limit=smem_limit,
        smem_source=smem_source,
        report_path=report,
        child_spec=opt.cold_compile_child,
        warm_ahead=warm_ahead,
        cuda_ahead=ini_auto_bool(config, "cold_compile_cuda_ahead"),
        forked_ahead=ini_count(config, "cold_compile_forked_ahead"),
        prove=bool(opt.cold_compile_prove) or ini_bool(config, "cold_compile_prove"),
        smem_device=smem_device,
        emulate_device=emulate_device,
        emulate_source=emulate_source,
    )


def early_mode(config: pytest.Config) -> tuple[str, str, bool]:
    """(mode, source, cold_all) before pytest_configure, from the known args and the ini file.

    For pytest_load_initial_conftests, which decides whether to start the zygote.
    """
    ns = config.known_args_namespace
    mode, source = resolve_given(getattr(ns, "cold_compile_mode", None), config,
                                 "--cold-compile-mode", "cold_compile_mode", "auto", parse_mode)
    cold_all = bool(getattr(ns, "cold_compile", None)) or ini_cold_compile(config)
    return mode, source, cold_all


def answer_device_queries(config: pytest.Config) -> bool:
    """The ini key cold_compile_answer_device_queries (devices/device_queries.py)."""
    return ini_bool(config, "cold_compile_answer_device_queries")


def preload_modules(config: pytest.Config) -> list[str]:
    """The modules the zygote imports: cold_compile_preload, else torch and triton if installed."""
    import importlib.util

    listed = [str(name).strip() for name in config.getini("cold_compile_preload")]
    listed = [name for name in listed if name]
    for name in listed:
        if not all(part.isidentifier() for part in name.split(".")):
            raise pytest.UsageError(f"ini cold_compile_preload: {name!r} is not a module name "
                                    "(list one module per line)")
    if listed:
        return listed
    return [name for name in DEFAULT_PRELOAD if importlib.util.find_spec(name) is not None]


def settings(config: pytest.Config) -> Settings:
    return config.stash[SETTINGS_KEY]
