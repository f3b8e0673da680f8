"""The validation worker pool: compile tasks run once, by a worker thread or by the first
caller that needs the verdict; the daemon threads that run them; the fork and exit hooks that
keep those threads out of a fork; and how many compiles run at once and ahead.
"""

import atexit
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

WORKERS_ENV = "GRIDPAIR_VALIDATION_WORKERS"
"""Candidates compiled at once (the caller's thread included); 1 is the plain serial search."""


def default_workers() -> int:
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


def compiles_ahead(index: int, workers: int) -> int:
    """Candidates compiled ahead of ladder position ``index``. None before a first rejection:
    the head of a ladder usually fits its device (tuned tiles, or the largest that does), and
    a compile beyond it would only take a core from the sibling ops' searches, whose Python
    front ends share the GIL with it (slower on a 2-core CPU and on the H200 alike; figures in
    docs/design-gridpair.md).
    """
    return 0 if index == 0 else workers - 1


class Task:
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


class Workers:
    """Daemon threads running queued compiles, the searches' look-ahead before the siblings'
    background work; a thread exits when both queues are empty, so an idle selector holds no
    thread, and forks wait until no compile runs (see ``_before_fork``).

    Threads, not processes (as fast, docs/design-gridpair.md): ``triton.compile`` spends its time in
    MLIR/LLVM passes that release the GIL and in ptxas, a subprocess; threads share the Triton and
    JIT caches of the process, and on a GPU the kernel's JIT compiles from threads as in Triton's
    own AsyncCompileMode.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Condition()
        self._urgent: deque[Task] = deque()
        self._background: deque[Task] = deque()
        self._threads: set[threading.Thread] = set()
        self._paused = False

    def submit(self, task: Task, urgent: bool) -> None:
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

    def _next(self) -> Task | None:
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


# Objects that own a pool (a ``_pool`` attribute, Workers or None, and ``_forget_workers()``):
# their threads are paused around a fork, and a forked child forgets them.
_OWNERS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(owner: Any) -> None:
    """Pause ``owner._pool`` around every fork, and call ``owner._forget_workers()`` in the
    child of one."""
    _OWNERS.add(owner)


def _before_fork() -> None:
    # A fork copies no thread: none may be inside LLVM or ptxas (holding their locks) then.
    for owner in list(_OWNERS):
        if owner._pool is not None:
            owner._pool.pause()


def _after_fork_in_parent() -> None:
    for owner in list(_OWNERS):
        if owner._pool is not None:
            owner._pool.resume()


def _after_fork_in_child() -> None:
    # The workers stayed behind in the parent: forget them and the compiles they owed.
    for owner in list(_OWNERS):
        owner._forget_workers()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
# Daemon threads still inside LLVM at interpreter exit abort the process ("FATAL: exception
# not rethrown"): let their compiles finish first, and start no queued one.
atexit.register(_before_fork)
