"""The fork server's protocol on its own: bounded waits, abandoned requests, stop, orphans.

These drive ForkServer directly from the test process; each child writes its pid to a file so
the test can tell whether it is still alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from coldhelp import linux_only, needs_fork

from pytest_coldcompile.isolation.forkserver import ForkServer, ServerError

pytestmark = needs_fork


def gone(pid: int) -> bool:
    """True when pid no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def sleeper(request: dict[str, Any]) -> None:
    """child_main: write the pid, sleep as asked, exit with the asked code."""
    Path(request["pidfile"]).write_text(str(os.getpid()))
    time.sleep(request.get("sleep", 0))
    os._exit(request.get("code", 0))


def read_pid(path: Path, within: float = 10) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


class Interrupted(BaseException):
    """Stands for pytest-timeout's Failed: a BaseException raised inside the parent's wait."""


@pytest.fixture
def alarm() -> Iterator[Any]:
    def raise_interrupted(signum: int, frame: Any) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, raise_interrupted)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def server() -> Iterator[ForkServer]:
    srv = ForkServer(sleeper)
    srv.start()
    yield srv
    srv.kill()


def test_a_server_stuck_in_preload_is_killed_and_reaped_within_the_bound() -> None:
    srv = ForkServer(sleeper, preload=lambda: time.sleep(3600), preload_bound=1.0)
    srv.start()
    pid = srv.pid
    assert pid is not None
    began = time.monotonic()
    try:
        with pytest.raises(ServerError, match="did not fork a child within 1 s"):
            srv.run({"pidfile": os.devnull}, timeout=None)
        assert time.monotonic() - began < 30
        assert srv.pid is None
        with pytest.raises(ChildProcessError):  # reaped, not just forgotten
            os.waitpid(pid, os.WNOHANG)
    finally:
        srv.kill()


def test_an_interrupted_request_kills_its_child_and_the_next_reads_its_own_status(
    server: ForkServer, tmp_path: Path, alarm: Any
) -> None:
    first = tmp_path / "first.pid"
    alarm(1.0)
    with pytest.raises(Interrupted):
        server.run({"pidfile": str(first), "sleep": 30, "code": 0}, timeout=None)
    assert wait_gone(read_pid(first), within=10)
    began = time.monotonic()
    ended = server.run({"pidfile": str(tmp_path / "second.pid"), "code": 3}, timeout=20)
    assert time.monotonic() - began < 15
    assert (ended.returncode, ended.signal, ended.timed_out) == (3, None, False)
    assert ended.pid == read_pid(tmp_path / "second.pid")


def test_an_interrupt_before_the_child_is_known_still_kills_it(tmp_path: Path, alarm: Any) -> None:
    # The interrupt lands while the server is still preloading: the parent has no pid yet.
    srv = ForkServer(sleeper, preload=lambda: time.sleep(1.5))
    srv.start()
    try:
        child = tmp_path / "child.pid"
        alarm(0.5)
        with pytest.raises(Interrupted):
            srv.run({"pidfile": str(child), "sleep": 30}, timeout=None)
        if child.exists() and child.read_text():
            assert wait_gone(int(child.read_text()), within=10)
        if srv.pid is not None:  # resynchronized rather than killed: it must still work
            ended = srv.run({"pidfile": str(tmp_path / "next.pid"), "code": 5}, timeout=20)
            assert ended.returncode == 5
    finally:
        srv.kill()


