"""``athena-once compile`` (tools/jobs/compile.py): what StartQueryExecution receives for a job and a slot, on the
fixture jobs, on job folders written under tmp_path and on the repository's own jobs."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from sqlglot.tokens import TokenType

from athena_refresh.service import athena_engine
from tests.sample_jobs import CARRIERS, FLIGHTS, REPO_JOBS_DIR, TOP_ROUTES, repo_job_names, stage_jobs
from tools import cli as athena_once
from tools.jobs import cli, common, compile, run

SLOT = "2026-11-24T20:30Z"  # mapped onto 2013-11-24 20:30 by the samples' data_year
NOTE = "for the Athena console, parameters inlined \u2014 not what the function sends"


def invoke(*argv: str) -> tuple[int, str, str]:
    """The subcommand as ``athena-once compile`` runs it (the dispatcher's parser, this module)."""
    commands = {"compile": compile}
    args = cli.build_parser(commands).parse_args(["compile", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = commands[args.command].execute(args, out, err)
    return status, out.getvalue(), err.getvalue()


def compiled_json(jobs_dir: Path, job: str, slot: str = SLOT) -> dict[str, Any]:
    status, out, err = invoke("-s", job, "--slot", slot, "--format", "json", "--jobs-dir", str(jobs_dir))
    assert (status, err) == (0, ""), err
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    return stage_jobs(tmp_path, (CARRIERS, FLIGHTS, TOP_ROUTES))


def write_job(jobs_dir: Path, name: str, sql: str, extra: str = "") -> None:
    folder = jobs_dir / name
    folder.mkdir(parents=True)
    (folder / "job.toml").write_text(
        f'source = "sample:flights"\nschedule_expression = "cron(0 * * * ? *)"\n{extra}', encoding="utf-8"
    )
    (folder / "query.sql").write_text(sql, encoding="utf-8")


class RecordingClient:
    """An Athena client that records the StartQueryExecution requests it is sent (nothing leaves the process)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def start_query_execution(self, **request: Any) -> dict[str, str]:
        self.requests.append(request)
        return {"QueryExecutionId": "q-1"}


# --- what the function sends -------------------------------------------------------------------------------
def test_compile_prints_the_request_the_function_sends(jobs_dir: Path) -> None:
    # GIVEN the sample job flights-dashboard and one slot
    document = compiled_json(jobs_dir, FLIGHTS)
    # THEN the parameters are the slot's window on the data's timeline, in placeholder order
    assert document["slot"] == "2026-11-24T20:30:00Z"
    assert document["window"] == ["2013-11-23 20:30:00", "2013-11-24 20:30:00"]
    request = document["request"]
    assert request["ExecutionParameters"] == [
        "'2013-11-23 20:30:00'",
        "'2013-11-24 20:30:00'",
        "'2013-11-23'",
        "'2013-11-24'",
    ]
    assert [(p["position"], p["name"]) for p in document["parameters"]] == [
        (1, "window_start"),
        (2, "window_end"),
        (3, "window_first_date"),
        (4, "window_last_date"),
    ]
    assert request["WorkGroup"] == "athena-refresh"
    assert request["QueryExecutionContext"] == {"Database": "flights_demo", "Catalog": "AwsDataCatalog"}
    assert "ClientRequestToken" not in request and "ClientRequestToken" in document["request_not_shown"]
    # AND the QueryString is query.sql with each :name as ?, the user's text kept
    sql = (jobs_dir / FLIGHTS / "query.sql").read_text(encoding="utf-8")
    assert request["QueryString"] == sql.replace(":window_start", "?").replace(":window_end", "?").replace(
        ":window_first_date", "?"
    ).replace(":window_last_date", "?")
    # AND the deployed engine, given the same settings, slot and a token, sends exactly that request and the token
    job = common.load(jobs_dir).named(FLIGHTS)
    settings = common.job_settings(job, stand_in=compile.STAND_IN)
    engine = athena_engine(settings)
    client = RecordingClient()
    engine._client = client  # type: ignore[assignment]  # the engine's injected-client slot
    slot = run.parse_slot(SLOT)
    engine.start_query(
        sql=settings.query_sql, parameters=settings.execution_parameters(slot), client_request_token="t" * 32
    )
    (sent,) = client.requests
    assert sent.pop("ClientRequestToken") == "t" * 32
    assert sent == request


def test_compile_inlines_the_parameters_for_the_console_marked_as_such(jobs_dir: Path) -> None:
    # GIVEN carrier-on-time, whose constant :on_time_delay_min is used twice
    document = compiled_json(jobs_dir, CARRIERS, "2026-11-24T11:15Z")
    values = document["request"]["ExecutionParameters"]
    names = [p["name"] for p in document["parameters"]]
    assert names.count("on_time_delay_min") == 2 and values[names.index("on_time_delay_min")] == "15"
    # THEN the console statement is the user's text with each parameter's literal text in place of :name
    sql = (jobs_dir / CARRIERS / "query.sql").read_text(encoding="utf-8")
    expected = sql.replace(":on_time_delay_min", "15")
    for name, value in zip(names, values, strict=True):
        expected = expected.replace(f":{name}", value)
    assert document["console"] == {"note": NOTE, "sql": expected}
    assert "?" not in document["console"]["sql"]


def test_compile_table_format_shows_request_parameters_and_the_marked_console_statement(jobs_dir: Path) -> None:
    status, out, err = invoke("-s", TOP_ROUTES, "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert (status, err) == (0, "")
    assert out.startswith(
        f"{TOP_ROUTES}, slot 2026-11-24T20:30:00Z (window 2013-11-24 19:30:00 .. 2013-11-24 20:30:00 UTC)"
    )
    assert "WorkGroup: athena-refresh" in out and "Database=flights_demo, Catalog=AwsDataCatalog" in out
    assert "window_first_date" in out and "'2013-11-24 19:30:00'" in out
    assert "WHERE sched_dep_utc >= CAST(? AS timestamp)" in out
    head, console = out.split(f"-- {NOTE}:\n")
    assert "CAST('2013-11-24 19:30:00' AS timestamp)" in console and "?" not in console
    assert "CAST('2013-11-24 19:30:00'" not in head


def test_compile_leaves_question_marks_in_strings_and_comments_and_omits_empty_parameters(jobs_dir: Path) -> None:
    # GIVEN a query without parameters whose string and comment hold '?', with result reuse on
    write_job(
        jobs_dir,
        "no-params",
        "SELECT origin, 'why?' AS q -- any ?\nFROM flights\nGROUP BY origin\n",
        "result_reuse_max_age_min = 30\n",
    )
    document = compiled_json(jobs_dir, "no-params")
    request = document["request"]
    # THEN no ExecutionParameters at all (Athena rejects an empty list; the function leaves the key out)
    assert "ExecutionParameters" not in request and document["parameters"] == []
    assert request["ResultReuseConfiguration"] == {
        "ResultReuseByAgeConfiguration": {"Enabled": True, "MaxAgeInMinutes": 30}
    }
    assert (
        document["console"]["sql"]
        == request["QueryString"]
        == "SELECT origin, 'why?' AS q -- any ?\nFROM flights\nGROUP BY origin\n"
    )
    status, out, _ = invoke("-s", "no-params", "--slot", SLOT, "--jobs-dir", str(jobs_dir))
    assert status == 0 and "ExecutionParameters: none" in out and "MaxAgeInMinutes=30" in out


def test_inline_parameters_refuses_a_count_mismatch() -> None:
    assert compile.inline_parameters("SELECT ? , '?'", ["1"]) == "SELECT 1 , '?'"
    with pytest.raises(common.JobsError, match="1 placeholder"):
        compile.inline_parameters("SELECT ?", ["1", "2"])


# --- bad input: one line, exit status 2 ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("-s", "flights-dashbord", "--slot", SLOT), "flights-dashbord"),
        (("-s", "*", "--slot", SLOT), "carrier-on-time"),
        (
            ("-s", FLIGHTS, "--slot", "yesterday"),
            "--slot: not an ISO 8601 time, e.g. 2026-11-24T20:30Z, got 'yesterday'",
        ),
    ],
)
def test_compile_bad_job_or_slot_is_one_line_and_status_2(jobs_dir: Path, argv: tuple[str, ...], expected: str) -> None:
    status, out, err = invoke(*argv, "--jobs-dir", str(jobs_dir))
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err


def test_compile_defaults_to_the_latest_firing(jobs_dir: Path) -> None:
    status, out, _ = invoke("-s", FLIGHTS, "--format", "json", "--jobs-dir", str(jobs_dir))
    assert status == 0 and json.loads(out)["slot"][-7:] in (":00:00Z", ":30:00Z")


# --- the one command, the user's jobs ------------------------------------------------------------------------
def test_athena_once_lists_and_runs_compile(capsys: pytest.CaptureFixture[str]) -> None:
    assert "compile" in athena_once.usage_text()
    name = repo_job_names()[0]
    assert athena_once.main(["compile", "-s", name, "--slot", SLOT, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["job"] == name and document["console"]["note"] == NOTE


@pytest.mark.parametrize("name", repo_job_names())
def test_compile_every_job_of_the_repository(name: str) -> None:
    document = compiled_json(REPO_JOBS_DIR, name)
    job = common.load(REPO_JOBS_DIR).named(name)
    assert document["request"]["QueryString"] == job.query.text
    assert len(document["parameters"]) == len(job.query.parameter_order)
    assert not [t for t in common.tokens(document["console"]["sql"]) if t.token_type == TokenType.PLACEHOLDER]
