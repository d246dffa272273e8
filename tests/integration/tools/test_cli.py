"""``athena-once``, the one command (tools/cli): every command listed and reachable, the deprecated ``python -m``
aliases answering the same (output and exit status), one selection syntax (``-s/--select``), one exit-status table.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import io
import subprocess
import sys
from pathlib import Path

import pytest

import tools.cli
from tools.cli import SECTIONS, Command, Group
from tools.cli.exit_status import ExitStatus
from tools.cli.selection import SelectionError, is_glob, patterns, plain_name, select, select_one
from tools.jobs import cli as jobs_cli

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE_JOBS = REPO_ROOT / "tests" / "fixtures" / "jobs"
FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURE_JOBS.glob("*/job.toml"))
NAMES = ["carrier-on-time", "daily-kpis", "daily-revenue", "flights-dashboard"]


def one(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = tools.cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def every_command() -> list[tuple[str, Command]]:
    """(the words that reach it, the command) for every command and group member."""
    found: list[tuple[str, Command]] = []
    for _, entries in SECTIONS:
        for entry in entries:
            if isinstance(entry, Group):
                found += [(f"{entry.name} {c.name}", c) for c in entry.commands]
                if entry.default is not None:
                    found.append((entry.name, entry.default))
            else:
                found.append((entry.name, entry))
    return found


# ---- every command listed and reachable ------------------------------------------------------------------------


def test_the_command_lists_every_command_and_group(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = one(["--help"], capsys)
    assert status == ExitStatus.OK
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert listed == {entry.name for _, entries in SECTIONS for entry in entries}
    assert "-s/--select" in out and "130 interrupted" in out
    status, out, _ = one([], capsys)  # no command: the same listing, as a usage error
    assert status == ExitStatus.USAGE and "usage: athena-once <command>" in out


@pytest.mark.parametrize("group", [e for _, entries in SECTIONS for e in entries if isinstance(e, Group)], ids=str)
def test_each_group_lists_its_commands(group: Group, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = one([group.name, "--help"], capsys)
    assert status == ExitStatus.OK
    for command in group.commands:
        assert f"  {command.name}  " in out
    if group.name == "ops":  # tools.ops' own commands, from its parser's help
        for name in ("status", "history", "pause", "resume", "release", "run", "rerun", "backfill"):
            assert name in out


@pytest.mark.parametrize(("words", "command"), every_command(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_answers_help_under_its_own_name(
    words: str, command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    module, _, function = command.target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    status, out, _ = one([*words.split(), "--help"], capsys)
    assert status == ExitStatus.OK
    assert out.startswith(f"usage: athena-once {words}")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["chek"], "athena-once: unknown command 'chek' (did you mean 'check'?); commands: check, run,"),
        (["local", "dem"], "athena-once local: unknown command 'dem' (did you mean 'demo'?); commands: demo,"),
    ],
)
def test_an_unknown_command_is_a_usage_error_with_a_hint(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = one(argv, capsys)
    assert (status, out) == (ExitStatus.USAGE, "") and err.startswith(expected)


def test_the_console_script_is_declared_and_python_m_tools_cli_runs_it() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="athena-once")
    assert script.value == "tools.cli:main"
    argv = [sys.executable, "-m", "tools.cli", "check", "-s", "flights-*", "--jobs-dir", str(FIXTURE_JOBS)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "1 job checked"), done.stderr


# ---- the aliases answer the same -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--job", "flights-dashboard"],
        ["check", "--job", "no-such-job"],
        ["settings", "--job", "carrier-on-time", "--format", "json"],
        ["run", "--job", "no-such-job"],
    ],
    ids=" ".join,
)
def test_the_jobs_alias_and_the_command_give_the_same_output_and_status(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*argv, "--jobs-dir", str(FIXTURE_JOBS)]
    out, err = io.StringIO(), io.StringIO()
    alias_status = jobs_cli.main(argv, out=out, err=err)
    status, new_out, new_err = one([argv[0], *["-s" if a == "--job" else a for a in argv[1:]]], capsys)
    assert (status, new_out, new_err) == (alias_status, out.getvalue(), err.getvalue())


def test_the_exit_statuses_of_every_tool_come_from_the_one_table() -> None:
    from tools.cost import cli as cost_cli
    from tools.jobs import check, run, settings
    from tools.results import client

    assert (jobs_cli.EXIT_OK, jobs_cli.EXIT_FAILED, jobs_cli.EXIT_USAGE) == (0, 1, 2)
    for value in (
        jobs_cli.EXIT_INTERRUPTED,
        check.EXIT_FAILED,
        run.EXIT_USAGE,
        settings.EXIT_OK,
        client.EXIT_REFUSED,
        client.EXIT_USAGE,
        client.EXIT_UNAVAILABLE,
        cost_cli.EXIT_ENVIRONMENT,
        cost_cli.EXIT_INTERRUPTED,
    ):
        assert isinstance(value, ExitStatus)
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3, 4, 130]  # 4: JOB_FAILING (ops status, issue 34)


# ---- one selection syntax --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["daily-kpis"], ("daily-kpis",)),
        (["daily-*"], ("daily-kpis", "daily-revenue")),
        (["flights-dashboard,daily-kpis"], ("daily-kpis", "flights-dashboard")),  # names' order, not the option's
        (["flights-dashboard daily-kpis"], ("daily-kpis", "flights-dashboard")),
        (["flights-dashboard", "daily-kpis"], ("daily-kpis", "flights-dashboard")),  # repeated: both (a union)
        (["daily-*", "daily-kpis"], ("daily-kpis", "daily-revenue")),  # overlapping: each job once
        (["*-on-time", "f?ights-*"], ("carrier-on-time", "flights-dashboard")),
        ([], tuple(NAMES)),
        ([" , "], tuple(NAMES)),
    ],
)
def test_a_selection_is_the_union_of_its_patterns(values: list[str], expected: tuple[str, ...]) -> None:
    assert select(values, NAMES) == expected


def test_a_pattern_matching_nothing_is_named_with_the_closest_job() -> None:
    with pytest.raises(SelectionError) as caught:
        select(["daily-kpi", "weekly-*", "flights-dashboard"], NAMES)
    assert str(caught.value).splitlines() == [
        "no job 'daily-kpi' (did you mean 'daily-kpis'?); jobs: " + ", ".join(NAMES),
        "no job matches 'weekly-*'; jobs: " + ", ".join(NAMES),
    ]
    with pytest.raises(SelectionError, match=r"^no job 'x' in jobs/; jobs: a$"):
        select(["x"], ["a"], where="jobs/")


def test_one_job_commands_take_exactly_one() -> None:
    assert select_one(["flights-*"], NAMES) == "flights-dashboard"
    with pytest.raises(SelectionError, match="takes one job; 'daily-\\*' matches 2: daily-kpis, daily-revenue"):
        select_one(["daily-*"], NAMES)
    with pytest.raises(SelectionError, match="none was named"):
        select_one([","], NAMES)
    assert patterns(["a,b  c", "b"]) == ("a", "b", "c")


def test_a_plain_name_is_one_pattern_that_is_no_glob() -> None:
    """What ``ops status`` reads one registry entry for (one GetParameter) instead of the whole registry."""
    assert [is_glob(p) for p in ("daily-*", "f?ights", "[ab]", "flights-dashboard")] == [True, True, True, False]
    assert plain_name(("flights-dashboard",)) == "flights-dashboard"
    assert plain_name(("daily-*",)) is None and plain_name(("a", "b")) is None and plain_name(()) is None


def test_check_honours_every_repeated_selection(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = one(
        ["check", "--job", FIXTURE_NAMES[0], "-s", FIXTURE_NAMES[1], "--jobs-dir", str(FIXTURE_JOBS)], capsys
    )
    assert (status, err) == (ExitStatus.OK, "")
    assert out.splitlines()[-1] == "2 jobs checked"


# --- the one renderer (tools/cli/render.py) -------------------------------------------------------------------


def test_a_bracketed_cell_prints_as_written_never_as_markup() -> None:
    """Issue 34: rich read ``[mobile, tablet]`` as a style tag and printed nothing; every cell is text."""
    from tools.cli import render

    out = io.StringIO()
    rows = [["[mobile, tablet]", "[bold]x[/bold]", "a\x1b[31mred"]]
    render.console_for(out).print(render.table(["dims", "markup", "escape"], rows, title="[t]"))
    text = out.getvalue()
    assert "[mobile, tablet]" in text and "[bold]x[/bold]" in text and "[t]" in text
    assert "\x1b" not in text and "a\\x1b[31mred" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.45945945945945948, "0.4595"),
        (12.3456789, "12.3457"),
        (3.0, "3.0"),
        (-2.5, "-2.5"),
        (1234567.891, "1234567.891"),
        (1.5e-07, "1.5e-07"),
        (1.2345678e18, "1.23457e+18"),
        (0.0, "0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_a_double_is_rounded_for_display(value: float, shown: str) -> None:
    """Issue 34: doubles were printed with every digit in tables (JSON and CSV keep them)."""
    from tools.cli import render

    assert render.display_float(value) == shown and render.data_cell(value).plain == shown


def test_the_run_table_rounds_doubles_and_its_json_keeps_them() -> None:
    from athena_refresh.engine.model import Column, QueryResult
    from tools.jobs import run

    out = io.StringIO()
    result = QueryResult(columns=(Column("ratio", "double"),), rows=[{"ratio": 17 / 37}, {"ratio": None}])
    run.print_table(result, out)
    assert "0.4595" in out.getvalue() and "0.45945945945945" not in out.getvalue()
    assert run._json_value(17 / 37) == 17 / 37


def test_the_run_table_keeps_a_bracketed_value() -> None:
    from athena_refresh.engine.model import Column, QueryResult
    from tools.jobs import run

    out = io.StringIO()
    result = QueryResult(columns=(Column("devices", "array(varchar)"),), rows=[{"devices": "[mobile, tablet]"}])
    run.print_table(result, out)
    assert "[mobile, tablet]" in out.getvalue()


def test_csv_markdown_and_padded_lines() -> None:
    from bench.report_tables import table as bench_table
    from tools.cli import render

    assert render.csv_text(["a", "b"], [[1, "x,y"], ["", None]]) == 'a,b\r\n1,"x,y"\r\n,\r\n'
    assert render.csv_text(["a"], [["1"]], lineterminator="\n") == "a\n1\n"
    assert bench_table is render.markdown_table
    assert render.markdown_table(["n", "value"], [["1", "abc"]]) == "| n | value |\n|---|-------|\n| 1 | abc   |"
    assert render.padded_line([("#", 2, ">"), ("job", 5, "<"), ("end", 0, "<")]) == " #  job    end"
    out = io.StringIO()
    render.print_json(out, {"é": 1})
    assert out.getvalue() == '{\n  "\u00e9": 1\n}\n'


def test_a_reader_leaving_the_pipe_ends_the_command_quietly() -> None:
    """``athena-once settings --format json | head``: the reader is gone before the command writes; no traceback,
    status 1 (as ``python -m tools.results|tools.cost`` always did; rich exits so on its own, plain writes did not)."""
    argv = [sys.executable, "-m", "tools.cli", "settings", "--format", "json", "--jobs-dir", str(FIXTURE_JOBS)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # long before the command has loaded the jobs
    status = child.wait(timeout=120)
    assert (status, child.stderr.read()) == (ExitStatus.FAILED, b"")