def test_stop_kills_a_running_child_before_waiting_for_the_server(
    server: ForkServer, tmp_path: Path, alarm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Leave the child running as an interrupted caller that never cleaned up would.
    monkeypatch.setattr(server, "_abandon", lambda rid: None)
    child = tmp_path / "child.pid"
    alarm(1.0)
    with pytest.raises(Interrupted):
        server.run({"pidfile": str(child), "sleep": 30}, timeout=None)
    pid = read_pid(child)
    assert not gone(pid)
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 10
    assert wait_gone(pid, within=5)


@linux_only
def test_a_server_whose_parent_died_before_arming_does_not_stay_an_orphan(tmp_path: Path) -> None:
    # The parent exits at once; the server arms die_with_parent only a second later (as if the
    # parent died in that window) and would then preload for an hour.
    pidfile = tmp_path / "server.pid"
    script = textwrap.dedent(
        f"""
        import os, time
        from pytest_coldcompile.isolation import forkserver
        real = forkserver.die_with_parent

        def late(*args):
            with open({str(pidfile)!r}, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(1.0)
            real(*args)

        forkserver.die_with_parent = late
        srv = forkserver.ForkServer(lambda r: os._exit(0), preload=lambda: time.sleep(3600))
        srv.start()
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    pid = read_pid(pidfile)
    try:
        assert wait_gone(pid, within=15), "the orphaned fork server is still running"
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def reporting(request: dict[str, Any]) -> None:
    """child_main: leave a grandchild holding every inherited fd, then end as asked."""
    from pytest_coldcompile.processes import exit_now

    grandchild = os.fork()
    if grandchild == 0:
        Path(request["pidfile"]).write_text(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
    read_pid(Path(request["pidfile"]))
    if request["end"] == "exit_now":
        exit_now(request["code"])
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("end", ["exit_now", "killed"])
def test_the_exit_is_reported_whoever_holds_the_childs_pipe(tmp_path: Path, end: str) -> None:
    """A child that leaves through exit_now is reported with its code at once (its address
    space is torn down while the next test starts); one that dies otherwise is reported from
    its real status, though a process it forked still holds the exit pipe open. Either way
    its group is killed, the grandchild with it."""
    srv = ForkServer(reporting)
    srv.start()
    try:
        pidfile = tmp_path / "grandchild"
        began = time.monotonic()
        ended = srv.run({"pidfile": str(pidfile), "end": end, "code": 3}, timeout=30)
        assert time.monotonic() - began < 10  # never the grandchild's 60 s
        if end == "exit_now":
            assert (ended.returncode, ended.signal) == (3, None)
        else:
            assert (ended.returncode, ended.signal) == (None, signal.SIGKILL)
        assert wait_gone(read_pid(pidfile), within=10)
        assert wait_gone(ended.pid, within=10)
        # The server goes on serving.
        again = srv.run({"pidfile": str(tmp_path / "again"), "end": "exit_now", "code": 0},
                        timeout=30)
        assert again.returncode == 0
    finally:
        srv.stop()
    assert srv.pid is None


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(p) for p in (task / "children").read_text().split())
    return {p for p in found if not gone(p)}


def wait_children(pid: int, count: int, within: float = 10) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = children_of(pid)
        if len(found) == count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"server {pid} has children {children_of(pid)}, expected {count}")


@linux_only
def test_the_next_child_is_forked_ahead_and_serves_the_next_request(
    server: ForkServer, tmp_path: Path
) -> None:
    """The child for a request is forked before the request comes (the fork leaves the
    critical path); it is the one that runs the request, and one is always waiting."""
    assert server.pid is not None
    (waiting,) = wait_children(server.pid, 1)
    ended = server.run({"pidfile": str(tmp_path / "a.pid"), "code": 4}, timeout=20)
    assert ended.pid == waiting == read_pid(tmp_path / "a.pid")
    assert ended.returncode == 4
    (next_waiting,) = wait_children(server.pid, 1)
    assert next_waiting != waiting


@linux_only
def test_a_waiting_child_killed_from_outside_is_replaced(
    server: ForkServer, tmp_path: Path
) -> None:
    assert server.pid is not None
    (waiting,) = wait_children(server.pid, 1)
    os.kill(waiting, signal.SIGKILL)
    assert wait_gone(waiting, within=10)
    ended = server.run({"pidfile": str(tmp_path / "a.pid"), "code": 0}, timeout=20)
    assert ended.returncode == 0
    assert ended.pid != waiting and ended.pid == read_pid(tmp_path / "a.pid")


@linux_only
def test_stop_leaves_no_waiting_child(tmp_path: Path) -> None:
    srv = ForkServer(sleeper)
    srv.start()
    assert srv.pid is not None
    (waiting,) = wait_children(srv.pid, 1)
    srv.run({"pidfile": str(tmp_path / "a.pid")}, timeout=20)
    (waiting,) = wait_children(srv.pid, 1)
    srv.stop()
    assert wait_gone(waiting, within=10)


def ready_marker(request: dict[str, Any]) -> None:
    """child_ready: leave a file saying which announced request this child was readied for."""
    Path(request["dir"], f"ready-{os.getpid()}").write_text(request["tag"])


def readied_for(directory: Path, pid: int) -> str | None:
    path = directory / f"ready-{pid}"
    return path.read_text() if path.exists() else None


@pytest.fixture
def readying_server() -> Iterator[ForkServer]:
    srv = ForkServer(sleeper, child_ready=ready_marker)
    srv.start()
    yield srv
    srv.stop()


def tagged(directory: Path, tag: str, **extra: Any) -> dict[str, Any]:
    """A sleeper request whose child writes its pid to ``<tag>.pid``."""
    return {"pidfile": str(directory / f"{tag}.pid"), "tag": tag, "dir": str(directory), **extra}


@linux_only
def test_the_announced_request_runs_in_the_child_readied_for_it(
    readying_server: ForkServer, tmp_path: Path
) -> None:
    srv = readying_server
    second = tagged(tmp_path, "B")
    first = srv.run(tagged(tmp_path, "A", next=second), timeout=20)
    assert readied_for(tmp_path, first.pid) is None  # nothing was announced for it
    ended = srv.run(second, timeout=20)
    assert ended.pid == read_pid(tmp_path / "B.pid")
    assert readied_for(tmp_path, ended.pid) == "B"


@linux_only
def test_a_child_readied_for_another_request_never_runs_this_one(
    readying_server: ForkServer, tmp_path: Path
) -> None:
    srv = readying_server
    srv.run(tagged(tmp_path, "A", next=tagged(tmp_path, "B")), timeout=20)
    assert srv.pid is not None
    (readied,) = wait_children(srv.pid, 1)
    deadline = time.monotonic() + 10
    while readied_for(tmp_path, readied) != "B" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert readied_for(tmp_path, readied) == "B"
    # A rerun, say: another request than the announced one comes.
    ended = srv.run(tagged(tmp_path, "C", code=6), timeout=20)
    assert (ended.returncode, ended.pid) == (6, read_pid(tmp_path / "C.pid"))
    assert ended.pid != readied and readied_for(tmp_path, ended.pid) is None
    assert wait_gone(readied, within=10)
    assert not (tmp_path / "B.pid").exists()


@pytest.mark.parametrize("reporting", [True, False])
def test_a_child_that_reported_its_exit_leaves_at_the_lowest_priority(reporting: bool) -> None:
    """Once the server knows the exit code, the teardown of the child's address space (about
    10 ms of kernel time with torch loaded) must not compete with the next test's child."""
    script = textwrap.dedent(
        f"""
        import os
        from pytest_coldcompile import processes
        if {reporting}:
            read, write = os.pipe()
            processes.report_exit_to(write)
        real_exit = os._exit
        os._exit = lambda code: (print(os.nice(0), flush=True), real_exit(code))
        processes.exit_now(3)
        """
    )
    before = os.nice(0)
    if before >= 19:  # the lowest priority already: a child that lowered its own looks the same
        pytest.skip("this process runs at nice 19: no lower priority to tell apart")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    assert int(done.stdout) == (19 if reporting else before)


def _huge_page_kernel() -> bool:
    """MADV_COLLAPSE: Linux 6.1 and later, with transparent huge pages built in."""
    if not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists():
        return False
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 1)


