"""The fork server's handle in the pytest process: it forks the server (a clean copy of pytest,
forked before the first test, which forks each cold child; ``server_loop``), sends it requests
and waits for their children.

Children of the server inherit the collected session but none of the compile state that
tests later build up in the pytest process. One JSON object per line crosses the pipes; each
answer carries its request's id, so an answer to an abandoned request is never taken for the next.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_coldcompile.isolation import pipes
from pytest_coldcompile.isolation.pipes import ServerError
from pytest_coldcompile.isolation.server_loop import AfterChild, ServerLoop
from pytest_coldcompile.processes import (
    die_with_parent,
    kill_group,
)

# How long the parent waits for the server's answers that need no test to run.
_REPLY_TIMEOUT = 120.0
# How long the server may take, beyond the test's own limit, to fork a child: it may still be
# preloading (torch and triton take tens of seconds on a cold disk), but never forever.
PRELOAD_BOUND = 300.0
# How long an interrupted parent waits for the server to reap the child it killed.
_ABANDON_TIMEOUT = 10.0


@dataclass
class ChildExit:
    """How a cold child ended."""

    pid: int
    returncode: int | None = None  # exit status when it exited
    signal: int | None = None  # the signal that ended it
    timed_out: bool = False
    seconds: float = 0.0


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
        spares: int = 1,
        warm_spare: Callable[[], Any] | None = None,
    ) -> None:
        self.child_main = child_main
        # How many children the server keeps forked ahead of their requests, each running
        # warm_spare first (server_loop.ServerLoop).
        self.spares = spares
        self.warm_spare = warm_spare
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
        self._from: pipes.Lines | None = None
        self._last_id = 0
        self._finished: list[str] = []  # directories to remove (remove_later)

    def start(self) -> None:
        server_in, to_server = os.pipe()
        from_server, server_out = os.pipe()
        parent = os.getpid()
        pid = pipes.fork()
        if pid == 0:
            code = 0
            try:
                os.close(to_server)
                os.close(from_server)
                die_with_parent(parent)
                ServerLoop(self.child_main, self.preload, self.child_ready, self.after_child,
                           self.spares, self.warm_spare).serve(server_in, server_out)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(server_in)
        os.close(server_out)
        self.pid, self._to, self._from = pid, to_server, pipes.Lines(from_server)

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
            pipes.send(self._to, {"op": "run", **request, "id": rid})
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
                pipes.send(self._to, {"op": "exit"})
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


