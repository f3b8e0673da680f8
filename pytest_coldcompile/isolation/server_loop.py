"""The fork server's own side: its loop over the parent's requests, the child it forks ahead of
each request (readied for the announced one), reaping, and the step after each child. Runs in
the server process; the parent's handle is ``forkserver.ForkServer``.
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
    announced request, after_child(request) when a child has ended."""

    def __init__(
        self,
        child_main: Callable[[dict[str, Any]], Any],
        preload: Callable[[], Any] | None,
        child_ready: Callable[[dict[str, Any]], Any] | None,
        after_child: AfterChild | None,
    ) -> None:
        self.child_main = child_main
        self.preload = preload
        self.child_ready = child_ready
        self.after_child = after_child

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
        spare: _Spare | None = None
        try:
            while True:
                if spare is None:
                    spare = self._fork_spare(keep_closed=(inbox, outbox))
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
                child, spare = spare, None
                if child.expected is not None and child.expected != asked:
                    child.discard()  # made ready for another request than this one
                    child = self._fork_spare(keep_closed=(inbox, outbox))
                while not child.hand(request):  # it died waiting (killed from outside)
                    child.discard()
                    child = self._fork_spare(keep_closed=(inbox, outbox))
                pipes.send(outbox, {"id": rid, "pid": child.pid})
                # The next test's child is forked, and made ready for the announced request,
                # while this one runs: where a core is free, the fork (milliseconds for a
                # process holding torch) and the child's set-up leave the critical path.
                spare = self._fork_spare(
                    keep_closed=(inbox, outbox, child.exit_read), expected=announced
                )
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
                    # Once the session has shown it is long enough to repay it: the spare,
                    # forked before, keeps small pages; the children forked after share these.
                    collapse_heap()
                if shared:
                    # What the server set up now is for the children forked from here on:
                    # the spare, forked before, is forked again (and readied again).
                    expected = spare.expected
                    spare.discard()
                    spare = self._fork_spare(keep_closed=(inbox, outbox), expected=expected)
        finally:
            if spare is not None:
                spare.discard()
            _reap(exiting, block=True)

    def _fork_spare(
        self, keep_closed: tuple[int, ...], expected: dict[str, Any] | None = None
    ) -> _Spare:
        """Fork the child for the next request; it waits, in its own process group, for the
        request on a pipe of its own and then runs child_main (an end of file: it exits).
        With ``expected`` it first runs child_ready on it."""
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
                if expected is not None and self.child_ready is not None:
                    try:
                        self.child_ready(expected)
                    except BaseException:
                        pass  # child_main finds it not ready and does the work itself
                request = _read_request(request_read)
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

    def hand(self, request: dict[str, Any]) -> bool:
        """Send the child its request; False when it is gone already."""
        data = (json.dumps(request) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.request_write, data) :]
        except OSError:
            return False
        finally:
            os.close(self.request_write)
            self.request_write = -1
        return True

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


def _read_request(fd: int) -> dict[str, Any] | None:
    """The request a spare child waits for; None at end of file (no request will come)."""
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    os.close(fd)
    return json.loads(data) if data.strip() else None


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
