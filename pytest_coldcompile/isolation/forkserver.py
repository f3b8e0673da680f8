"""The fork server: a clean copy of pytest, forked before the first test, forking each cold child.

Children of the server inherit the collected session but none of the compile state that
tests later build up in the pytest process. One JSON object per line crosses the pipes; each
answer carries its request's id, so an answer to an abandoned request is never taken for the next.
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_coldcompile.processes import (
    collapse_heap,
    die_with_parent,
    kill_group,
    report_exit_to,
)

# How long the parent waits for the server's answers that need no test to run.
_REPLY_TIMEOUT = 120.0
# How long the server may take, beyond the test's own limit, to fork a child: it may still be
# preloading (torch and triton take tens of seconds on a cold disk), but never forever.
PRELOAD_BOUND = 300.0
# How long an interrupted parent waits for the server to reap the child it killed.
_ABANDON_TIMEOUT = 10.0
# How often the server checks whether a child that has not reported its exit is gone.
_EXIT_POLL = 0.05
# After how many children the server puts its memory in huge pages (processes.collapse_heap):
# a fraction of a second once for a server holding torch, repaid in a few dozen children.
_COLLAPSE_AFTER = 16


@dataclass
class ChildExit:
    """How a cold child ended."""

    pid: int
    returncode: int | None = None  # exit status when it exited
    signal: int | None = None  # the signal that ended it
    timed_out: bool = False
    seconds: float = 0.0


class ServerError(RuntimeError):
    """The fork server died or stopped answering."""


class _Lines:
    """Line reader over a raw pipe with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message; None when the deadline passes first. ServerError on EOF."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise ServerError("the fork server exited")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def _send(fd: int, message: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def _wait_status(status: int) -> tuple[int | None, int | None]:
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


