"""``make demo`` end to end at a small size, plus its planning helpers and the Lambda-like context.

The end-to-end test runs ``python -m local.demo`` as a child process (the demo starts its own moto server
and execution environments and installs signal handlers), bounded by a timeout, and checks the invariants
of the report it writes for both sample jobs: every slot committed exactly once, the killed winner's retry
adopted its query, the paused winner's stale commit was rejected after a takeover, per-job totals.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from athena_refresh.schedule import latest_firings
from local.demo.plan import KILL, PAUSE, fault_plan
from local.emulators.lambda_runtime import LambdaContext

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


@pytest.mark.slow
def test_demo_small_run_with_both_faults(tmp_path: Path) -> None:
    report_path = tmp_path / "demo-report.json"
    workdir = tmp_path / "demo"
    argv = [
        sys.executable,
        "-m",
        "local.demo",
        "--slots",
        "3",
        "--racers",
        "3",
        "--lease-s",
        "3",
        "--report",
        str(report_path),
        "--workdir",
        str(workdir),
    ]
    proc = subprocess.run(
        argv,
        check=False,
        cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "PORT"},  # the curl lines then name port 8080
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
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
    # The handler's Powertools JSON logs went to the per-environment log files, not to the terminal.
    logs = list((workdir / "logs").glob("*/w*.log"))
    assert logs and any('"function_request_id"' in p.read_text(encoding="utf-8") for p in logs)
    assert '"function_request_id"' not in proc.stdout
