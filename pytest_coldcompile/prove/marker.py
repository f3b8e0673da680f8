"""The guards marker: its arguments, checked in the pytest process without importing what they
name, and resolved in the cold child that brings the bug back.

``guards(bug, raises=EXC, match=None, masked_by=None)``; see docs/prove.md.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import importlib.util
import inspect
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

NAME = "guards"
_KWARGS = ("bug", "raises", "match", "masked_by")
USAGE = "guards(bug, raises=EXC, match=None, masked_by=None)"


class GuardsError(ValueError):
    """A guards marker whose arguments cannot work; the message names the marker and test."""


@dataclass(frozen=True)
class Guards:
    """A guards marker's arguments, as given (paths stay strings until a child resolves them)."""

    where: str  # "guards marker of NODEID", the start of every message about it
    bug: Any  # a context manager factory or instance, a fixture name, or a dotted path
    bug_kind: str  # "factory", "instance", "fixture" or "path"
    raises: tuple[Any, ...]  # exception types and dotted paths
    match: str | None
    masked_by: Any  # None, a callable or a dotted path

    def describe_bug(self) -> str:
        return describe(self.bug)

    def describe_raises(self) -> str:
        names = [describe(r) for r in self.raises]
        text = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        return text + (f" matching {self.match!r}" if self.match is not None else "")


def describe(value: Any) -> str:
    """How a marker argument is named in messages: a path as given, an object by its name."""
    if isinstance(value, str):
        return value
    if isinstance(value, types.ModuleType):
        return value.__name__
    made_by = getattr(value, "func", None)  # a @contextmanager's context manager
    if hasattr(value, "__enter__") and callable(made_by):
        return describe(made_by) + "()"
    name = getattr(value, "__qualname__", None) or getattr(type(value), "__qualname__", "?")
    return str(name)


def _is_path(text: str) -> bool:
    module, colon, attr = text.partition(":")
    parts = module.split(".") + (attr.split(".") if colon else [])
    if not colon and len(parts) < 2:
        return False
    return all(part.isidentifier() for part in parts)


def _split(text: str) -> tuple[str, list[str]]:
    """("pkg.mod", ["attr"]) of "pkg.mod:attr"; "pkg.mod.attr" imports the longest module."""
    if ":" in text:
        module, _, attr = text.partition(":")
        return module, attr.split(".")
    parts = text.split(".")
    return ".".join(parts[:-1]), parts[-1:]


def resolve(text: str, what: str, where: str) -> Any:
    """The object a dotted path names, importing its module (call this in a cold child)."""
    if "." not in text and ":" not in text and hasattr(builtins, text):
        return getattr(builtins, text)
    module, attrs = _split(text)
    while True:
        try:
            found: Any = importlib.import_module(module)
            break
        except ModuleNotFoundError as exc:
            # "pkg.mod.Class.attr": the module is a shorter prefix, the rest attributes.
            if ":" in text or "." not in module or exc.name != module:
                raise GuardsError(f"{where}: {what}={text!r}: cannot import {module!r} "
                                  f"({exc})") from None
            module, last = module.rsplit(".", 1)
            attrs.insert(0, last)
        except Exception as exc:
            raise GuardsError(f"{where}: {what}={text!r}: importing {module!r} raised "
                              f"{type(exc).__name__}: {exc}") from None
    for attr in attrs:
        try:
            found = getattr(found, attr)
        except AttributeError:
            raise GuardsError(f"{where}: {what}={text!r}: {describe(found)!r} has no "
                              f"attribute {attr!r}") from None
    return found


def exception_type(value: Any, where: str, given: str | None = None) -> type[BaseException]:
    """value, an exception type; GuardsError otherwise (given: the path that named it)."""
    if isinstance(value, type) and issubclass(value, BaseException):
        return value
    shown = repr(given) if given else describe(value) if isinstance(value, type) else repr(value)
    raise GuardsError(f"{where}: raises={shown} is not an exception type "
                      f"(got {type(value).__name__} {value!r})")


def _check_exception_path(text: str, where: str) -> None:
    """Syntax, and what can be known without importing: the top-level module exists; a module
    imported already is looked into."""
    if "." not in text and ":" not in text and text.isidentifier():
        if not hasattr(builtins, text):
            raise GuardsError(f"{where}: raises={text!r} is not a built-in exception; name "
                              "another as 'package.module.Name'")
        exception_type(getattr(builtins, text), where)
        return
    if not _is_path(text):
        raise GuardsError(f"{where}: raises={text!r} is not an exception type nor a dotted "
                          "path 'package.module.Name'")
    top = text.split(".")[0].split(":")[0]
    if top not in sys.modules and importlib.util.find_spec(top) is None:
        raise GuardsError(f"{where}: raises={text!r}: no module named {top!r}")
    module, _ = _split(text)
    if module in sys.modules:
        exception_type(resolve(text, "raises", where), where, text)


def _fixture_exists(item: pytest.Item, name: str) -> bool:
    if name in getattr(item, "fixturenames", ()):
        return True
    manager = getattr(item.session, "_fixturemanager", None)
    try:  # private, pytest >= 8.1
        return bool(manager.getfixturedefs(name, item))  # type: ignore[union-attr]
    except Exception:
        return True  # cannot tell here: the child's getfixturevalue will say


