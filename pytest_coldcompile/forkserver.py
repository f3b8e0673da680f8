"""The fork server: a clean copy of pytest, forked before the first test, forking each cold child.

Children of the server inherit the collected session but none of the compile state that
tests later build up in the pytest process. One JSON object per line crosses the pipes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_coldcompile.processes import die_with_parent, kill_group

# How long the parent waits for the server's answers that need no test to run.
_REPLY_TIMEOUT = 120.0


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
        self, child_main: Callable[[dict[str, Any]], Any], preload: Callable[[], Any] | None = None
    ) -> None:
        self.child_main = child_main
        self.preload = preload
        self.pid: int | None = None
        self.running: int | None = None  # the child being waited for
        self._to: int | None = None
        self._from: _Lines | None = None

    def start(self) -> None:
        server_in, to_server = os.pipe()
        from_server, server_out = os.pipe()
        pid = _fork()
        if pid == 0:
            code = 0
            try:
                os.close(to_server)
                os.close(from_server)
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
        die_with_parent()
        preload_error = None
        if self.preload is not None:
            try:
                self.preload()
            except Exception:
                preload_error = traceback.format_exc()
        lines = _Lines(inbox)
        while True:
            try:
                request = lines.read(None)
            except ServerError:
                return  # the parent is gone
            if request is None or request.get("op") == "exit":
                return
            request["preload_error"] = preload_error
            pid = _fork()
            if pid == 0:
                os.setpgid(0, 0)
                die_with_parent()  # the server waits in waitpid; if it goes, so does this
                os.close(inbox)
                os.close(outbox)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                try:
                    self.child_main(request)
                finally:
                    os._exit(70)
            try:
                os.setpgid(pid, pid)  # also here: the parent may kill the group at once
            except OSError:
                pass
            _send(outbox, {"pid": pid})
            _, status = os.waitpid(pid, 0)
            kill_group(pid)  # leftovers of a child that exited (a leaked pool, a compiler)
            _send(outbox, {"pid": pid, "status": status})

    # -- parent side ---------------------------------------------------------------------
    def run(self, request: dict[str, Any], timeout: float | None) -> ChildExit:
        """Fork one child for request and wait for it, killing its group after timeout."""
        if self._to is None or self._from is None:
            raise ServerError("the fork server is not running")
        began = time.monotonic()
        try:
            _send(self._to, {"op": "run", **request})
        except OSError as exc:
            raise ServerError(f"the fork server does not listen: {exc}") from exc
        # The server may still be preloading; give it the same patience as the test.
        first = self._from.read(None)
        assert first is not None
        result = ChildExit(pid=int(first["pid"]))
        self.running = result.pid
        reply = self._from.read(timeout)
        if reply is None:
            result.timed_out = True
            kill_group(result.pid)
            reply = self._from.read(_REPLY_TIMEOUT)
            if reply is None:
                raise ServerError("the fork server did not reap a killed child")
        self.running = None
        result.returncode, result.signal = _wait_status(int(reply["status"]))
        result.seconds = time.monotonic() - began
        return result

    def stop(self) -> None:
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

    def kill(self) -> None:
        """Stop at once (on an interrupt): kill the running child's group, then the server."""
        if self.running is not None:
            kill_group(self.running)
            self.running = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.stop()


def _fork() -> int:
    # Python 3.12 warns when forking a process with threads (xdist's execnet has one, an
    # import may start more); the forked side only runs the test or forks again, and under
    # -W error the warning would raise after the fork had happened.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()

