"""What makes a process a cold child and what it knows about itself: private caches, resets,
the shared-memory cap or emulated device, selectors adopted and statistics installed
(``prepare``); the context that ``cold_state``, the summary and features read (``active``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_coldcompile import selectors
from pytest_coldcompile.child import pristine
from pytest_coldcompile.child.junit import record_junitxml
from pytest_coldcompile.child.stats import CompileStats
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.devices import cuda, named
from pytest_coldcompile.devices.emulate import Emulation
from pytest_coldcompile.devices.smem_cap import SmemCap
from pytest_coldcompile.records import (
    CACHES,
)


@dataclass
class ChildContext:
    """What a cold child knows about itself; cold_state and the summary read it."""

    spec: ChildSpec
    test_dir: str
    cap: SmemCap | None = None
    emulation: Emulation | None = None
    stats: CompileStats = field(default_factory=CompileStats)
    tally: selectors.EventTally = field(default_factory=selectors.EventTally)
    # torch's compile stack was imported before the test began (pristine.warm_compile_stack)
    warmed_ahead: bool = False
    # its CUDA context was created before the test began (devices.cuda.context_ahead)
    cuda_ahead: bool = False

    @property
    def mode(self) -> str:
        return str(self.spec.get("mode", ""))

    @property
    def cache_dir(self) -> str:
        return os.path.join(self.test_dir, CACHES)

    @property
    def smem_limit(self) -> int | None:
        if self.emulation is not None:
            return self.emulation.limit
        return self.spec.get("smem_limit")

    @property
    def smem_device(self) -> str | None:
        """The named device whose limit smem_limit is, if it is one's."""
        emulated = self.emulated_device
        if emulated is not None and self.smem_limit == named.DEVICES[emulated].shared_per_block:
            return emulated
        return self.spec.get("smem_device")

    @property
    def emulated_device(self) -> str | None:
        return self.spec.get("emulate_device")

    def summary(self) -> dict[str, Any]:
        return {
            "type": "summary",
            **self.stats.timings(),
            "frames": self.stats.frames(),
            "forward_graphs": self.stats.forward_graphs,
            "backward_graphs": self.stats.backward_graphs,
            **self.tally.counts,
            "max_admitted_shared": self.tally.max_admitted_shared,
            "launches": self.tally.launches,
            "selectors": [str(getattr(s, "name", "?")) for s in selectors.loaded()],
            "cap_patched": list(self.cap.patched) if self.cap else [],
            "smem_limit": self.smem_limit,
            "smem_device": self.smem_device,
            "emulated_device": self.emulated_device,
            "emulation": self.emulation.summary() if self.emulation else None,
            "warmed_ahead": self.warmed_ahead,
            "cuda_ahead": self.cuda_ahead,
        }

CONTEXT_KEY = pytest.StashKey[ChildContext]()

def active(config: pytest.Config) -> ChildContext | None:
    """The cold child's context when config runs a cold child's test, else None.

    Kept on the config, not in the process: a pytest run started inside a cold test (pytester's
    inline runs) has a config of its own and is an ordinary run."""
    return config.stash.get(CONTEXT_KEY, None)

def _adopt_selectors(tally: selectors.EventTally, stats: CompileStats) -> None:
    def sink(event: Any) -> None:
        tally(event)
        stats.on_event(event)

    def adopt(selector: Any) -> None:
        selectors.reset(selector)
        selectors.subscribe([selector], sink)

    selectors.load_entry_points(only_imported=True)
    for selector in selectors.loaded():
        adopt(selector)
    selectors.on_load(adopt)
    # The others are pristine until imported: loaded (hence reset and subscribed) on import.
    selectors.watch_entry_points(raise_errors=True)

def _disable_debugger(config: pytest.Config) -> None:
    """A cold child has no terminal (stdin is /dev/null): pdb would read EOF, quit, and stop
    the whole session. The failure is reported instead; the parent says so once."""
    for name in ("pdbinvoke", "pdbtrace"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    # unittest test cases keep tearDown for the debugger while usepdb is set.
    for option in ("usepdb", "trace"):
        if getattr(config.option, option, False):
            setattr(config.option, option, False)

def prepare(config: pytest.Config, spec: ChildSpec) -> ChildContext:
    """Make this process a cold child: private caches, resets, cap, selectors, statistics."""
    _disable_debugger(config)
    record_junitxml(config, spec, spec["dir"])
    test_dir = spec["dir"]
    ctx = ChildContext(spec=spec, test_dir=test_dir)
    for name in pristine.UNSET_ENV:
        os.environ.pop(name, None)
    os.environ.update(pristine.child_environ(test_dir, spec, {}))
    position = spec.get("gpu_position")
    if spec.get("mode") == "fork" and position is not None:
        cuda.narrow_to(int(position))
    os.makedirs(ctx.cache_dir, exist_ok=True)  # cold_state.cache_dir exists, empty
    pristine.make_private(ctx.cache_dir)
    pristine.reset_compiler_state()
    ctx.stats.install()
    emulated, limit = spec.get("emulate_device"), spec.get("smem_limit")
    if emulated:
        ctx.emulation = Emulation(named.DEVICES[emulated], limit,
                                  os.path.join(ctx.cache_dir, "emulation-tmp")).install()
        ctx.cap = ctx.emulation.cap
    elif limit:
        ctx.cap = SmemCap(int(limit)).install()
    _adopt_selectors(ctx.tally, ctx.stats)
    config.stash[CONTEXT_KEY] = ctx
    config.hook.pytest_coldcompile_child_configure(config=config, spec=spec)
    return ctx
