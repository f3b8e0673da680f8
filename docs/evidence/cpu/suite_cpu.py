"""Where the suite's CPU goes: a pytest plugin that writes, per test, its wall time, the CPU of
the pytest process during it, and the CPU of the child processes reaped during it (cold
children, pytester subprocesses, compilers), then a summary by file.

    PYTHONPATH=docs/evidence/cpu pytest -n auto -p suite_cpu    # then:
    python docs/evidence/cpu/suite_cpu.py [SUITE_CPU_LOG]

Lines go to $SUITE_CPU_LOG (default /tmp/suite-cpu.log). A cold child runs the test's protocol
too, and writes its own line: its fork server reaps it, so the pytest process never counts its
CPU. A test's CPU is the sum of its lines; its wall time, the pytest process's line.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict

import pytest

LOG = os.environ.get("SUITE_CPU_LOG", "/tmp/suite-cpu.log")
_SESSION_PID = os.getpid()


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    yield
    where = "session" if os.getpid() == _SESSION_PID else "child"
    with open(LOG, "a") as out:
        out.write(f"{time.perf_counter() - began:.2f}\t{_cpu(resource.RUSAGE_SELF) - own:.2f}\t"
                  f"{_cpu(resource.RUSAGE_CHILDREN) - children:.2f}\t{item.nodeid}\t{where}\n")


def summary(path: str) -> None:
    by_file: dict[str, float] = defaultdict(float)
    wall = own = children = 0.0
    for line in open(path):
        w, o, c, nodeid, where = line.rstrip("\n").split("\t")
        wall += float(w) if where == "session" else 0.0
        own, children = own + float(o), children + float(c)
        by_file[nodeid.split("::")[0]] += float(o) + float(c)
    print(f"tests' wall {wall:.0f} s; CPU {own + children:.0f} s "
          f"(the processes running tests {own:.0f}, their children {children:.0f})")
    for name, cpu in sorted(by_file.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{cpu:7.1f}  {name}")


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else LOG)
