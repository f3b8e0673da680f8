"""Launch selection: tile candidates, the cached validated selector, and its events.

Selection is separate from launching and happens before anything is recorded: the custom ops
ask ``SELECTOR.choose`` for a tile with the operands they were given (real, fake or functional
tensors alike - only dtypes, static geometry and alignment are read), and either launch that tile
or compute the reference composition. A choice is made by compiling candidates in order and
keeping the first that the device can load; choices and exhausted searches are cached.
The next candidates of a ladder, and the ladders of an op's siblings, compile ahead on worker
threads; what a search decides and reports is that of the serial search (see ``pool.Workers``).
"""

import functools
import importlib
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from triton.runtime.errors import OutOfResources

from gridpair import devices, pool
from gridpair.devices import DeviceLimits
from gridpair.events import CACHED, FITS, OUT_OF_RESOURCES, UNSUPPORTED, LaunchEvent
from gridpair.geometry import Tile
from gridpair.ladder import candidates as tile_candidates
from gridpair.pool import Task, Workers, compiles_ahead, default_workers
from gridpair.signature import LaunchKey, launch_key, sibling_keys
from gridpair.validation import validate as validate_launch

FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class Verdict:
    """A candidate's verdict: its shared memory (None if it never compiled) and the outcome."""

    tile: Tile
    shared: int | None
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class Decision:
    """The outcome of one search: every probe in order and the admitted one, if any."""

    key: LaunchKey
    probes: tuple[Verdict, ...]
    admitted: Verdict | None = None


# Worker count from which the sibling ops' ladders start compiling as soon as a key's search
# starts, beside it, rather than once it is decided: with fewer, the search's own compile would
# share its core with them (``pool.compiles_ahead``); from three, a core is left for it.
_EARLY_SIBLINGS_FROM = 3


