"""Options, ini keys and marker argument of the CI gates: compile budgets, baselines and the
warm-cache check. Help texts, validation and precedence (marker > command line > ini) follow
``pytest_coldcompile.options``; the resolved settings live in ``config.stash``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile.item_options import marker_seconds
from pytest_coldcompile.options import ini_bool, parse_timeout, resolve

BUDGET_HELP = (
    "Fail a cold test whose compile time (launch selection + tracing + Inductor, as in the "
    "cold compile report) exceeds SECONDS, even though its body passed. 0 means no budget "
    "(the default). cold_compile(budget=...) overrides it for one test."
)
BASELINE_HELP = (
    "Compare each cold test with an earlier --cold-compile-report JSON file at PATH: Dynamo "
    "frames and graphs, launch admissions and fallbacks, compile times, tests new or gone; "
    "the terminal summary lists the changes, regressions first."
)
BASELINE_TOLERANCE_HELP = (
    "PERCENT,SECONDS: a compile time in --cold-compile-baseline changed only when it moved by "
    "more than PERCENT of the baseline's figure and more than SECONDS (default 25,0.5)."
)
BASELINE_STRICT_HELP = (
    "With --cold-compile-baseline: fail the session (exit code 1) when a deterministic figure "
    "changed (frames, graphs, admissions, fallbacks, selectors); timing changes are reported only."
)
WARM_CHECK_HELP = (
    "Rerun every cold test that passed once more, in a fresh child that starts from a private "
    "copy of the first run's caches; report its figures, cache hits and misses, and any graph "
    "or Triton kernel compiled again (an unstable cache key) or an outcome that differs."
)
FIND_MASKER_HELP = (
    "For each test that fails cold, find which earlier test's warm state hides the failure in "
    "a plain run, and through which state (a selector's cached admission, an FX-graph or "
    "AOTAutograd cache hit, a Triton kernel in the cache, other process state): it reruns the "
    "test alone, after all earlier tests, then bisects them, each run in one fresh cold child "
    "(about log2(N) + 3 children for N earlier tests)."
)
DEFAULT_TOLERANCE = "25,0.5"


@dataclass(frozen=True)
class GateSettings:
    budget: float | None
    budget_source: str
    baseline_path: Path | None
    tolerance: tuple[float, float]  # (fraction of the baseline's figure, seconds)
    strict: bool
    warm_check: bool
    find_masker: bool = False


GATES_KEY = pytest.StashKey[GateSettings]()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("cold-compile", "cold compile isolation (pytest-coldcompile)")
    group.addoption("--cold-compile-budget", metavar="SECONDS", default=None, help=BUDGET_HELP)
    group.addoption("--cold-compile-baseline", metavar="PATH", default=None, help=BASELINE_HELP)
    group.addoption("--cold-compile-baseline-tolerance", metavar="PERCENT,SECONDS",
                    default=None, help=BASELINE_TOLERANCE_HELP)
    group.addoption("--cold-compile-baseline-strict", action="store_true", default=False,
                    help=BASELINE_STRICT_HELP)
    group.addoption("--cold-compile-warm-check", action="store_true", default=None,
                    help=WARM_CHECK_HELP)
    parser.addini("cold_compile_budget", BUDGET_HELP, default="0")
    group.addoption("--cold-compile-find-masker", action="store_true", default=None,
                    help=FIND_MASKER_HELP)
    parser.addini("cold_compile_warm_check", WARM_CHECK_HELP, type="bool", default=False)
    parser.addini("cold_compile_find_masker", FIND_MASKER_HELP, type="bool", default=False)


def parse_tolerance(value: Any, source: str) -> tuple[float, float]:
    parts = str(value).split(",")
    try:
        percent, seconds = (float(p.strip().rstrip("%s")) for p in parts)
    except ValueError:
        raise pytest.UsageError(f"{source}: expected PERCENT,SECONDS (e.g. 25,0.5), "
                                f"got {value!r}") from None
    if not (math.isfinite(percent) and math.isfinite(seconds)) or percent < 0 or seconds < 0:
        raise pytest.UsageError(f"{source}: expected PERCENT,SECONDS >= 0, got {value!r}")
    return percent / 100.0, seconds


def load(config: pytest.Config) -> GateSettings:
    """The gate settings, command line > ini, each bad value named with its source."""
    opt = config.option
    budget, budget_source = resolve(
        config, "cold_compile_budget", "--cold-compile-budget", "cold_compile_budget", "0",
        parse_timeout,
    )
    tolerance = parse_tolerance(
        opt.cold_compile_baseline_tolerance or DEFAULT_TOLERANCE,
        "--cold-compile-baseline-tolerance" if opt.cold_compile_baseline_tolerance else "default",
    )
    if opt.cold_compile_warm_check is not None:
        warm_check = bool(opt.cold_compile_warm_check)
    else:
        warm_check = ini_bool(config, "cold_compile_warm_check")
    if opt.cold_compile_find_masker is not None:
        find_masker = bool(opt.cold_compile_find_masker)
    else:
        find_masker = ini_bool(config, "cold_compile_find_masker")
    baseline = Path(opt.cold_compile_baseline) if opt.cold_compile_baseline else None
    if opt.cold_compile_baseline_strict and baseline is None:
        raise pytest.UsageError("--cold-compile-baseline-strict: needs --cold-compile-baseline")
    return GateSettings(
        budget=budget,
        budget_source=budget_source,
        baseline_path=baseline,
        tolerance=tolerance,
        strict=bool(opt.cold_compile_baseline_strict),
        warm_check=warm_check,
        find_masker=find_masker,
    )


def settings(config: pytest.Config) -> GateSettings:
    return config.stash[GATES_KEY]


def budget_for(item: pytest.Item) -> tuple[float | None, str]:
    """The compile budget of item and where it came from: marker > command line > ini.

    Raises ValueError naming the marker when its budget is not a number of seconds >= 0.
    """
    given = marker_seconds(item, "budget")
    if given is not None:
        return given
    g = settings(item.config)
    return g.budget, g.budget_source