class ForkServer:
    """Parent-side handle. child_main(request) runs in each forked child and must not return."""

    def __init__(
        self,
        child_main: Callable[[dict[str, Any]], Any],
        preload: Callable[[], Any] | None = None,
        preload_bound: float = PRELOAD_BOUND,
        child_ready: Callable[[dict[str, Any]], Any] | None = None,
        after_child: AfterChild | None = None,
    ) -> None:
        self.child_main = child_main
        self.preload = preload
        # In the server, when a child has ended, while its directory is still there: returns
        # the work to do once its status is answered (or None); what that work sets up, the
        # children forked after it inherit. The work returns True when it set up anything.
        self.after_child = after_child
        # Run in a child forked ahead of its request, with the request the parent announced
        # (a request's "next"); the child then runs child_main only if that request comes.
        self.child_ready = child_ready
        self.preload_bound = preload_bound
        self.pid: int | None = None
        self.running: int | None = None  # the child being waited for
        self._to: int | None = None
        self._from: _Lines | None = None
        self._last_id = 0
        self._finished: list[str] = []  # directories to remove (remove_later)

    def _after_child(self, request: dict[str, Any]) -> Callable[[], bool] | None:
        if self.after_child is None:
            return None
        try:
            return self.after_child(request)
        except Exception:
            return None  # sharing is an optimisation: the children do the work themselves

    def start(self) -> None:
        server_in, to_server = os.pipe()
        from_server, server_out = os.pipe()
        parent = os.getpid()
        pid = _fork()
        if pid == 0:
            code = 0
            try:
                os.close(to_server)
                os.close(from_server)
                die_with_parent(parent)
                self._serve(server_in, server_out)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(server_in)
        os.close(server_out)
        self.pid, self._to, self._from = pid, to_server, _Lines(from_server)

    # -- server side ---------------------------------------------------------------------
    def _serve(self, inbox: int, outbox: int) -> None:
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
        lines = _Lines(inbox)
        served = 0
        exiting: set[int] = set()
        spare: _Spare | None = None
        try:
            while True:
                if spare is None:
                    spare = self._fork_spare(keep_closed=(inbox, outbox))
                try:
                    request = lines.read(None)
                except ServerError:
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
                _send(outbox, {"id": rid, "pid": child.pid})
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
                _send(outbox, {"id": rid, "pid": child.pid, "status": status})
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
        pid = _fork()
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

    # -- parent side ---------------------------------------------------------------------
    def run(self, request: dict[str, Any], timeout: float | None) -> ChildExit:
        """Fork one child for request and wait for it, killing its group after timeout.

        Whatever interrupts the wait (pytest-timeout's Failed, KeyboardInterrupt, anything)
        kills the child's group and re-raises; the server is drained of that request's answers
        or, when it cannot be, killed. ServerError always leaves the server killed and reaped.
        """
        if self._to is None or self._from is None:
            raise ServerError("the fork server is not running")
        self._last_id += 1
        rid = self._last_id
        began = time.monotonic()
        try:
            _send(self._to, {"op": "run", **request, "id": rid})
        except OSError as exc:
            self.kill()
            raise ServerError(f"the fork server does not listen: {exc}") from exc
        try:
            self._remove_finished()  # while the child runs
            return self._wait(rid, began, timeout)
        except ServerError:
            self.kill()
            raise
        except BaseException:
            self._abandon(rid)
            raise

    def _next(self, rid: int, timeout: float | None) -> dict[str, Any] | None:
        """The next answer to request rid; answers to earlier requests are skipped (and a
        child the parent never learned of is killed: nobody waits for its result)."""
        assert self._from is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            reply = self._from.read(left)
            if reply is None or reply.get("id") == rid:
                return reply
            if "status" not in reply and "pid" in reply:
                kill_group(int(reply["pid"]))

    def _wait(self, rid: int, began: float, timeout: float | None) -> ChildExit:
        bound = self.preload_bound + (timeout or 0.0)
        first = self._next(rid, bound)
        if first is None:
            raise ServerError(
                f"the fork server did not fork a child within {bound:g} s "
                "(stuck while preloading?); it was killed"
            )
        result = ChildExit(pid=int(first["pid"]))
        self.running = result.pid
        reply = self._next(rid, timeout)
        if reply is None:
            result.timed_out = True
            kill_group(result.pid)
            reply = self._next(rid, _REPLY_TIMEOUT)
            if reply is None:
                raise ServerError("the fork server did not reap a killed child")
        self.running = None
        result.returncode, result.signal = _wait_status(int(reply["status"]))
        result.seconds = time.monotonic() - began
        return result

    def _abandon(self, rid: int) -> None:
        """Kill request rid's child and read the server's answers up to its status, so the
        next request starts in step; a server that does not answer in time is killed."""
        try:
            if self.running is not None:
                kill_group(self.running)
            deadline = time.monotonic() + _ABANDON_TIMEOUT
            while True:
                reply = self._next(rid, max(0.0, deadline - time.monotonic()))
                if reply is None:
                    self.kill()  # still preloading or stuck: not worth waiting for
                    return
                if "status" in reply:
                    self.running = None
                    return
                kill_group(int(reply["pid"]))  # a child the parent had not heard of yet
        except ServerError:
            self.kill()  # the server is gone: the caller's own exception is the one to tell
        except BaseException:
            # A second interrupt, or a dead server: nothing of this may outlive us.
            self.kill()
            raise

    def remove_later(self, directory: str) -> None:
        """Remove directory (a finished child's) once the next request is sent, or at stop:
        on a disk file system, removing a test's files takes milliseconds of waiting on the
        journal that the next test need not spend first."""
        self._finished.append(directory)

    def _remove_finished(self) -> None:
        while self._finished:
            shutil.rmtree(self._finished.pop(), ignore_errors=True)

    def stop(self) -> None:
        """Ask the server to exit and reap it; a child still running is killed first."""
        if self.running is not None:
            kill_group(self.running)
            self.running = None
        if self._to is not None:
            try:
                _send(self._to, {"op": "exit"})
            except OSError:
                pass
            os.close(self._to)
            self._to = None
        if self._from is not None:
            os.close(self._from.fd)
            self._from = None
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = None
        self._remove_finished()

    def kill(self) -> None:
        """Stop at once: kill the running child's group, then the server, and reap it."""
        if self.running is not None:
            kill_group(self.running)
            self.running = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.stop()


AfterChild = Callable[[dict[str, Any]], "Callable[[], bool] | None"]


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


def _fork() -> int:
    # Python 3.12 warns when forking a process with threads (xdist's execnet has one, an
    # import may start more); the forked side only runs the test or forks again, and under
    # -W error the warning would raise after the fork had happened.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()
