"""Launch selection: tile candidates, the cached validated selector, and its events.

Selection is separate from launching and happens before anything is recorded: the custom ops
ask ``SELECTOR.choose`` for a tile with the operands they were given (real, fake or functional
tensors alike - only dtypes, static geometry and alignment are read), and either launch that tile
or compute the reference composition. A choice is made by compiling candidates in order and
keeping the first that the device can load; choices and exhausted searches are cached.
The next candidates of a ladder, and the ladders of an op's siblings, compile ahead on worker
threads; what a search decides and reports is that of the serial search (see ``_Workers``).
"""

import atexit
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import product

import torch
from torch import Tensor
from triton.runtime.errors import OutOfResources

from gridpair import devices, tuned
from gridpair.devices import DeviceLimits
from gridpair.events import CACHED, FITS, OUT_OF_RESOURCES, UNSUPPORTED, LaunchEvent
from gridpair.geometry import Geometry, Tile, next_power_of_two, slot_cover
from gridpair.kernels import OPERANDS, RESULTS
from gridpair.probe import (
    Compiled,
    Signature,
    compile_candidate,
    contiguous_strides,
    mixed_dtypes,
    scalar_class,
    signature_of,
)

FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Tile axes, most aggressive first: (row block, grid block, stages); each tile takes the fewest
# warps that keep its resident values in registers. From the sweeps of shared memory,
# registers, spills and H200 timings (docs/evidence/): 16-bit tiles up to 64 rows; fp32 tiles
# of 16 rows (more rows spill catastrophically), first with tf32x3 dots (3-10x faster than
# IEEE FMA dots and within the fp32 error bound), then with IEEE dots, whose smaller footprint
# still fits 99 KB devices.
_BLOCK_ROWS = (64, 32, 16)
_BLOCK_GRID = (64, 32)
_STAGES = (3, 2)
_WARPS = (4, 8)
_SMALLEST = ((16, 16, 2), (16, 16, 1))
_FP32_SHAPES = ((16, 64, 2), (16, 32, 2), (16, 16, 1))
_FP32_DOTS = ("tf32x3", "ieee")
# 32-bit registers per thread the resident values of a tile may take (of 255): accumulators,
# operand rows and the grid fields of one block. Beyond it ptxas spills to local memory.
_RESIDENT_REGISTERS = 192

WORKERS_ENV = "GRIDPAIR_VALIDATION_WORKERS"
"""Candidates compiled at once (the caller's thread included); 1 is the plain serial search."""

# The ops whose keys are validated ahead once one of them is decided, and where each takes the
# (grad_out, left, right) operands' alignment and strides from: the backward's grad_out and
# second-order tangents are fresh allocations; left and right are the forward's operands.
_SIBLINGS = ("fwd", "bwd", "bwd2")
_COMMON_OPERANDS = {"fwd": (None, 0, 1), "bwd": (0, 1, 2), "bwd2": (0, 1, 2)}


@dataclass(frozen=True)
class LaunchKey:
    """Everything a choice depends on: of the pair count and strides only their classes (in
    the signature), never their values."""

    op: str
    device: str
    limit: int
    geometry: Geometry
    signature: Signature


@dataclass(frozen=True)
class Probe:
    """A candidate's verdict: its shared memory (None if it never compiled) and the outcome."""

    tile: Tile
    shared: int | None
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class Decision:
    """The outcome of one search: every probe in order and the admitted one, if any."""

    key: LaunchKey
    probes: tuple[Probe, ...]
    admitted: Probe | None = None