def _bug_kind(bug: Any, item: pytest.Item, where: str) -> str:
    if isinstance(bug, str):
        if _is_path(bug):
            return "path"
        if bug.isidentifier():
            if not _fixture_exists(item, bug):
                raise GuardsError(f"{where}: bug={bug!r} names no fixture visible to this "
                                  "test (a dotted path is 'package.module:name')")
            return "fixture"
    elif hasattr(bug, "__enter__") and hasattr(bug, "__exit__") and not isinstance(bug, type):
        return "instance"
    elif callable(bug):
        return "factory"
    raise GuardsError(
        f"{where}: bug={bug!r} is neither a context manager (or a callable returning one), "
        "a fixture name, nor a dotted path 'package.module:name'"
    )


def read(item: pytest.Item) -> Guards:
    """The guards marker of item, checked; GuardsError saying what is wrong and where."""
    mark = item.get_closest_marker(NAME)
    assert mark is not None
    where = f"{NAME} marker of {item.nodeid}"
    unknown = sorted(set(mark.kwargs) - set(_KWARGS))
    if unknown:
        raise GuardsError(f"{where}: unknown argument(s) {', '.join(unknown)}; expected {USAGE}")
    args = dict(mark.kwargs)
    if len(mark.args) > 1 or (mark.args and "bug" in args):
        raise GuardsError(f"{where}: expected {USAGE}, got {mark!r}")
    if mark.args:
        args["bug"] = mark.args[0]
    if "bug" not in args:
        raise GuardsError(f"{where}: missing the bug to bring back; expected {USAGE}")
    if args.get("raises") is None:
        raise GuardsError(f"{where}: missing raises=, the exception the bug must produce; "
                          f"expected {USAGE}")
    raises = args["raises"] if isinstance(args["raises"], tuple) else (args["raises"],)
    for one in raises:
        if isinstance(one, str):
            _check_exception_path(one, where)
        else:
            exception_type(one, where)
    match = args.get("match")
    if isinstance(match, re.Pattern):
        match = match.pattern
    if match is not None:
        if not isinstance(match, str):
            raise GuardsError(f"{where}: match={match!r} is not a regular expression string")
        try:
            re.compile(match)
        except re.error as exc:
            raise GuardsError(f"{where}: match={match!r} is not a regular expression ({exc})"
                              ) from None
    masked_by = args.get("masked_by")
    if masked_by is not None and not callable(masked_by) and not (
        isinstance(masked_by, str) and _is_path(masked_by)
    ):
        raise GuardsError(f"{where}: masked_by={masked_by!r} is neither a callable nor a dotted "
                          "path 'package.module:name'")
    return Guards(where, args["bug"], _bug_kind(args["bug"], item, where), raises, match,
                  masked_by)


def exception_types(guards: Guards) -> tuple[type[BaseException], ...]:
    """raises=, resolved (in the child)."""
    return tuple(
        exception_type(resolve(r, "raises", guards.where), guards.where, r)
        if isinstance(r, str) else exception_type(r, guards.where)
        for r in guards.raises
    )


def enter_bug(guards: Guards, item: pytest.Item, stack: contextlib.ExitStack) -> None:
    """Bring the bug back for the rest of stack (in the child): GuardsError when the marker
    names something unusable, whatever the bug's own set-up raises otherwise."""
    __tracebackhide__ = True
    if guards.bug_kind == "fixture":
        item._request.getfixturevalue(guards.bug)  # type: ignore[attr-defined]
        return
    bug = guards.bug
    if guards.bug_kind == "path":
        bug = resolve(bug, "bug", guards.where)
        if not (hasattr(bug, "__enter__") and hasattr(bug, "__exit__")) and not callable(bug):
            raise GuardsError(f"{guards.where}: bug={guards.bug!r} names {bug!r}, neither a "
                              "context manager nor a callable returning one")
    manager = bug
    if not (hasattr(bug, "__enter__") and hasattr(bug, "__exit__")) or isinstance(bug, type):
        manager = bug()
        if not (hasattr(manager, "__enter__") and hasattr(manager, "__exit__")):
            raise GuardsError(f"{guards.where}: bug {describe(guards.bug)}() returned "
                              f"{manager!r}, not a context manager")
    type(manager).__enter__(manager)
    stack.push(manager)  # its __exit__, when the test's call ends


def warm_up(guards: Guards, item: pytest.Item) -> Callable[[], Any]:
    """masked_by=, resolved (in the child), bound to the test's arguments it names: a
    warm-up of a parametrized test takes its parameters as the test does."""
    found = guards.masked_by
    if isinstance(found, str):
        found = resolve(found, "masked_by", guards.where)
    if not callable(found):
        raise GuardsError(f"{guards.where}: masked_by={guards.masked_by!r} is not callable")
    funcargs = getattr(item, "funcargs", {})
    try:
        params = inspect.signature(found).parameters.values()
    except (TypeError, ValueError):
        params = []  # type: ignore[assignment]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in params if p.kind in named
             and (p.default is inspect.Parameter.empty or p.name in funcargs)]
    missing = [name for name in names if name not in funcargs]
    if missing:
        raise GuardsError(f"{guards.where}: masked_by={describe(guards.masked_by)} takes "
                          f"{', '.join(missing)}, which the test has not")
    return functools.partial(found, **{name: funcargs[name] for name in names})
