"""Messages between the pytest process, its fork server and the server's children: one JSON
object per line over a pipe, read with a deadline; and the fork they all use.
"""

from __future__ import annotations

import json
import os
import select
import time
import warnings
from typing import Any


class ServerError(RuntimeError):
    """The fork server died or stopped answering."""


class Lines:
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


def send(fd: int, message: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def fork() -> int:
    # Python 3.12 warns when forking a process with threads (xdist's execnet has one, an
    # import may start more); the forked side only runs the test or forks again, and under
    # -W error the warning would raise after the fork had happened.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()
