"""Options, ini keys and markers: documented, validated with their source, marker > CLI > ini."""

from __future__ import annotations

import pytest
from coldhelp import run, run_inprocess

from pytest_coldcompile import options


def test_help_documents_every_option_and_ini_key(pytester: pytest.Pytester) -> None:
    result = run_inprocess(pytester, "--help")
    result.stdout.fnmatch_lines(
        [
            "*cold compile isolation (pytest-coldcompile)*",
            "*--cold-compile*Run every collected test cold*",
            "*--cold-compile-mode=MODE*",
            "*--cold-compile-timeout=SECONDS*",
            "*--smem-limit=BYTES*",
            "*--cold-compile-report=PATH*",
        ]
    )
    for key in ("cold_compile (bool)", "cold_compile_mode", "cold_compile_timeout", "smem_limit",
                "cold_compile_warm_ahead", "cold_compile_preload", "cold_compile_cuda_ahead",
                "cold_compile_forked_ahead",
                "cold_compile_answer_device_queries"):
        result.stdout.fnmatch_lines([f"*{key}*"])
    result.stdout.no_fnmatch_line("*--cold-compile-child*")  # internal


def test_markers_are_documented(pytester: pytest.Pytester) -> None:
    result = run_inprocess(pytester, "--markers")
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.cold_compile(timeout=None): run this test cold*",
            "*@pytest.mark.requires_cuda: skip unless a CUDA device is visible and torch*",
            "*@pytest.mark.requires_smem(BYTES): skip unless*",
            "*@pytest.mark.smem_limit(BYTES): emulate a device*",
        ]
    )


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (
            ["--cold-compile-mode=sideways"],
            "",
            "--cold-compile-mode: expected one of auto, fork, zygote, spawn, got 'sideways'",
        ),
        (
            [],
            "cold_compile_mode = thread",
            "ini cold_compile_mode: expected one of auto, fork, zygote, spawn, got 'thread'",
        ),
        (
            ["--cold-compile-timeout=-1"],
            "",
            "--cold-compile-timeout: expected seconds >= 0 (0: no limit), got '-1'",
        ),
        (
            [],
            "cold_compile_timeout = soon",
            "ini cold_compile_timeout: expected a number of seconds, got 'soon'",
        ),
        (
            ["--smem-limit=lots"],
            "",
            "--smem-limit: expected a positive whole number of bytes, got 'lots'",
        ),
        (
            [],
            "smem_limit = 0",
            "ini smem_limit: expected a positive whole number of bytes, got '0'",
        ),
        (
            [],
            "cold_compile_warm_ahead = sometimes",
            "ini cold_compile_warm_ahead: expected true or false (invalid truth value 'sometimes')",
        ),
        (
            [],
            "cold_compile_cuda_ahead = sometimes",
            "ini cold_compile_cuda_ahead: expected auto, true or false, got 'sometimes'",
        ),
        (
            [],
            "cold_compile_forked_ahead = 0",
            "ini cold_compile_forked_ahead: expected a whole number >= 1, got '0'",
        ),
        (
            [],
            "cold_compile_forked_ahead = many",
            "ini cold_compile_forked_ahead: expected a whole number >= 1, got 'many'",
        ),
        (
            [],
            "cold_compile_answer_device_queries = maybe",
            "ini cold_compile_answer_device_queries: expected true or false (invalid truth value "
            "'maybe')",
        ),
        (
            [],
            "cold_compile = maybe",
            "ini cold_compile: expected true or false (invalid truth value 'maybe')",
        ),
        (
            ["--cold-compile-report=."],
            "",
            "--cold-compile-report: '.' is a directory, expected a file path",
        ),
        (
            ["--cold-compile-report=/proc/no/report.json"],
            "",
            "--cold-compile-report: cannot write '/proc/no/report.json' ('/proc': *",
        ),
    ],
)
def test_a_bad_value_names_where_it_came_from(
    pytester: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run_inprocess(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


@pytest.mark.parametrize("cold", [False, True], ids=["in-process", "cold"])
def test_a_bad_marker_argument_is_a_clean_test_error(pytester: pytest.Pytester, cold: bool) -> None:
    # As pytest's own skipif with a bad condition: the message alone, no traceback through
    # the plugin's modules.
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.smem_limit("plenty")
        def test_a():
            pass
        @pytest.mark.requires_cuda(12)
        def test_b():
            pass
        """
    )
    result = run_inprocess(pytester, *(["--cold-compile", "--cold-compile-mode=fork"] if cold
                                       else []))
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*smem_limit marker of *::test_a: expected a positive whole "
                                 "number of bytes, got 'plenty'*"])
    out = result.stdout.str()
    assert "Traceback" not in out and "ValueError" not in out, out
    # No frame of the plugin's modules (a warning may name the package, as pytest's own
    # assertion-rewrite warning for already imported modules does).
    assert not [line for line in out.splitlines()
                if "pytest_coldcompile/" in line and ".py:" in line], out


def test_a_bad_marker_argument_fails_that_test_naming_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.smem_limit("plenty")
        def test_a():
            pass
        @pytest.mark.requires_smem(-5)
        def test_b():
            pass
        @pytest.mark.cold_compile(timeout="never")
        def test_c():
            pass
        @pytest.mark.cold_compile(timeot=5)
        def test_d():
            pass
        @pytest.mark.cold_compile(5)
        def test_e():
            pass
        @pytest.mark.requires_cuda(12)
        def test_f():
            pass
        """
    )
    result = run_inprocess(pytester)
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines(
        [
            "*smem_limit marker of test_a_bad_marker*::test_a: expected a positive whole number "
            "of bytes, got 'plenty'*",
            "*requires_smem marker of test_a_bad_marker*::test_b: expected a positive whole "
            "number of bytes, got -5*",
            "*cold_compile(timeout=...) marker of test_a_bad_marker*::test_c: expected a number "
            "of seconds, got 'never'*",
            "*cold_compile marker of test_a_bad_marker*::test_d: expected cold_compile or "
            "cold_compile(timeout=SECONDS), got *timeot*",
            "*cold_compile marker of test_a_bad_marker*::test_e: expected cold_compile or "
            "cold_compile(timeout=SECONDS), got *args=(5,)*",
            "*requires_cuda marker of test_a_bad_marker*::test_f: expected requires_cuda "
            "without arguments, got *args=(12,)*",
        ]
    )


def test_smem_limit_precedence_marker_then_option_then_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsmem_limit = 1000\n")
    pytester.makepyfile(
        """
        import os, pytest
        from pytest_coldcompile import SMEM_LIMIT_ENV

        def test_option(cold_state):
            assert cold_state.smem_limit == 2000
            assert os.environ[SMEM_LIMIT_ENV] == "2000"

        @pytest.mark.smem_limit(3000)
        def test_marker(cold_state):
            assert cold_state.smem_limit == 3000
            assert os.environ[SMEM_LIMIT_ENV] == "3000"

        def test_env_is_restored_after_teardown():
            assert os.environ[SMEM_LIMIT_ENV] == "2000"
        """
    )
    # A subprocess: a cap imports triton, which cannot be imported twice in one interpreter.
    run(pytester, "--smem-limit=2000", "-p", "no:randomly").assert_outcomes(passed=3)
    pytester.makepyfile(
        test_ini="""
        def test_ini(cold_state):
            assert cold_state.smem_limit == 1000
        """
    )
    run(pytester, "test_ini.py").assert_outcomes(passed=1)


def test_timeout_resolution_unit() -> None:
    assert options.parse_timeout("0", "x") is None
    assert options.parse_timeout("2.5", "x") == 2.5
    assert options.parse_bytes("101_376", "x") == 101376
    with pytest.raises(pytest.UsageError, match="nan"):
        options.parse_timeout("nan", "--cold-compile-timeout")
