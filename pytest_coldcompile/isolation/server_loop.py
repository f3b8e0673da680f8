"""The fork server's own side: its loop over the parent's requests, the children it keeps
forked ahead of them (a pool; the oldest readied for the announced request), reaping, and the
step after each child. Runs in the server process; the parent's handle is
``forkserver.ForkServer``.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_coldcompile.isolation import pipes
from pytest_coldcompile.processes import (
    collapse_heap,
    die_with_parent,
    kill_group,
    report_exit_to,
)

# How often the server checks whether a child that has not reported its exit is gone.
_EXIT_POLL = 0.05
# After how many children the server puts its memory in huge pages (processes.collapse_heap):
# a fraction of a second once for a server holding torch, repaid in a few dozen children.
_COLLAPSE_AFTER = 16

AfterChild = Callable[[dict[str, Any]], "Callable[[], bool] | None"]


class ServerLoop:
    """What the server runs: child_main(request) in each forked child (it must not return),
    preload() once before serving, child_ready(request) in a child forked ahead of its
    announced request, after_child(request) when a child has ended.

    spares: how many children the server keeps forked ahead; warm_spare() runs in each of them
    as soon as it is forked, before any request is announced to it (what needs no request).
    """

    def __init__(
        self,
        child_main: Callable[[dict[str, Any]], Any],
        preload: Callable[[], Any] | None,
        child_ready: Callable[[dict[str, Any]], Any] | None,
        after_child: AfterChild | None,
        spares: int = 1,
        warm_spare: Callable[[], Any] | None = None,
    ) -> None:
        self.child_main = child_main
        self.preload = preload
        self.child_ready = child_ready
        self.after_child = after_child
        if spares < 1:  # the pool hands out its oldest spare: it needs one
            raise ValueError(f"spares: expected a whole number >= 1, got {spares!r}")
        self.spares = spares
        self.warm_spare = warm_spare

    def _after_child(self, request: dict[str, Any]) -> Callable[[], bool] | None:
        if self.after_child is None:
            return None
        try:
            return self.after_child(request)
        except Exception:
            return None  # sharing is an optimisation: the children do the work themselves

    def serve(self, inbox: int, outbox: int) -> None:
        # Ctrl-C reaches the whole foreground group; the parent decides what stops.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        preload_error = None
        if self.preload is not None:
            try:
                self.preload()
            except Exception:
                preload_error = traceback.format_exc()
        # Everything here now lives as long as the server: out of the collector's sight, a
        # child's collections skip it and do not copy its pages by touching reference counts.
        gc.freeze()
        lines = pipes.Lines(inbox)
        served = 0
        exiting: set[int] = set()
        pool = _Pool(self, (inbox, outbox))
        try:
            while True:
                pool.fill()
                try:
                    request = lines.read(None)
                except pipes.ServerError:
                    return  # the parent is gone
                if request is None or request.get("op") == "exit":
                    return
                announced = request.pop("next", None)
                rid = request.get("id")
                asked = {k: v for k, v in request.items() if k not in ("op", "id")}
                request["preload_error"] = preload_error
                _reap(exiting, block=False)
                child = pool.take(asked)
                while not child.hand(request):  # it died waiting (killed from outside)
                    child.discard()
                    child = pool.take(None)
                pipes.send(outbox, {"id": rid, "pid": child.pid})
                # The next test's child, forked already, is made ready for the announced
                # request while this one runs, and the pool forked full again: where a core is
                # free, the forks (milliseconds for a process holding torch) and the children's
                # set-up leave the critical path.
                pool.refill(announced, running=child.exit_read)
                status, exited = _wait_child(child.pid, child.exit_read)
                os.close(child.exit_read)
                kill_group(child.pid)  # leftovers of an exited child (a leaked pool, a compiler)
                if not exited:
                    exiting.add(child.pid)  # reported its code and is leaving: reaped later
                work = self._after_child(request)  # before the answer: its files are there
                pipes.send(outbox, {"id": rid, "pid": child.pid, "status": status})
                served += 1
                shared = work is not None and _run(work)
                if served == _COLLAPSE_AFTER or (shared and served > _COLLAPSE_AFTER):
                    # Once the session has shown it is long enough to repay it: the spares,
                    # forked before, keep small pages; the children forked after share these.
                    collapse_heap()
                if shared:
                    # What the server set up now is for the children forked from here on:
                    # the spares, forked before, are forked again (and readied again).
                    pool.renew()
        finally:
            pool.discard()
            _reap(exiting, block=True)

    def fork_spare(
        self, keep_closed: tuple[int, ...], expected: dict[str, Any] | None = None
    ) -> _Spare:
        """Fork a child for a later request; it runs warm_spare, then child_ready on expected
        (the request announced, when known at the fork), then waits, in its own process group,
        for messages on a pipe of its own: a request announced (it runs child_ready on it) and
        then the request itself (it runs child_main). At end of file it exits."""
        server = os.getpid()
        request_read, request_write = os.pipe()
        exit_read, exit_write = os.pipe()
        pid = pipes.fork()
        if pid == 0:
            code = 0
            try:
                os.setpgid(0, 0)
                die_with_parent(server)  # the server waits for it; if it goes, so does this
                for fd in (*keep_closed, request_write, exit_read):
                    os.close(fd)
                report_exit_to(exit_write)
                if self.warm_spare is not None:
                    try:
                        self.warm_spare()
                    except BaseException:
                        pass  # the test meets what was not warmed as a fresh process does
                if expected is not None:
                    self._ready(expected)
                request = self._await_request(pipes.Lines(request_read))
                if request is not None:
                    code = 70  # child_main must not return
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    self.child_main(request)
            finally:
                os._exit(code)
        os.close(request_read)
        os.close(exit_write)
        try:
            os.setpgid(pid, pid)  # also here: the parent may kill the group at once
        except OSError:
            pass
        return _Spare(pid, request_write, exit_read, expected)

    def _ready(self, expected: dict[str, Any]) -> None:
        if self.child_ready is not None:
            try:
                self.child_ready(expected)
            except BaseException:
                pass  # child_main finds it not ready and does the work itself

    def _await_request(self, messages: pipes.Lines) -> dict[str, Any] | None:
        """In a spare: the request it is to run, readying for an announced one on the way;
        None at end of file (no request will come)."""
        while True:
            try:
                message = messages.read(None)
            except pipes.ServerError:
                return None
            if message is None:
                continue
            if "expect" not in message:
                return message
            self._ready(message["expect"])


class _Pool:
    """The spares the server holds, oldest first; only the oldest is announced a request."""

    def __init__(self, loop: ServerLoop, keep_closed: tuple[int, ...]) -> None:
        self.loop = loop
        self.keep_closed = keep_closed
        self.spares: list[_Spare] = []

    def _fds(self, running: int | None) -> tuple[int, ...]:
        # A spare closes every other child's pipe ends: a spare's request pipe must reach end
        # of file when the server closes it, and a running child's exit pipe only its own.
        others = [fd for spare in self.spares for fd in (spare.request_write, spare.exit_read)
                  if fd >= 0]  # a discarded spare's are closed already
        return (*self.keep_closed, *others, *(() if running is None else (running,)))

    def fill(self, running: int | None = None) -> None:
        while len(self.spares) < self.loop.spares:
            self.spares.append(self.loop.fork_spare(self._fds(running)))

    def take(self, asked: dict[str, Any] | None) -> _Spare:
        """The spare for the request asked: the oldest, unless it was readied for another
        request (then the next, which was readied for none; or a new one)."""
        if self.spares and self.spares[0].expected not in (None, asked):
            self.spares.pop(0).discard()
        if not self.spares:
            self.fill()
        return self.spares.pop(0)

    def refill(self, announced: dict[str, Any] | None, running: int | None = None) -> None:
        """The pool forked full again, its oldest spare readied for the announced request (the
        next one the parent will ask for). A spare forked now is given it at the fork: no
        message to write and read (with one spare, the common case, every time); an older one
        is sent it."""
        if announced is not None:
            if not self.spares:
                self.spares.append(self.loop.fork_spare(self._fds(running), expected=announced))
            elif not self.spares[0].expect(announced):  # it died waiting
                self.spares.pop(0).discard()
        self.fill(running)

    def renew(self) -> None:
        """Every spare forked again from the server as it is now, the announced one readied."""
        expected = self.spares[0].expected if self.spares else None
        self.discard()
        self.refill(expected)

    def discard(self) -> None:
        while self.spares:
            self.spares.pop().discard()


def _run(work: Callable[[], bool]) -> bool:
    try:
        return bool(work())
    except Exception:
        return False  # sharing is an optimisation: the children do the work themselves


@dataclass
class _Spare:
    """A child forked ahead of its request, as the fork server holds it."""

    pid: int
    request_write: int
    exit_read: int
    expected: dict[str, Any] | None = None  # the request it was made ready for

    def _send(self, message: dict[str, Any]) -> bool:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.request_write, data) :]
        except OSError:
            return False
        return True

    def expect(self, request: dict[str, Any]) -> bool:
        """Announce the request it will be asked to run; False when it is gone already."""
        self.expected = request
        return self._send({"expect": request})

    def hand(self, request: dict[str, Any]) -> bool:
        """Send the child its request; False when it is gone already."""
        try:
            return self._send(request)
        finally:
            os.close(self.request_write)
            self.request_write = -1

    def discard(self) -> None:
        """Kill and reap a child that will run nothing."""
        for fd in (self.request_write, self.exit_read):
            if fd >= 0:
                os.close(fd)
        self.request_write = self.exit_read = -1
        kill_group(self.pid)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _wait_child(pid: int, exit_read: int) -> tuple[int, bool]:
    """(wait status, whether reaped) of a child: the code it reported through ``exit_now``
    as soon as it says it (it is then still exiting), else its real status once it is gone
    (a crash, a kill). A pipe alone could not say the latter: a process the test forked may
    hold its end open, so the child is also polled."""
    while True:
        ready, _, _ = select.select([exit_read], [], [], _EXIT_POLL)
        if ready:
            code = os.read(exit_read, 1)
            if code:
                return code[0] << 8, False
        reaped, status = os.waitpid(pid, 0 if ready else os.WNOHANG)
        if reaped:
            return status, True


def _reap(pids: set[int], block: bool) -> None:
    """Reap the children that reported their exit (all of them, waiting, with ``block``)."""
    for pid in list(pids):
        try:
            reaped, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            reaped = pid
        if reaped:
            pids.discard(pid)
