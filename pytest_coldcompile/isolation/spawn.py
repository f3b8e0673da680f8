"""Spawned cold children: a fresh interpreter running pytest on one node id.

Used when neither fork is possible or when asked to; a zygote child runs the same command
line through pytest.main (zygote_request). The child gets the parent's command line minus what
must not reach it (xdist, reports, reruns and selection options), and writes its reports to a
file like a forked child.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_coldcompile import records
from pytest_coldcompile.child import pristine
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.isolation.forkserver import ChildExit
from pytest_coldcompile.processes import kill_group

PLUGIN_MODULE = "pytest_coldcompile.plugin"

# Destinations of options that must not reach a child running one test: distribution,
# report files, selection and rerun state, interactive debugging, terminal chatter.
DROP = frozenset(
    {
        "numprocesses",
        "dist",
        "distload",
        "forked",
        "tx",
        "maxprocesses",
        "looponfail",
        "rsyncdir",
        "rsyncignore",
        "xmlpath",
        "cold_compile_report",
        "cold_compile_child",
        "cold_compile",
        "cold_compile_mode",
        "resultlog",
        "htmlpath",
        "lf",
        "last_failed_no_failures",
        "failedfirst",
        "newfirst",
        "cacheclear",
        "stepwise",
        "stepwise_skip",
        "exitfirst",
        "maxfail",
        "keyword",
        "markexpr",
        "deselect",
        "ignore",
        "ignore_glob",
        "basetemp",
        "usepdb",
        "usepdb_cls",
        "trace",
        "collectonly",
        "pastebin",
        "help",
        "version",
        "setuponly",
        "setupshow",
        "setupplan",
        "durations",
        "durations_min",
        "verbose",
        "reportchars",
        "color",
        "debug",
        "showfixtures",
        "show_fixtures_per_test",
        "markers",
        "override_ini",
    }
)


def _actions(config: pytest.Config) -> dict[str, Any]:
    parser = config._parser
    argparser = getattr(parser, "optparser", None)
    if argparser is None and hasattr(parser, "_getparser"):
        argparser = parser._getparser()
    return dict(getattr(argparser, "_option_string_actions", {}))


def _takes_value(action: Any) -> bool:
    return action is not None and action.nargs != 0


def filter_args(args: list[str], config: pytest.Config) -> list[str]:
    """args without positionals and without the options in DROP (and their values)."""
    actions = _actions(config)
    out: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            break  # only positionals follow
        if not token.startswith("-") or token == "-":
            continue  # a file or node id: the child gets its own
        if token.startswith("--"):
            name, eq, _ = token.partition("=")
            action = actions.get(name)
            group = [token]
            if _takes_value(action) and not eq and i < len(args):
                group.append(args[i])
                i += 1
        else:  # short options, possibly clustered (-vx) or with an attached value (-n2)
            action = actions.get(token[:2])
            group = [token]
            if _takes_value(action) and len(token) == 2 and i < len(args):
                group.append(args[i])
                i += 1
        if action is None or action.dest not in DROP:
            out.extend(group)
    return out


def _overrides(config: pytest.Config) -> list[str]:
    """-o values that pass through: all but addopts, which is rebuilt filtered."""
    out = []
    for item in getattr(config.option, "override_ini", None) or []:
        if not item.split("=", 1)[0].strip() == "addopts":
            out += ["-o", item]
    return out


def _basetemp(config: pytest.Config, test_dir: str) -> Path:
    """Under the session's basetemp when the engine made one (tests use tmp_path), as a forked
    child's tmp_path is: kept after the run for a look at a failure. The child empties the
    directory it is given, so each child gets its own."""
    factory = getattr(config, "_tmp_path_factory", None)
    session_base = getattr(factory, "_basetemp", None)
    if session_base is None:
        return Path(test_dir) / "basetemp"
    return Path(session_base) / f"cold-{Path(test_dir).name}"


def _plugin_name(config: pytest.Config) -> str:
    """The name this plugin is registered under in this process: `coldcompile` (its entry
    point's, also through `-p coldcompile`) or its module's."""
    module = sys.modules.get(PLUGIN_MODULE)
    return (config.pluginmanager.get_name(module) if module is not None else None) or PLUGIN_MODULE


def command(
    config: pytest.Config, nodeid: str, spec_path: str, test_dir: str,
    before: Sequence[str] = (),
) -> list[str]:
    ini_addopts = config.getini("addopts") if config.inipath else []
    env_addopts = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    args = [*ini_addopts, *env_addopts, *config.invocation_params.args]
    cmd = [sys.executable, "-m", "pytest", *filter_args(list(args), config), *_overrides(config)]
    cmd += ["-o", "addopts=", "-p", "no:terminal"]
    # Registered through its entry point unless autoload is off; then under the name it has
    # here, which the user's own `-p` (passed on above) may have given it: one name twice is
    # one registration, the entry point's and the module's names are two, which pytest refuses.
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        cmd += ["-p", _plugin_name(config)]
    cmd += ["--rootdir", str(config.rootpath)]
    if config.inipath:
        cmd += ["-c", str(config.inipath)]
    if config.pluginmanager.has_plugin("cacheprovider"):
        cmd += ["-o", f"cache_dir={Path(test_dir) / 'pytest-cache'}"]
    cmd += ["--basetemp", str(_basetemp(config, test_dir))]
    cmd += ["--cold-compile-child", spec_path, "--"]
    # The earlier tests a child runs before its own (spec' "before"), then its own.
    cmd += [str(config.rootpath / n) for n in [*before, nodeid]]
    return cmd


def prepare(
    config: pytest.Config,
    nodeid: str,
    spec: ChildSpec,
    environ: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Write the spec file; the command line and environment of a child running nodeid.

    environ: the environment to start from (the engine's snapshot), else this process's.
    """
    test_dir = spec["dir"]
    spec_path = os.path.join(test_dir, records.SPEC_FILE)
    Path(spec_path).write_text(json.dumps({**spec, "nodeid": nodeid}))
    env = pristine.child_environ(test_dir, spec, dict(os.environ if environ is None else environ))
    env["PYTEST_ADDOPTS"] = ""
    return command(config, nodeid, spec_path, test_dir, spec.get("before") or ()), env


def zygote_request(
    config: pytest.Config,
    nodeid: str,
    spec: ChildSpec,
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What a zygote child needs to run pytest.main exactly as a spawned child runs pytest."""
    cmd, env = prepare(config, nodeid, spec, environ)
    assert cmd[1:3] == ["-m", "pytest"]
    return {"spec": spec, "args": cmd[3:], "env": env, "cwd": str(config.invocation_params.dir)}


def run(
    config: pytest.Config,
    nodeid: str,
    spec: ChildSpec,
    timeout: float | None,
    environ: dict[str, str] | None = None,
) -> ChildExit:
    test_dir = spec["dir"]
    cmd, env = prepare(config, nodeid, spec, environ)
    began = time.monotonic()
    with (
        open(os.path.join(test_dir, records.RAW_OUT), "ab") as out,
        open(os.path.join(test_dir, records.RAW_ERR), "ab") as err,
    ):
        # A session of its own: the timeout kills the whole group, compilers included.
        proc = subprocess.Popen(
            cmd,
            cwd=config.invocation_params.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        result = ChildExit(pid=proc.pid)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
        except BaseException:  # an interrupt: the child must not outlive us
            kill_group(proc.pid)
            proc.wait()
            raise
        kill_group(proc.pid)
        code = proc.wait()
    result.seconds = time.monotonic() - began
    if code < 0:
        result.signal = -code
    else:
        result.returncode = code
    return result
