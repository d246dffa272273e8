"""``make demo`` end to end at a small size, plus its planning helpers and the Lambda-like context.

The end-to-end test runs ``python -m local.demo`` as a child process (the demo starts its own moto server
and execution environments and installs signal handlers), bounded by a timeout, and checks the invariants
of the report it writes for the two sample jobs (their canonical copies in tests/fixtures/jobs, picked with
``--jobs-dir`` and ``--job``: the test holds whatever jobs/ holds): every slot committed exactly once, the killed
winner's retry adopted its query, the paused winner's stale commit was rejected after a takeover, per-job totals.
A job whose query fails shows the reason in its slot line.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from local.demo import cli
from local.demo.plan import KILL, PAUSE, DemoOptions, available_memory_mb, fault_plan, jobs_at_once
from local.demo.printer import deployed_job_lines, failure_reason, read_api_lines, slot_line
from local.demo.runner import Demo, select_jobs
from local.emulators.lambda_runtime import LambdaContext
from slotlock.schedule import latest_firings
from stacks.jobs import DEFAULT_LOCAL_JOB
from tests.sample_jobs import CARRIERS, FIXTURE_JOBS_DIR, FLIGHTS, REPO_JOBS_DIR, TOP_ROUTES, repo_job_names

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_S = 150  # normally about 20 s; bounded so a hang fails instead of blocking the suite


def test_the_demos_slots_are_each_jobs_latest_firings_oldest_first() -> None:
    now = dt.datetime(2026, 11, 22, 0, 47, 13, tzinfo=dt.UTC)
    times = latest_firings("cron(0/30 * * * ? *)", "UTC", now, 4)
    assert [t.strftime("%H:%M") for t in times] == ["23:00", "23:30", "00:00", "00:30"]
    assert all((b - a).total_seconds() == 1800 for a, b in itertools.pairwise(times))
    assert latest_firings("cron(0/30 * * * ? *)", "UTC", dt.datetime(2026, 11, 22, 1, 0, tzinfo=dt.UTC), 1)[0].hour == 1
    # The carrier job: 06:15 New York time, across the end of daylight saving time (1 November 2026).
    mornings = latest_firings("cron(15 6 * * ? *)", "America/New_York", dt.datetime(2026, 11, 3, 12, tzinfo=dt.UTC), 3)
    assert [t.strftime("%m-%d %H:%M") for t in mornings] == ["11-01 11:15", "11-02 11:15", "11-03 11:15"]
    earlier = latest_firings("cron(15 6 * * ? *)", "America/New_York", dt.datetime(2026, 11, 1, 0, tzinfo=dt.UTC), 1)
    assert earlier[0].strftime("%m-%d %H:%M") == "10-31 10:15"  # EDT: UTC-4


@pytest.mark.parametrize(
    ("slots", "expected"),
    [(8, {2: KILL, 5: PAUSE}), (3, {1: KILL, 2: PAUSE}), (2, {0: KILL, 1: PAUSE}), (1, {0: KILL})],
)
def test_fault_plan(slots: int, expected: dict[int, str]) -> None:
    assert fault_plan(slots) == expected
    assert fault_plan(slots, enabled=False) == {}


def test_lambda_context_counts_down_to_a_real_deadline() -> None:
    now = [1_000_000]
    context = LambdaContext(aws_request_id="req-1", function_name="fn", timeout_ms=3000, clock_ms=lambda: now[0])
    assert context.get_remaining_time_in_millis() == 3000
    now[0] += 1250
    assert context.get_remaining_time_in_millis() == 1750
    now[0] += 10_000
    assert context.get_remaining_time_in_millis() == 0
    assert context.invoked_function_arn == "arn:aws:lambda:us-east-1:123456789012:function:fn"
    assert context.aws_request_id == "req-1" and context.memory_limit_in_mb == 256
    with pytest.raises(ValueError):
        LambdaContext(aws_request_id="r", function_name="fn", timeout_ms=0)


def _flights_per_origin(start: str, end: str) -> dict[str, int]:
    import duckdb

    from sample_data.flights import flights_table_dir

    sql = (
        "SELECT origin, count(*) FROM read_parquet(?, hive_partitioning = true) WHERE sched_dep_utc >= CAST(? AS TIMESTAMP)"
        " AND sched_dep_utc < CAST(? AS TIMESTAMP) GROUP BY origin"
    )
    with duckdb.connect() as con:
        return dict(con.execute(sql, [str(flights_table_dir() / "**" / "*.parquet"), start, end]).fetchall())


def test_the_demo_runs_every_job_folder_by_default_the_flights_dashboard_first() -> None:
    names = [job.job_name for job in select_jobs(REPO_JOBS_DIR)]
    assert sorted(names) == repo_job_names()  # whatever jobs/ holds
    assert names == sorted(names, key=lambda name: (name != DEFAULT_LOCAL_JOB, name))
    both = select_jobs(FIXTURE_JOBS_DIR, (CARRIERS, FLIGHTS))
    assert [job.job_name for job in both] == [FLIGHTS, CARRIERS]  # the kill goes to the first, the pause to the last
    assert [job.job_name for job in select_jobs(FIXTURE_JOBS_DIR, (TOP_ROUTES,))] == [TOP_ROUTES]


def test_an_unknown_job_is_one_line_listing_the_jobs_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--job", FLIGHTS, "--job", "no-such-job", "--jobs-dir", str(FIXTURE_JOBS_DIR)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: -s/--select: no job 'no-such-job' in tests/fixtures/jobs/; jobs: ")
    assert captured.err.rstrip().endswith(f"jobs: {CARRIERS}, {FLIGHTS}, {TOP_ROUTES}")
    assert cli.main(["--job", "no-such-job"]) == 2  # jobs/ as it is: its folders listed
    assert capsys.readouterr().err.rstrip().endswith(f"jobs: {', '.join(repo_job_names())}")


def test_the_options_carry_the_picked_jobs(tmp_path: Path) -> None:
    argv = ["--job", TOP_ROUTES, "--job", FLIGHTS, "--jobs-dir", str(FIXTURE_JOBS_DIR), "--workdir", str(tmp_path)]
    options = cli.parse_args(argv)
    assert options.jobs == (TOP_ROUTES, FLIGHTS) and options.jobs_dir == FIXTURE_JOBS_DIR
    assert cli.parse_args([]).jobs == () and DemoOptions().jobs_dir == REPO_ROOT / "jobs"
    assert [job.job_name for job in Demo(options).jobs] == [FLIGHTS, TOP_ROUTES]  # reads the folders, starts nothing


SUCCEEDED_SLOT = {
    "job": FLIGHTS,
    "number": 2,
    "slot": "2026-11-22T00:30:00Z",
    "winner_racer": 1,
    "winner_worker": "w1",
    "fencing_token": 4,
    "status": "succeeded",
    "outcome": "succeeded",
    "rows": 3,
    "data_scanned_bytes": 1234,
    "estimated_cost_usd": 0.0001,
    "takeovers": 0,
    "reentries": 0,
    "lost": 2,
}


def test_a_slot_line_numbers_the_slot_within_its_job_and_a_failed_one_says_why() -> None:
    line = slot_line(3, SUCCEEDED_SLOT, 1.25)
    assert line.startswith(f"slot 2/3 {FLIGHTS} 2026-11-22T00:30:00Z  winner racer 1 (w1) token 4  succeeded")
    assert "rows 3  scanned 1234 B" in line and line.endswith("lost races 2  1.2 s")
    message = "COLUMN_NOT_FOUND: line 2:8: Column 'nope' cannot be resolved\nat line 2\n..."
    failed = {**SUCCEEDED_SLOT, "status": "failed", "outcome": "failed", "rows": None}
    failed["error_reason"] = failure_reason({"state": "FAILED", "error_type": 1000, "error_message": message})
    line = slot_line(3, failed, 1.25)
    assert "failed  reason: COLUMN_NOT_FOUND: line 2:8: Column 'nope' cannot be resolved  takeovers" in line
    assert "rows" not in line and "at line 2" not in line


def test_the_deployed_commands_read_the_shared_stack_s_outputs_and_the_job_registry() -> None:
    # GIVEN the lines the demo ends with, for a real deployment
    lines = [*read_api_lines("http://127.0.0.1:8080", job=FLIGHTS, slot=None), *deployed_job_lines(FLIGHTS)]
    text = "\n".join(lines)

    # THEN they read outputs of the shared stack that it still has, never a per-job output ...
    for output in ("ReadApiUrl", "JobRegistryPath"):
        assert (
            f"--stack-name ScheduledAthenaRefresh --query \"Stacks[0].Outputs[?OutputKey=='{output}'].OutputValue\""
            in text
        )
    assert "FunctionName" not in text and "JobNames" not in text and "FailureQueueUrl" not in text
    # ... and find the job in the registry, as the operator tools do
    assert f'aws ssm get-parameters-by-path --path "${{JOBS}}{FLIGHTS}/" --query "Parameters[].Value"' in text
    assert 'aws ssm get-parameters-by-path --path "$JOBS" --recursive' in text
    assert f"  .venv/bin/python -m tools.ops status --job {FLIGHTS}" in lines


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            {"error_message": "SYNTAX_ERROR: line 1:1: mismatched input\nmore"},
            "SYNTAX_ERROR: line 1:1: mismatched input",
        ),
        (
            {"type": "QueryEngineError", "error_code": "InvalidRequestException", "error_message": "start failed: no"},
            "InvalidRequestException: start failed: no",
        ),
        (
            {"type": "ResultTypeError", "error_message": "column 'a' (bigint): cannot convert 'x': bad"},
            "ResultTypeError: column 'a' (bigint): cannot convert 'x': bad",
        ),
        ({"reason": "TABLE_NOT_FOUND: no table"}, "TABLE_NOT_FOUND: no table"),
        ({"error_code": "X_Y", "error_message": "X_Y: already coded"}, "X_Y: already coded"),
        ({}, None),
        (None, None),
        ({"error_message": "E" * 500}, "E" * 197 + "..."),
    ],
)
def test_failure_reason_is_the_code_and_the_first_line(error: object, reason: str | None) -> None:
    assert failure_reason(error) == reason


def run_demo(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """``python -m local.demo`` as a child (bounded), its report and work directory under ``tmp_path``."""
    report_path = tmp_path / "demo-report.json"
    workdir = tmp_path / "demo"
    argv = [sys.executable, "-m", "local.demo", *options, "--report", str(report_path), "--workdir", str(workdir)]
    proc = subprocess.run(
        argv,
        check=False,
        cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "PORT"},  # the curl lines then name port 8080
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
    )
    return proc, report_path, workdir


@pytest.mark.parametrize(
    ("jobs", "racers", "cores", "available_mb", "asked", "expected"),
    [
        (2, 6, 2, 20_000, 0, 2),  # the samples: both at once
        (41, 6, 2, 20_000, 0, 4),  # forty jobs on 2 cores: 4 at once (cores), memory would carry 20
        (41, 6, 16, 3_000, 0, 3),  # many cores, little memory: 3 x 7 environments x 70 MB within half of 3 GB
        (41, 6, 2, 100, 0, 1),  # never below one job
        (41, 6, 2, None, 0, 4),  # memory unknown: the cores decide
        (41, 6, 2, 20_000, 10, 10),  # --parallel-jobs decides
        (3, 6, 2, 20_000, 10, 3),  # ... within the jobs there are
    ],
)
def test_jobs_at_once_are_bounded_by_cores_and_memory(
    jobs: int, racers: int, cores: int, available_mb: float | None, asked: int, expected: int
) -> None:
    assert jobs_at_once(jobs, racers, cores=cores, available_mb=available_mb, asked=asked) == expected


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemAvailable:   20480000 kB\n", encoding="ascii")
    assert available_memory_mb(meminfo) == 20_000
    assert available_memory_mb(tmp_path / "absent") is None
    meminfo.write_text("MemTotal: 1 kB\n", encoding="ascii")
    assert available_memory_mb(meminfo) is None


@pytest.mark.slow
def test_jobs_beyond_the_machine_run_in_batches_each_slot_still_once(tmp_path: Path) -> None:
    """Issue 34: 41 jobs started 246 environments at once (16 GB). With one job at a time, each job's environments
    start for its batch and stop after it; every slot still commits once."""
    jobs_dir = tmp_path / "jobs"
    for name in ("a-routes", "b-routes", "c-routes"):
        shutil.copytree(FIXTURE_JOBS_DIR / TOP_ROUTES, jobs_dir / name)
    proc, report_path, _ = run_demo(
        tmp_path, "--jobs-dir", str(jobs_dir), "--slots", "1", "--racers", "2", "--no-faults", "--parallel-jobs", "1"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "note: 3 jobs x 2 racers need 6 execution environments" in proc.stdout
    assert "runs 1 job(s) at once: 3 batches" in proc.stdout
    assert proc.stdout.count("starting 2 Lambda execution environments for each of 1 jobs") == 3
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["ok"] is True and report["slots_completed"] == report["slots"] == 3
    assert report["duplicate_commits"] == 0 and report["queries_started"] == 3


@pytest.mark.slow
def test_a_failed_slot_shows_its_reason_in_its_slot_line(tmp_path: Path) -> None:
    jobs_dir = tmp_path / "jobs"
    shutil.copytree(FIXTURE_JOBS_DIR / TOP_ROUTES, jobs_dir / "broken-routes")
    query = jobs_dir / "broken-routes" / "query.sql"  # valid at synth (its parameters), fails when it runs
    query.write_text(
        query.read_text(encoding="utf-8").replace("count(*) AS flights", "count(no_such_column) AS flights")
    )
    proc, report_path, _ = run_demo(
        tmp_path, "--jobs-dir", str(jobs_dir), "--slots", "2", "--racers", "2", "--lease-s", "3", "--no-faults"
    )
    output = proc.stdout + proc.stderr
    # issue 34: a job whose query fails is the job's problem, not a failed check: the guarantees held (one
    # query, one terminal record per slot), its FAILED slots are counted and named with their reason, exit 0
    assert proc.returncode == 0, output
    lines = [line for line in proc.stdout.splitlines() if " slot " in line and "broken-routes 20" in line]
    assert [line.split("] ", 1)[1].split(" broken-routes")[0] for line in lines] == ["slot 1/2", "slot 2/2"], output
    for line in lines:
        assert "  failed  reason: COLUMN_NOT_FOUND: " in line and "no_such_column" in line, line
        assert "rows None" not in line
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert [s["number"] for s in report["per_slot"]] == [1, 2]
    assert all(
        s["status"] == "failed" and s["error_reason"].startswith("COLUMN_NOT_FOUND: ") for s in report["per_slot"]
    )
    assert report["ok"] is True and report["failures"] == [], report["failures"]
    assert (report["slots_failed"], report["slots_completed"], report["queries_started"]) == (2, 0, 2)
    assert report["per_job"]["broken-routes"]["violations"] == []
    assert "2 slot(s) FAILED, recorded once" in proc.stdout and "- broken-routes: COLUMN_NOT_FOUND: " in proc.stdout
    assert "FAILED:" not in proc.stdout


@pytest.mark.slow
def test_demo_small_run_with_both_faults(tmp_path: Path) -> None:
    proc, report_path, workdir = run_demo(
        tmp_path,
        "--jobs-dir",
        str(FIXTURE_JOBS_DIR),  # the two samples as shipped, whatever jobs/ holds
        "--job",
        FLIGHTS,
        "--job",
        CARRIERS,
        "--slots",
        "3",
        "--racers",
        "3",
        "--lease-s",
        "3",
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    report = json.loads(report_path.read_text(encoding="utf-8"))

    assert report["ok"] is True and report["failures"] == [], output
    assert report["jobs"] == ["flights-dashboard", "carrier-on-time"] and report["slots_per_job"] == 3
    assert report["slots"] == 6 and report["racers"] == 3
    assert report["slots_completed"] == report["slots"]
    assert report["duplicate_commits"] == 0
    assert report["stale_writes_rejected"] >= 1
    assert report["stale_writes_accepted"] == 0
    assert report["takeovers"] >= 1
    assert report["kills_injected"] == 1
    assert report["pauses_injected"] == 1
    assert report["queries_started"] == report["slots"]  # the retry and the takeover adopted the queries
    assert report["engine_query_executions"] == report["slots"]
    # 2 jobs x 3 racers x 3 slots + the Lambda retry of the killed winner + the late delivery
    assert report["invocations"] == 2 * 3 * 3 + 2
    for key in (
        "slots",
        "racers",
        "invocations",
        "slots_completed",
        "duplicate_commits",
        "stale_writes_rejected",
        "takeovers",
        "queries_started",
        "kills_injected",
        "pauses_injected",
    ):
        assert isinstance(report[key], int), key
    per_job = report["per_job"]
    assert per_job["flights-dashboard"]["kills_injected"] == 1 and per_job["carrier-on-time"]["pauses_injected"] == 1
    assert all(totals["slots_completed"] == 3 and totals["violations"] == [] for totals in per_job.values())

    by_job = {job: [s for s in report["per_slot"] if s["job"] == job] for job in report["jobs"]}
    assert [s["job"] for s in report["per_slot"]] == ["flights-dashboard", "carrier-on-time"] * 3  # interleaved
    assert [s["number"] for s in report["per_slot"]] == [1, 1, 2, 2, 3, 3]  # numbered within each job
    assert "slot 3/3 carrier-on-time " in proc.stdout and "slot 6/6" not in proc.stdout
    for slots in by_job.values():
        tokens = [s["fencing_token"] for s in slots]
        assert tokens == sorted(tokens) and len(set(tokens)) == 3  # each job's fencing tokens only grow
    for slot in report["per_slot"]:
        assert slot["status"] == "succeeded" and slot["commits"] == 1 and slot["queries_started"] == 1
        assert slot["store"]["slot_status"] == "SUCCEEDED"
        assert slot["store"]["result_items"] == 1
        assert slot["store"]["result_token"] == slot["fencing_token"]
        assert slot["rows"] == slot["store"]["result_rows"] == len(slot["results"]) >= 1
    killed = next(s for s in report["per_slot"] if s["fault"] == KILL)
    assert killed["job"] == "flights-dashboard"
    assert killed["winner_kind"] == "retry" and killed["reentries"] == 1 and killed["takeovers"] == 0
    assert len(killed["tokens_acquired"]) == 2  # the killed winner's token, then its retry's
    paused = next(s for s in report["per_slot"] if s["fault"] == PAUSE)
    assert paused["job"] == "carrier-on-time"
    assert paused["winner_kind"] == "late" and paused["takeovers"] == 1 and paused["stale_rejected"] == 1
    stale = [i for i in paused["invocation_log"] if i["status"] == "stale_rejected"]
    assert len(stale) == 1 and stale[0]["fencing_token"] < paused["fencing_token"]
    # The stored numbers are the real ones: recount each flights slot's 2013 window directly on the Parquet file.
    flights = by_job["flights-dashboard"]
    expected = {slot["slot"]: _flights_per_origin(*slot["window"]) for slot in flights}
    for slot in flights:
        assert slot["window"][1].startswith("2013-")
        assert {row["origin"] for row in slot["results"]} <= {"EWR", "JFK", "LGA"}
        assert {row["origin"]: row["flights"] for row in slot["results"]} == expected[slot["slot"]]
    # The carrier job's rows: one per carrier, with its constant (on time: at most 15 min late) applied.
    for slot in by_job["carrier-on-time"]:
        assert all(0 <= row["on_time_arrivals"] <= row["flights"] for row in slot["results"])
        assert len({row["carrier"] for row in slot["results"]}) == len(slot["results"]) > 5
    distinct_expected = len({json.dumps(v, sort_keys=True) for v in expected.values()})
    assert per_job["flights-dashboard"]["distinct_results"] >= distinct_expected

    assert "OK:" in proc.stdout and "takeovers" in proc.stdout
    # The stores outlive the demo's moto server: <workdir>/store for `make serve` (local.serve.store).
    manifest = json.loads((workdir / "store" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["result_items"] == report["slots"] + len(report["jobs"])  # + each job's LATEST
    assert manifest["counts"]["lock_items"] >= report["slots"] + len(report["jobs"])  # slot items + lock items
    assert sorted(manifest["catalog"]["jobs"]) == sorted(report["jobs"])
    assert report["store"]["result_items"] == manifest["counts"]["result_items"]
    assert all((workdir / "store" / table["file"]).is_file() for table in manifest["tables"])
    # ... and the run ends with curl lines that read it over HTTP, with a real slot of the run.
    tail = proc.stdout[proc.stdout.index("OK:") :]
    assert f"python -m local.serve --workdir {workdir}" in tail
    assert "curl -s http://127.0.0.1:8080/jobs\n" in tail
    assert f"curl -s http://127.0.0.1:8080/jobs/flights-dashboard/results/{killed['slot']}" in tail
    assert "curl -s -H 'Accept: text/csv' http://127.0.0.1:8080/jobs/flights-dashboard/results/latest" in tail
    assert "curl -s 'http://127.0.0.1:8080/jobs/carrier-on-time/slots?limit=5'" in tail
    assert '--aws-sigv4 "aws:amz:$AWS_REGION:execute-api"' in tail and '"$READ_API_URL/jobs"' in tail
    assert 'aws ssm get-parameters-by-path --path "${JOBS}flights-dashboard/"' in tail  # the job, from the registry
    # The handler's Powertools JSON logs went to the per-environment log files, not to the terminal.
    logs = list((workdir / "logs").glob("*/w*.log"))
    assert logs and any('"function_request_id"' in p.read_text(encoding="utf-8") for p in logs)
    assert '"function_request_id"' not in proc.stdout


def test_an_invalid_job_folder_is_listed_problem_by_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As synth prints them: one line per problem, file and line named, exit 2, nothing started."""
    from local.demo.cli import main

    folder = tmp_path / "jobs" / "broken"
    folder.mkdir(parents=True)
    (folder / "job.toml").write_text(
        'source = "sample:flights"\nschedule_expression = "cron(0 * * * ? *)"\nracer = 3\n'
    )
    (folder / "query.sql").write_text("SELECT origin FROM flights WHERE t >= :window_start AND t < :window_end,\n")
    assert main(["--jobs-dir", str(tmp_path / "jobs"), "--workdir", str(tmp_path / "work")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("jobs/broken/job.toml:3: racer: unknown key; did you mean racers?"), lines
    assert len(lines) >= 1 and not any("Traceback" in line for line in lines)
