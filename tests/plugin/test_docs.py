"""The reference docs cannot drift from the code.

What the plugin defines is learned from pytest itself (its parser, `getini("markers")`, the
objects its fixtures return, the prove package), never from a list kept here; each must be in
docs/plugin.md, and where its row there links a topic page, on that page too. Error messages
quoted in README.md and docs/plugin.md are produced again, by the command named above them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from coldhelp import run_inprocess

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PLUGIN_DOC = DOCS / "plugin.md"
PLUGIN_NAME = "coldcompile"  # the pytest11 entry point's name


def without_the_plugin() -> list[str]:
    """`-p no:NAME` for every pytest11 entry point into this package: a part of the plugin
    that came to register itself would otherwise count as pytest's own."""
    names = {PLUGIN_NAME} | {ep.name for ep in importlib.metadata.entry_points(group="pytest11")
                             if ep.value.split(".")[0].split(":")[0] == "pytest_coldcompile"}
    return [arg for name in sorted(names) for arg in ("-p", f"no:{name}")]

# Public attributes a fixture's object has that are not for tests to call.
NOT_FOR_TESTS = {"launch_events": {"add"}}  # the listener the fixture subscribes to selectors


def section(text: str, heading: str) -> str:
    """The body of the markdown section `## heading`, up to the next `## `."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def table_rows(text: str) -> list[list[str]]:
    """Each markdown table row as its cells (a `\\|` inside a cell stays in it, unescaped)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"\|\s*-", line):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip().replace("\\|", "|") for c in cells])
    return rows


def linked_pages(cell_text: str) -> set[str]:
    """The docs pages a row links to, e.g. `[CI gates](ci-gates.md#baselines)` -> ci-gates.md."""
    return {m for m in re.findall(r"\]\(([\w.-]+\.md)(?:#[\w-]*)?\)", cell_text)}


def on_linked_pages(row: list[str], needle: str) -> list[str]:
    """The pages the row links to that do not name needle."""
    return [page for page in sorted(linked_pages(" ".join(row)))
            if needle not in (DOCS / page).read_text()]


def _configured(pytester: pytest.Pytester, *args: str) -> pytest.Config:
    before = set(sys.modules)
    config = pytester.parseconfigure("-p", "no:cacheprovider", *args)
    # pytester forgets what a run imported, and torch cannot be imported twice in a process
    assert not {"torch", "triton"} & (set(sys.modules) - before), "configuring imported torch"
    return config


def plugin_surface(pytester: pytest.Pytester) -> tuple[dict, set[str], set[str]]:
    """(options {flag: pytest Option}, ini keys, marker names) that the plugin adds: what a
    pytest session has with it, less what it has without."""
    with_it = _configured(pytester)
    assert with_it.pluginmanager.get_plugin(PLUGIN_NAME) is not None, "the plugin did not load"
    without = _configured(pytester, *without_the_plugin())

    def options(config: pytest.Config) -> dict:
        parser = config._parser
        groups = [parser._anonymous, *parser._groups]
        return {name: opt for group in groups for opt in group.options for name in opt.names()
                if name.startswith("--")}

    def markers(config: pytest.Config) -> set[str]:
        return {re.split(r"[(:]", line, maxsplit=1)[0].strip()
                for line in config.getini("markers")}

    ours = {name: opt for name, opt in options(with_it).items()
            if name not in options(without)
            and opt.attrs().get("help") != argparse.SUPPRESS}  # internal options
    ini = set(with_it._parser._inidict) - set(without._parser._inidict)
    return ours, ini, markers(with_it) - markers(without)


def test_every_option_and_ini_key_is_in_the_options_table(pytester: pytest.Pytester) -> None:
    options, ini, _ = plugin_surface(pytester)
    assert options and ini
    rows = table_rows(section(PLUGIN_DOC.read_text(), "Options"))
    problems = []
    for name, opt in sorted(options.items()):
        metavar = opt.attrs().get("metavar")
        shown = f"`{name}={metavar}`" if metavar else f"`{name}`"
        row = next((r for r in rows if r and r[0] == shown), None)
        if row is None:
            problems.append(f"option {shown} has no row of its own in plugin.md's Options table")
        else:
            problems += [f"{name} links {page}, which does not name it"
                         for page in on_linked_pages(row, f"`{name}")]
    for key in sorted(ini):
        row = next((r for r in rows if len(r) > 1 and re.match(rf"`{key}`", r[1])), None)
        if row is None:
            problems.append(f"ini key `{key}` is in no ini cell of plugin.md's Options table")
        else:
            problems += [f"ini {key} links {page}, which does not name it"
                         for page in on_linked_pages(row, f"`{key}")]
    assert not problems, "\n".join(problems)


def test_every_marker_is_in_the_markers_table(pytester: pytest.Pytester) -> None:
    _, _, markers = plugin_surface(pytester)
    assert markers
    rows = table_rows(section(PLUGIN_DOC.read_text(), "Markers"))
    problems = []
    for name in sorted(markers):
        row = next((r for r in rows if re.match(rf"`@pytest\.mark\.{name}[(`]", r[0])), None)
        if row is None:
            problems.append(f"marker {name} is not in plugin.md's Markers table")
        else:
            problems += [f"marker {name} links {page}, which does not name it"
                         for page in on_linked_pages(row, name)]
    assert not problems, "\n".join(problems)