def resident_registers(op: str, geometry: Geometry, tile: Tile, dtype: torch.dtype) -> int:
    """32-bit registers per thread a tile's resident values take: fp32 accumulators, operand
    rows in the compute dtype (rounded as they are loaded), and the fp32 grid fields of one
    grid block.

    fp32 operands go through FMA dots, whose operand layouts hold each row twice over (the
    offline sweep: 64-row fp32 tiles spill at 8 warps where bf16 ones do not).
    """
    main, tail = slot_cover(geometry.slots)
    slots = main + tail
    n_operands, n_results = len(OPERANDS[op]), len(RESULTS[op])
    operand_words = dtype.itemsize / 4 * (2 if dtype == torch.float32 else 1)
    words = (n_results * tile.block_rows * slots
             + n_operands * tile.block_rows * slots * operand_words
             + n_operands * tile.block_rows * tile.block_grid)
    return int(words // (tile.num_warps * 32))


def generated_candidates(op: str, geometry: Geometry, dtype: torch.dtype) -> list[Tile]:
    """The ladder from the most to the least aggressive tile whose resident values stay in
    registers; grid blocks larger than the grid are left out."""
    widest_grid = max(16, next_power_of_two(geometry.grid))
    if dtype == torch.float32:
        shapes = [(*shape, dots) for dots in _FP32_DOTS for shape in _FP32_SHAPES]
    else:
        shapes = [(*s, None) for s in product(_BLOCK_ROWS, _BLOCK_GRID, _STAGES)]
        shapes += [(*s, None) for s in _SMALLEST]
    ladder = []
    for rows, grid, stages, dots in shapes:
        if grid > widest_grid:
            continue
        for warps in _WARPS:
            tile = Tile(rows, grid, stages, warps, dots)
            if resident_registers(op, geometry, tile, dtype) <= _RESIDENT_REGISTERS:
                ladder.append(tile)
                break
        else:  # even 8 warps are over the budget: the smallest footprint still gets a try
            if (rows, grid, stages) == _SMALLEST[-1]:
                ladder.append(Tile(rows, grid, stages, _WARPS[-1], dots))
    return ladder


def _default_workers() -> int:
    raw = os.environ.get(WORKERS_ENV)
    if raw:
        try:
            workers = int(raw)
        except ValueError:
            workers = 0
        if workers < 1:
            raise ValueError(f"{WORKERS_ENV}: expected a positive thread count, got {raw!r}")
        return workers
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


# Worker count from which the sibling ops' ladders start compiling as soon as a key's search
# starts, beside it, rather than once it is decided. With two threads on two cores the search's
# own compile would share its core with them (the look-ahead from a ladder's head measured
# twice as slow there, see ``_ahead``); from three, a core is left for it.
_EARLY_SIBLINGS_FROM = 3


def _ahead(index: int, workers: int) -> int:
    """Candidates compiled ahead of ladder position ``index``. None before a first rejection:
    the head of a ladder usually fits its device (tuned tiles, or the largest that does), and
    a compile beyond it would only take a core from the sibling ops' searches. Measured on
    this 2-core CPU, six P147 searches on profile h200 with an empty Triton cache: serial
    30 s, two workers compiling ahead from the head 65 s (see benchmarks/bench_selection.py).
    On the H200 (16 workers) a third of them compiling ahead of each head made the same six
    searches 7.1 s instead of 4.7 s, and the capped fp32 regression's selection 20.0 s instead
    of 18.0 s (docs/evidence/h200/round3/call7): the compiles' Python front end shares the GIL.
    """
    return 0 if index == 0 else workers - 1


class _Task:
    """One candidate's compile, run exactly once: by a worker, or inline by the first caller
    that needs its verdict before a worker took it. Keeps the outcome and the compile time."""

    def __init__(self, compile: Callable[[], object], generation: int) -> None:
        self._compile = compile
        self.generation = generation
        self._claim = threading.Lock()
        self._state = "pending"  # -> running -> done, or pending -> cancelled
        self._finished = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self.value: object = None
        self.error: BaseException | None = None
        self.seconds: float | None = None

    @property
    def done(self) -> bool:
        return self._state == "done"

    def claim(self) -> bool:
        with self._claim:
            if self._state != "pending":
                return False
            self._state = "running"
            return True

    def run(self) -> None:
        start = time.perf_counter()
        try:
            self.value = self._compile()
        except BaseException as error:  # handed to whoever waits for the verdict
            self.error = error
        finally:
            self.seconds = time.perf_counter() - start
            self._state = "done"
            self._finished.set()
        for callback in self._callbacks:
            callback()

    def cancel(self) -> None:
        with self._claim:
            if self._state == "pending":
                self._state = "cancelled"
                self._finished.set()

    def then(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the compile is done (in the thread that ran it)."""
        self._callbacks.append(callback)
        if self.done:
            callback()

    def wait(self) -> None:
        """Run it here if nobody has started it, else wait for the thread that did."""
        if self.claim():
            self.run()
        else:
            self._finished.wait()
        if self._state == "cancelled":
            raise RuntimeError("a validation compile was cancelled by reset() while awaited")


class _Workers:
    """Daemon threads running queued compiles, the searches' look-ahead before the siblings'
    background work; a thread exits when both queues are empty, so an idle selector holds no
    thread, and forks wait until no compile runs (see ``_before_fork``).

    Threads, not processes, measured on this 2-core CPU (profile h200, four P147 bf16
    fwd/bwd candidates, a fresh Triton cache each): serial 6.6 s, two threads 3.2 s, a fork
    pool of two 3.3 s. ``triton.compile`` spends its time in MLIR/LLVM passes that release the
    GIL and in ptxas, a subprocess; threads share the Triton and JIT caches of the process, and
    on a GPU the kernel's JIT compiles from threads as in Triton's own AsyncCompileMode.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Condition()
        self._urgent: deque[_Task] = deque()
        self._background: deque[_Task] = deque()
        self._threads: set[threading.Thread] = set()
        self._paused = False

    def submit(self, task: _Task, urgent: bool) -> None:
        with self._lock:
            (self._urgent if urgent else self._background).append(task)
            self._start_threads()

    def _start_threads(self) -> None:
        # Running threads may all be busy compiling: a thread per queued task, up to the size
        # (one that finds the queue empty exits at once).
        queued = len(self._urgent) + len(self._background)
        for _ in range(queued):
            if self._paused or len(self._threads) >= self.size:
                break
            thread = threading.Thread(target=self._work, name="gridpair-validation",
                                      daemon=True)
            self._threads.add(thread)
            thread.start()

    def _next(self) -> _Task | None:
        with self._lock:
            queue = self._urgent or self._background
            if self._paused or not queue:
                self._threads.discard(threading.current_thread())
                self._lock.notify_all()
                return None
            return queue.popleft()

    def _work(self) -> None:
        while (task := self._next()) is not None:
            if task.claim():
                task.run()

    def pause(self) -> None:
        """Let every thread finish its compile and exit; queued work waits for ``resume``."""
        with self._lock:
            self._paused = True
            if threading.current_thread() in self._threads:
                return  # a fork from a compile: it cannot wait for itself
            while self._threads:
                self._lock.wait()

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._start_threads()

    def idle(self, timeout: float | None) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: not self._threads, timeout)


_LIVE_SELECTORS: "weakref.WeakSet[LaunchSelector]" = weakref.WeakSet()


def _before_fork() -> None:
    # A fork copies no thread: none may be inside LLVM or ptxas (holding their locks) then.
    for selector in list(_LIVE_SELECTORS):
        if selector._pool is not None:
            selector._pool.pause()


def _after_fork_in_parent() -> None:
    for selector in list(_LIVE_SELECTORS):
        if selector._pool is not None:
            selector._pool.resume()


def _after_fork_in_child() -> None:
    # The workers stayed behind in the parent: forget them and the compiles they owed.
    for selector in list(_LIVE_SELECTORS):
        selector._forget_workers()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
# Daemon threads still inside LLVM at interpreter exit abort the process ("FATAL: exception
# not rethrown"): let their compiles finish first, and start no queued one.
atexit.register(_before_fork)


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
        self._tasks: dict[tuple[LaunchKey, Tile], _Task] = {}
        self._tasks_lock = threading.RLock()
        self._generation = 0
        # Bumped whenever a decision is cached, replaced or forgotten (``revision``).
        self._revision = 0
        self._pool: _Workers | None = None
        _LIVE_SELECTORS.add(self)

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

    def key(self, op: str, operands: Sequence[Tensor], projectors: Sequence[Tensor],
            n_frames: int, limits: DeviceLimits) -> LaunchKey:
        geometry = Geometry.of(operands[0], projectors[0], n_frames)
        return LaunchKey(op, limits.identity, limits.shared, geometry,
                         signature_of(operands, geometry, projectors[0].dtype))

    def decide(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool = False,
               siblings: bool = True) -> Decision:
        """Search the candidates of ``key`` (all of them with ``probe_all``) and cache it;
        then validate the sibling ops' keys ahead unless ``siblings`` is False."""
        start = time.perf_counter()
        with self._lock:
            return self._decide(key, limits, probe_all, start, siblings)

    def _decide(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool,
                start: float, siblings: bool = True) -> Decision:
        early = siblings and self.workers >= _EARLY_SIBLINGS_FROM
        if early and key.signature.dtype in FUSED_DTYPES:
            for sibling in self.siblings(key):
                self._validate_ahead(sibling, limits)
        if key.signature.dtype not in FUSED_DTYPES:
            decision = Decision(key, ())
            self._emit("fallback", key, None, {"limit": key.limit}, UNSUPPORTED,
                       time.perf_counter() - start)
        else:
            decision = self._search(key, limits, probe_all, start)
        self._decisions[key] = decision
        self._revision += 1
        self._forget_tasks(key)
        if siblings and key.signature.dtype in FUSED_DTYPES:
            for sibling in self.siblings(key):
                self._validate_ahead(sibling, limits)
        return decision

    def siblings(self, key: LaunchKey) -> list[LaunchKey]:
        """The keys of the other orders of the same launch: same device, limit, geometry,
        compute dtype, width, row count and way of reading other dtypes
        (``Signature.rounded_on_load``); (grad_out, left, right) aligned and strided as in
        ``key``, the rest fresh contiguous allocations. grad_out comes in the compute dtype (the
        forward's result's) unless ``key`` says otherwise, left and right in theirs, and each
        grad-grad in the dtype of the operand it is the cotangent of the gradient of."""
        signature = key.signature
        dtypes = signature.dtypes()
        fresh = (True, tuple(scalar_class(s) for s in contiguous_strides(key.geometry)))
        common = [fresh, fresh, fresh]
        common_dtypes = [signature.dtype, signature.dtype, signature.dtype]
        for position, index in enumerate(_COMMON_OPERANDS.get(key.op, ())):
            if index is not None and index < len(signature.aligned):
                common[position] = (signature.aligned[index],
                                    signature.scalars[1 + 4 * index:5 + 4 * index])
                common_dtypes[position] = dtypes[index]
        go, left, right = common_dtypes
        operands = {"fwd": common[1:], "bwd": common, "bwd2": [*common, fresh, fresh]}
        operand_dtypes = {"fwd": (left, right), "bwd": (go, left, right),
                          "bwd2": (go, left, right, left, right)}

        def sibling(op: str) -> LaunchKey:
            mixed = mixed_dtypes(operand_dtypes[op], signature.dtype)
            return LaunchKey(op, key.device, key.limit, key.geometry,
                             Signature(signature.dtype, tuple(a for a, _ in operands[op]),
                                       signature.wide,
                                       (signature.scalars[0],
                                        *(c for _, classes in operands[op] for c in classes)),
                                       mixed, signature.rounded_on_load and bool(mixed)))

        return [sibling(op) for op in _SIBLINGS if op != key.op and key.op in _SIBLINGS]

    def candidates(self, key: LaunchKey, device_name: str) -> list[Tile]:
        """Tuned tiles for this exact device first, then the generated ladder, no repeats."""
        preferred = tuned.lookup(device_name, key.op, key.signature.dtype, key.geometry)
        ordered = [*preferred, *generated_candidates(key.op, key.geometry, key.signature.dtype)]
        return list(dict.fromkeys(ordered))

    def validate(self, key: LaunchKey, tile: Tile, limits: DeviceLimits) -> Compiled:
        """Compile ``tile``; OutOfResources if the device cannot load it. Overridable."""
        return compile_candidate(key.op, key.geometry, tile, key.signature, limits)

    @property
    def workers(self) -> int:
        """Candidates compiled at once, the caller's thread included."""
        return self._workers if self._workers is not None else _default_workers()

    def _search(self, key: LaunchKey, limits: DeviceLimits, probe_all: bool,
                start: float) -> Decision:
        # The serial search, reading each verdict from a compile that may have run ahead: once
        # a candidate was rejected, the next workers-1 compile on worker threads while this
        # thread compiles (or waits for) the current one. Probes, admission and errors follow
        # ladder order alone.
        ladder = self.candidates(key, limits.device_name)
        probes: list[Probe] = []
        admitted = None
        for index, tile in enumerate(ladder):
            task = self._task(key, tile, limits)
            for later in ladder[index + 1:index + _ahead(index, self.workers)]:
                self._submit(self._task(key, later, limits), urgent=True)
            task.wait()
            error = task.error
            if isinstance(error, OutOfResources):
                shared = error.required if error.name == "shared memory" else None
                probe = Probe(tile, shared, OUT_OF_RESOURCES, str(error))
            elif error is not None:
                with self._tasks_lock:  # not cached: the next search compiles it again
                    self._tasks.pop((key, tile), None)
                raise error
            else:
                compiled = task.value
                probe = Probe(tile, compiled.shared, FITS)  # type: ignore[attr-defined]
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
    def _task(self, key: LaunchKey, tile: Tile, limits: DeviceLimits) -> _Task:
        with self._tasks_lock:
            task = self._tasks.get((key, tile))
            if task is None:
                task = _Task(lambda: self.validate(key, tile, limits), self._generation)
                self._tasks[(key, tile)] = task
            return task

    def _submit(self, task: _Task, urgent: bool) -> None:
        with self._tasks_lock:
            if task._state != "pending" or task.generation != self._generation:
                return
            if self._pool is None:
                self._pool = _Workers(self.workers)
            self._pool.submit(task, urgent)

    def _forget_tasks(self, key: LaunchKey) -> None:
        # A decided key reads the decision cache; compiles beyond its admitted tile are dropped
        # unheard (speculative work is never a probe).
        with self._tasks_lock:
            for pair in [pair for pair in self._tasks if pair[0] == key]:
                self._tasks.pop(pair).cancel()

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
                for tile in ladder[index:index + max(1, _ahead(index, self.workers))]:
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


def _resources(key: LaunchKey, probe: Probe) -> dict[str, object]:
    return {"shared": probe.shared, "limit": key.limit}


SELECTOR = LaunchSelector(workers=None)
# Per thread and per asyncio task: a using_selector block routes only its own context's ops.
_active: ContextVar[LaunchSelector | None] = ContextVar("gridpair_active_selector", default=None)


def active_selector() -> LaunchSelector:
    """The selector the custom ops consult: ``SELECTOR`` unless ``using_selector`` says else."""
    selector = _active.get()
    return SELECTOR if selector is None else selector


@contextmanager
def using_selector(selector: LaunchSelector) -> Iterator[LaunchSelector]:
    """Route the custom ops' launch choices through ``selector`` for the block, in this thread
    or task only (for tests and experiments with other selection policies; the ops trace the
    same either way)."""
    token = _active.set(selector)
    try:
        yield selector
    finally:
        _active.reset(token)