class LaunchSelector:
    """Chooses the tile of each grid-pair kernel launch by validated compilation.

    Implements the pytest-coldcompile selector protocol: ``name``, ``reset()``,
    ``subscribe(listener) -> unsubscribe``; listeners receive ``LaunchEvent``s.
    """

    name = "gridpair"

    def __init__(self, workers: int | None = 1) -> None:
        """``workers``: candidates compiled at once, the caller's thread included. 1 (the
        default: a selector of one's own compiles in the caller's thread alone, so compile
        counts and listeners see no other thread) searches serially and validates nothing
        ahead; None takes $GRIDPAIR_VALIDATION_WORKERS, else the CPUs this process may use,
        as ``SELECTOR`` does."""
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):
            raise ValueError(f"workers: expected a positive thread count, got {workers!r}")
        self._decisions: dict[LaunchKey, Decision] = {}
        self._listeners: list[Callable[[LaunchEvent], None]] = []
        self._lock = threading.RLock()
        self._workers = workers
        # Compiles under way or done but not yet consumed by a search, by (key, tile). Guarded
        # by _tasks_lock alone, never held while waiting, so workers can take it while a search
        # holds _lock and waits for them.
        self._tasks: dict[tuple[LaunchKey, Tile], Task] = {}
        self._tasks_lock = threading.RLock()
        self._generation = 0
        # Bumped whenever a decision is cached, replaced or forgotten (``revision``).
        self._revision = 0
        self._pool: Workers | None = None
        pool.track(self)

    # -- selector protocol -------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every cached choice and every cached exhausted search, and every compile
        validated ahead: queued ones are cancelled, running ones finish unheard."""
        with self._lock:
            self._decisions.clear()
            self._revision += 1
            with self._tasks_lock:
                self._generation += 1
                for task in self._tasks.values():
                    task.cancel()
                self._tasks.clear()

    @property
    def revision(self) -> int:
        """A number that changes whenever a cached decision is added, replaced or forgotten:
        a caller that keeps what it derived from ``choose_keyed`` (the eager path's prepared
        launches) uses it while the revision it was derived under holds."""
        return self._revision

    @property
    def listened(self) -> bool:
        """Whether any listener is subscribed, to be told of every choice, cached ones too."""
        return bool(self._listeners)

    def subscribe(self, listener: Callable[[LaunchEvent], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for every probe, admission and fallback until unsubscribed."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- selection ---------------------------------------------------------------------------
    def choose(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
               n_frames: int) -> Tile | None:
        """The admitted tile for this launch, or None: compute with the reference composition.

        Reads only dtypes, static shapes, device, alignment and the classes of the row count and
        strides, so it runs the same on real, fake and functional tensors, before any kernel
        call is traced.
        """
        return self.choose_keyed(op, operands, projectors, n_frames)[1]

    def choose_keyed(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
                     n_frames: int) -> tuple[LaunchKey | None, Tile | None]:
        """``choose``, with the key it decided (None where there is nothing to validate): all
        that specializes the admitted tile's kernel, for a launch to find it by."""
        start = time.perf_counter()
        limits = devices.limits_for(operands[0].device)
        if limits is None:
            return None, None
        key = self.key(op, operands, projectors, n_frames, limits)
        decision = self._decisions.get(key)
        if decision is not None:
            self._emit_cached(decision, start)
        else:
            with self._lock:
                decision = self._decisions.get(key)
                if decision is not None:  # decided by another thread meanwhile
                    self._emit_cached(decision, start)
                else:
                    decision = self._decide(key, limits, False, start)
        return key, (decision.admitted.tile if decision.admitted is not None else None)

    def choose_held(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
                    n_frames: int) -> tuple[LaunchKey | None, Tile | None, int | None]:
        """``choose_keyed``, with the ``revision`` under which the cached decision admitting
        that tile is held (None where none is): a caller keeps what it derives from the choice
        (the eager path's prepared launches) while the revision still equals it."""
        key, tile = self.choose_keyed(op, operands, projectors, n_frames)
        if key is None or tile is None:
            return key, tile, None
        # Read before the lookup, so a reset or a new decision after it makes the caller stale.
        revision = self._revision
        decision = self._decisions.get(key)
        held = (decision is not None and decision.admitted is not None
                and decision.admitted.tile == tile)
        return key, tile, (revision if held else None)

    def key(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
            n_frames: int, limits: DeviceLimits) -> LaunchKey:
        """The key this launch is decided under (``signature.launch_key``). Overridable."""
        return launch_key(op, operands, projectors, n_frames, limits)

    def decide(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool = False,
               siblings: bool = True) -> Decision:
        """Search the candidates of ``key`` (all of them with ``probe_all``) and cache it;
        then validate the sibling ops' keys ahead unless ``siblings`` is False."""
        start = time.perf_counter()
        with self._lock:
            return self._decide(key, limits, probe_all, start, siblings)

    def _decide(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool,
                start: float, siblings: bool = True) -> Decision:
        fused = key.signature.dtype in FUSED_DTYPES
        # The keys to validate ahead, made once and with the key (the signature layer's work),
        # before the search goes down to the ladder and the compiles.
        ahead = self.siblings(key) if siblings and fused else []
        if ahead and self.workers >= _EARLY_SIBLINGS_FROM:
            for sibling in ahead:
                self._validate_ahead(sibling, limits)
        if not fused:
            decision = Decision(key, ())
            self._emit("fallback", key, None, {"limit": key.limit}, UNSUPPORTED,
                       time.perf_counter() - start)
        else:
            decision = self._search(key, limits, probe_all, start)
        self._decisions[key] = decision
        self._revision += 1
        self._forget_tasks(decision)
        for sibling in ahead:
            self._validate_ahead(sibling, limits)
        return decision

    def siblings(self, key: LaunchKey) -> list[LaunchKey]:
        """The keys of the other orders of the same launch (``signature.sibling_keys``)."""
        return sibling_keys(key)

    def candidates(self, key: LaunchKey, device_name: str) -> list[Tile]:
        """Tuned tiles for this exact device first, then the generated ladder, no repeats."""
        return tile_candidates(key.op, key.geometry, key.signature.dtype, device_name)

    # The compile of one candidate: ``validation.validate(key, tile, limits)`` itself, so that
    # the search's compile tasks call the validation layer directly. Overridable: a subclass's
    # ``validate(self, key, tile, limits) -> Compiled`` takes its place, bound into each task
    # (``_task``) before the task reaches the pool.
    validate = staticmethod(validate_launch)

    @property
    def workers(self) -> int:
        """Candidates compiled at once, the caller's thread included."""
        return self._workers if self._workers is not None else default_workers()

    def _search(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool,
                start: float) -> Decision:
        # The serial search, reading each verdict from a compile that may have run ahead: once
        # a candidate was rejected, the next workers-1 compile on worker threads while this
        # thread compiles (or waits for) the current one. Probes, admission and errors follow
        # ladder order alone.
        ladder = self.candidates(key, limits.device_name)
        probes: list[Verdict] = []
        admitted = None
        for index, tile in enumerate(ladder):
            task = self._task(key, tile, limits)
            for later in ladder[index + 1:index + compiles_ahead(index, self.workers)]:
                self._submit(self._task(key, later, limits), urgent=True)
            task.wait()
            error = task.error
            if isinstance(error, OutOfResources):
                shared = error.required if error.name == "shared memory" else None
                probe = Verdict(tile, shared, OUT_OF_RESOURCES, str(error))
            elif error is not None:
                with self._tasks_lock:  # not cached: the next search compiles it again
                    self._tasks.pop((key, tile), None)
                raise error
            else:
                compiled = task.value
                probe = Verdict(tile, compiled.shared, FITS)  # type: ignore[attr-defined]
            probes.append(probe)
            self._emit("probe", key, tile, _resources(key, probe), probe.outcome, task.seconds)
            if probe.outcome == FITS and admitted is None:
                admitted = probe
                self._emit("admit", key, tile, _resources(key, probe), FITS,
                           time.perf_counter() - start)
                if not probe_all:
                    break
        if admitted is None:
            self._emit("fallback", key, None, {"limit": key.limit}, OUT_OF_RESOURCES,
                       time.perf_counter() - start)
        return Decision(key, tuple(probes), admitted)

    # -- compiles ahead ----------------------------------------------------------------------
    def _task(self, key: LaunchKey, tile: Tile, limits: DeviceLimits) -> Task:
        with self._tasks_lock:
            task = self._tasks.get((key, tile))
            if task is None:
                task = Task(functools.partial(self.validate, key, tile, limits),
                            self._generation)
                self._tasks[(key, tile)] = task
            return task

    def _submit(self, task: Task, urgent: bool) -> None:
        with self._tasks_lock:
            if task._state != "pending" or task.generation != self._generation:
                return
            if self._pool is None:
                self._pool = Workers(self.workers)
            self._pool.submit(task, urgent)

    def _forget_tasks(self, decision: Decision) -> None:
        # A decided key reads the decision cache; compiles beyond its admitted tile are dropped
        # unheard (speculative work is never a probe). The probed ones are done: the search
        # waited for each.
        probed = {probe.tile for probe in decision.probes}
        with self._tasks_lock:
            for pair in [pair for pair in self._tasks if pair[0] == decision.key]:
                task = self._tasks.pop(pair)
                if pair[1] not in probed:
                    task.cancel()

    def _validate_ahead(self, key: LaunchKey, limits: DeviceLimits) -> None:
        """Compile ``key``'s ladder in the background, as far as a serial search would go, so
        that choosing it later finds every verdict ready; nothing is decided or reported."""
        if self.workers < 2 or key in self._decisions:
            return
        ladder = self.candidates(key, limits.device_name)
        generation = self._generation

        def advance() -> None:
            with self._tasks_lock:
                if generation != self._generation or key in self._decisions:
                    return
                index = 0  # the first candidate whose verdict is not yet known
                while index < len(ladder):
                    task = self._tasks.get((key, ladder[index]))
                    if task is None or not task.done:
                        break
                    if not isinstance(task.error, OutOfResources):
                        return  # fits, or an error: a serial search stops here
                    index += 1
                else:
                    return
                for tile in ladder[index:index + max(1, compiles_ahead(index, self.workers))]:
                    if (key, tile) not in self._tasks:
                        task = self._task(key, tile, limits)
                        task.then(advance)
                        self._submit(task, urgent=False)

        advance()

    def idle(self, timeout: float | None = None) -> bool:
        """Wait until no compile is queued or running ahead (for benchmarks and tests that
        count compiles); False if ``timeout`` seconds passed first."""
        pool = self._pool
        return True if pool is None else pool.idle(timeout)

    def _forget_workers(self) -> None:
        self._lock = threading.RLock()
        self._tasks_lock = threading.RLock()
        self._generation += 1
        self._tasks.clear()
        self._pool = None

    def _emit_cached(self, decision: Decision, start: float) -> None:
        if not self._listeners:
            return
        key, admitted = decision.key, decision.admitted
        seconds = time.perf_counter() - start
        if admitted is None:
            self._emit("fallback", key, None, {"limit": key.limit}, CACHED, seconds)
        else:
            self._emit("admit", key, admitted.tile, _resources(key, admitted), CACHED, seconds)

    def _emit(self, kind: str, key: LaunchKey, tile: Tile | None,
              resources: Mapping[str, object], outcome: str,
              seconds: float | None = None) -> None:
        if not self._listeners:
            return
        event = LaunchEvent(kind, key.op, tile.as_dict() if tile else {}, resources, outcome,
                            self.name, key.device, seconds)
        for listener in list(self._listeners):
            listener(event)

    def cached(self) -> Iterator[Decision]:
        """The decisions held now (for inspection and ``explain``)."""
        return iter(list(self._decisions.values()))


def _resources(key: LaunchKey, probe: Verdict) -> dict[str, object]:
    return {"shared": probe.shared, "limit": key.limit}


def __getattr__(name: str) -> object:
    # The process's selector and the selector context moved to gridpair.active; their old
    # import path keeps working for one release. Looked up by name when asked for: active is
    # the layer above this one (it holds a LaunchSelector), which this module never imports.
    if name in ("SELECTOR", "active_selector", "using_selector"):
        warnings.warn(f"gridpair.selector.{name} moved to gridpair.active.{name}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("gridpair.active"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
