"""The bug-active run inside a cold child: brings the bug back around the test's call, judges
how the test ended (exception objects do not cross processes), and writes the verdict as one
"proof" record that the parent reads back.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
from collections.abc import Generator
from typing import Any

import pytest

from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.prove import marker
from pytest_coldcompile.records import write_record

PROOF_RECORD = "proof"
_GROUP = getattr(builtins, "BaseExceptionGroup", ())
_MESSAGE_CHARS = 2000


def linked(exc: BaseException) -> list[BaseException]:
    """exc and every exception reachable from it through __cause__, __context__ (unless
    suppressed) and exception groups, outermost first, each once."""
    seen: set[int] = set()
    order: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        one = todo.pop(0)
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        order.append(one)
        todo.append(one.__cause__)
        if not one.__suppress_context__:  # "raise ... from None" ends the chain, as printed
            todo.append(one.__context__)
        if _GROUP and isinstance(one, _GROUP):
            todo += list(one.exceptions)
    return order


def type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def location(exc: BaseException, root: str) -> str | None:
    """file:line of the innermost frame of exc's traceback, relative to root inside it."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = tb.tb_frame.f_code.co_filename
    try:
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{tb.tb_lineno}"


def described(exc: BaseException, root: str) -> dict[str, Any]:
    return {
        "exception": type_name(exc),
        "message": str(exc)[:_MESSAGE_CHARS],
        "location": location(exc, root),
        "chain": [type_name(e) for e in linked(exc)],
    }


class ProofLeg:
    """Plugin of a cold child with a "prove" order: leg "cold" runs the test with the bug
    active, leg "warm" calls the masked_by warm-up first, with the bug active too."""

    def __init__(self, config: pytest.Config, spec: ChildSpec) -> None:
        self.leg = str(spec["prove"].get("leg", "cold"))
        self.test_dir = spec["dir"]
        self.root = str(config.rootpath)
        self.guards: marker.Guards | None = None
        self.types: tuple[type[BaseException], ...] = ()
        self.invalid: str | None = None
        self.broken: BaseException | None = None
        self.written = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        __tracebackhide__ = True
        with contextlib.ExitStack() as stack:
            try:
                self.guards = marker.read(item)
                self.types = marker.exception_types(self.guards)
                warm = marker.warm_up(self.guards, item) if self.leg == "warm" else None
                # Should the child die from here on, this record says where.
                self._write({"verdict": "broken", "provisional": True,
                             "message": "the cold child died while the bug was brought back"})
                marker.enter_bug(self.guards, item, stack)
                if warm is not None:
                    warm()
                self._write({"verdict": None})  # the test's own part: judged at its end
            except marker.GuardsError as exc:
                self.invalid = str(exc)
                raise
            except BaseException as exc:
                self.broken = exc
                raise
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        if self.written or call.when == "teardown":
            return
        if call.when == "setup" and call.excinfo is None:
            return
        excinfo = call.excinfo
        if call.when == "setup":
            assert excinfo is not None
            verdict = self._skipped(excinfo.value) or {
                "verdict": "vacuous",
                "detail": "the test's own set-up failed, before the bug was brought back",
                **described(excinfo.value, self.root),
            }
        else:
            verdict = self._judge(None if excinfo is None else excinfo.value)
        self.written = True
        self._write(verdict)

    def _write(self, verdict: dict[str, Any]) -> None:
        write_record(self.test_dir, {"type": PROOF_RECORD, "leg": self.leg, **verdict})

    def _skipped(self, exc: BaseException) -> dict[str, Any] | None:
        if isinstance(exc, pytest.skip.Exception):
            return {"verdict": "skipped", "message": str(exc.msg)}
        return None

    def _judge(self, exc: BaseException | None) -> dict[str, Any]:
        if self.invalid is not None:
            return {"verdict": "invalid", "message": self.invalid}
        if self.broken is not None:
            return {"verdict": "broken", **described(self.broken, self.root)}
        if exc is None:
            return {"verdict": "missed"}
        skipped = self._skipped(exc)
        if skipped is not None:
            return skipped
        assert self.guards is not None
        unmatched = None
        for one in linked(exc):
            if not isinstance(one, self.types):
                continue
            if self.guards.match is None or re.search(self.guards.match, str(one)):
                return {"verdict": "caught", **described(one, self.root)}
            unmatched = unmatched or one
        out = {"verdict": "vacuous", **described(exc, self.root)}
        if unmatched is not None:
            out["detail"] = (
                f"{type_name(unmatched)} was raised, but its message does not match "
                f"{self.guards.match!r}: {str(unmatched)[:300]}"
            )
        return out


class ProveChildSide:
    """In every cold child: a bug-active run, where its spec says "prove", is judged here."""

    def pytest_coldcompile_child_configure(self, config: pytest.Config,
                                           spec: ChildSpec) -> None:
        if spec.get("prove"):
            config.pluginmanager.register(ProofLeg(config, spec), "coldcompile-proof-leg")


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(ProveChildSide(), "coldcompile-prove-child")