_BIG: list[bytearray] = []


def hold_memory() -> None:
    """preload: 64 MiB of the server's own, written (a library's heap, a collected session)."""
    _BIG.append(bytearray(b"x" * (64 << 20)))


def huge_pages_of_child(request: dict[str, Any]) -> None:
    """child_main: write the anonymous huge pages this child holds (kB), before it writes any."""
    text = Path("/proc/self/smaps_rollup").read_text()
    kb = next(line.split()[1] for line in text.splitlines() if line.startswith("AnonHugePages"))
    Path(request["out"]).write_text(kb)
    os._exit(0)


@linux_only
@pytest.mark.skipif(not _huge_page_kernel(), reason="needs MADV_COLLAPSE (Linux 6.1)")
def test_a_long_serving_server_forks_children_that_share_its_memory_in_huge_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork copies, and an exit drops, one page-table entry per page of the server's
    memory: once a server has served enough children to be worth it, that memory is in huge
    pages, and the children forked after inherit them."""
    from pytest_coldcompile.isolation import server_loop

    monkeypatch.setattr(server_loop, "_COLLAPSE_AFTER", 2)
    srv = ForkServer(huge_pages_of_child, preload=hold_memory)
    srv.start()
    try:
        held = []
        for n in range(4):
            srv.run({"out": str(tmp_path / f"{n}.kb")}, timeout=60)
            held.append(int((tmp_path / f"{n}.kb").read_text()))
    finally:
        srv.stop()
    assert held[0] == 0  # short sessions pay nothing for it
    assert held[3] >= 32 << 10


@linux_only
def test_a_finished_childs_directory_is_removed_while_the_next_child_runs(
    server: ForkServer, tmp_path: Path
) -> None:
    """Removing a directory is file-system work the next test need not wait for: the parent
    does it once the next request is sent, and stop() does what is left."""
    done = tmp_path / "done"
    done.mkdir()
    (done / "records").write_text("x")
    server.remove_later(str(done))
    assert done.exists()
    server.run({"pidfile": str(tmp_path / "a.pid")}, timeout=20)
    assert not done.exists()
    last = tmp_path / "last"
    last.mkdir()
    server.remove_later(str(last))
    server.stop()
    assert not last.exists()


def warmed_in(directory: Path) -> Any:
    """warm_spare: leave a file saying this child warmed before any request reached it."""

    def warm() -> None:
        Path(directory, f"warm-{os.getpid()}").write_text(str(os.getpid()))

    return warm


@linux_only
def test_a_pool_of_spares_keeps_that_many_children_warmed_ahead(tmp_path: Path) -> None:
    """spares=3: three children wait, each warmed as soon as forked; a request runs in the
    oldest, the announced one is readied in the next, and the pool is forked full again."""
    srv = ForkServer(sleeper, child_ready=ready_marker, spares=3,
                     warm_spare=warmed_in(tmp_path))
    srv.start()
    try:
        assert srv.pid is not None
        waiting = wait_children(srv.pid, 3)
        for pid in waiting:
            read_pid(tmp_path / f"warm-{pid}")  # exists once it has warmed
        first = srv.run(tagged(tmp_path, "A", next=tagged(tmp_path, "B")), timeout=20)
        assert first.pid in waiting
        assert len(wait_children(srv.pid, 3)) == 3
        second = srv.run(tagged(tmp_path, "B"), timeout=20)
        assert second.pid in waiting and second.pid != first.pid
        assert readied_for(tmp_path, second.pid) == "B"
        third = srv.run(tagged(tmp_path, "C"), timeout=20)  # announced to none
        assert third.pid in waiting and readied_for(tmp_path, third.pid) is None
        for ended, tag in ((first, "A"), (second, "B"), (third, "C")):
            assert ended.pid == read_pid(tmp_path / f"{tag}.pid")
            assert (tmp_path / f"warm-{ended.pid}").exists()
    finally:
        srv.stop()
    assert all(wait_gone(pid, within=10) for pid in waiting)


@linux_only
def test_in_a_pool_a_spare_readied_for_another_request_is_replaced(tmp_path: Path) -> None:
    srv = ForkServer(sleeper, child_ready=ready_marker, spares=2)
    srv.start()
    try:
        srv.run(tagged(tmp_path, "A", next=tagged(tmp_path, "B")), timeout=20)
        assert srv.pid is not None
        deadline = time.monotonic() + 10
        readied: list[int] = []
        while not readied and time.monotonic() < deadline:
            readied = [p for p in wait_children(srv.pid, 2) if readied_for(tmp_path, p) == "B"]
            time.sleep(0.02)
        (readied_pid,) = readied
        ended = srv.run(tagged(tmp_path, "C", code=6), timeout=20)  # not the announced one
        assert (ended.returncode, ended.pid) == (6, read_pid(tmp_path / "C.pid"))
        assert ended.pid != readied_pid and readied_for(tmp_path, ended.pid) is None
        assert wait_gone(readied_pid, within=10)
        assert not (tmp_path / "B.pid").exists()
    finally:
        srv.stop()


def test_a_pool_of_no_spares_is_refused_not_raised_to_one() -> None:
    from pytest_coldcompile.isolation.server_loop import ServerLoop

    with pytest.raises(ValueError, match=r"spares: expected a whole number >= 1, got 0"):
        ServerLoop(lambda request: None, None, None, None, spares=0)