def _plugin_fixtures(pytester: pytest.Pytester) -> set[str]:
    def names(*args: str) -> set[str]:
        out = run_inprocess(pytester, "--fixtures", *args).stdout.lines
        return {m.group(1) for line in out if (m := re.match(r"(\w+)( \[.*\])?( -- .*)?$", line))}

    return names() - names(*without_the_plugin())


def test_every_fixture_attribute_is_documented(pytester: pytest.Pytester) -> None:
    fixtures = _plugin_fixtures(pytester)
    assert {"cold_state", "launch_events", "compile_counter"} <= fixtures
    pytester.makepyfile(
        """
        def test_attributes(request):
            for name in sorted(request.config.getoption("fixture_names").split(",")):
                value = request.getfixturevalue(name)
                public = sorted(a for a in dir(value) if not a.startswith("_"))
                print("ATTRIBUTES", name, *public)
        """
    )
    pytester.makeconftest(
        """
        def pytest_addoption(parser):
            parser.addoption("--fixture-names")
        """
    )
    result = run_inprocess(pytester, "-s", f"--fixture-names={','.join(sorted(fixtures))}")
    result.assert_outcomes(passed=1)
    bullets = section(PLUGIN_DOC.read_text(), "Fixtures")
    problems = []
    printed = [m.group(1).split() for line in result.stdout.lines
               if (m := re.search(r"ATTRIBUTES (.*)", line))]  # -s: after the file's name
    assert {name for name, *_ in printed} == fixtures
    for name, *attributes in printed:
        bullet = re.search(rf"^- `{name}`:(.*?)(?=^- `|\Z)", bullets, re.M | re.S)
        if bullet is None:
            problems.append(f"fixture {name} has no bullet in plugin.md's Fixtures section")
            continue
        problems += [f"{name}.{a} is not in its bullet" for a in attributes
                     if a not in NOT_FOR_TESTS.get(name, set())
                     and not re.search(rf"\.{a}\b", bullet.group(1))]
    assert not problems, "\n".join(problems)


def test_every_prove_verdict_is_in_the_verdicts_table() -> None:
    from pytest_coldcompile.prove import VERDICTS

    rows = table_rows(section((DOCS / "prove.md").read_text(), "Verdicts"))
    documented = {m.group(1) for r in rows if (m := re.fullmatch(r"\*\*(\w+)\*\*", r[0]))}
    assert set(VERDICTS) - documented == set(), "verdicts missing from docs/prove.md"


# -- quoted error messages ---------------------------------------------------------------------
#
# A quoted message is a fenced block right after a comment naming, one per line, how each of
# its lines is produced:
#
#   <!-- produced by:
#   pytest -o smem_limit=0                 a pytest run with these arguments
#   marker @pytest.mark.smem_limit(0)      a run of test_x.py::test_y carrying this marker
#   pytest-version 10.0.0                  a pytest run whose pytest says it is this version
#   -->
#
# "..." in a quoted line stands for text left out; a line matches the end of an output line.

QUOTE = re.compile(r"<!-- produced by:\n((?:(?!-->).)*)-->[ \t]*\n[ \t]*```\w*\n(.*?)```", re.S)


def quoted_messages(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for recipes, block in QUOTE.findall(path.read_text()):
        recipes = [r.strip() for r in recipes.splitlines() if r.strip()]
        lines = [b.strip() for b in block.splitlines() if b.strip()]
        assert len(recipes) == len(lines), f"{path.name}: {recipes} against {lines}"
        pairs += zip(recipes, lines)
    return pairs


def produce(pytester: pytest.Pytester, recipe: str) -> list[str]:
    """The output lines of what recipe names."""
    kind, _, rest = recipe.partition(" ")
    if kind == "pytest":
        result = run_inprocess(pytester, *shlex.split(rest))
        assert result.ret == pytest.ExitCode.USAGE_ERROR, recipe
        return result.stderr.lines
    if kind == "marker":
        pytester.makepyfile(test_x=f"import pytest\n\n\n{rest}\ndef test_y():\n    pass\n")
        return run_inprocess(pytester, "--tb=native", "test_x.py").stdout.lines
    if kind == "pytest-version":  # a subprocess: this process's plugin is loaded already
        code = ("import sys, pytest\n"
                f"pytest.__version__ = {rest!r}\n"
                "sys.exit(pytest.main(['--collect-only', '-p', 'no:cacheprovider']))\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=pytester.path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stderr
        return done.stderr.splitlines()
    raise AssertionError(f"unknown recipe {recipe!r}")


def matches(quoted: str, output: list[str]) -> bool:
    pattern = ".*".join(re.escape(part) for part in quoted.split("..."))
    return any(re.search(rf"(?:^|\s){pattern}$", line.rstrip()) for line in output)


@pytest.mark.parametrize("doc", ["README.md", "docs/plugin.md"])
def test_quoted_error_messages_are_what_the_code_says(pytester: pytest.Pytester, doc: str) -> None:
    quoted = quoted_messages(ROOT / doc)
    assert quoted, f"{doc} quotes no checked message: quote them as this module says"
    wrong = []
    for recipe, line in quoted:
        output = produce(pytester, recipe)
        if not matches(line, output):
            said = [o for o in output if "Error" in o or "ERROR" in o]
            wrong.append(f"{recipe}:\n  quoted:   {line}\n  produced: "
                         + "\n            ".join(said))
    assert not wrong, "\n".join(wrong)
