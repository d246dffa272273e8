"""The scaling benchmark (issue 23) at its smallest: one synth of one copy of the sample job in a fresh process (the
report's shape, the dashboard's widgets, the cost at that count), and the fit, the widget count and the goals on
hand-made figures. Counts and shapes, never times: the goals on real figures are judged by ``make bench``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import report, scaling
from bench.report import check_targets
from bench.report_tables import targets_table

FIXTURE_JOB = Path(__file__).resolve().parents[2] / "fixtures" / "jobs" / "flights-dashboard"


def test_copies_are_distinct_folders(tmp_path: Path) -> None:
    jobs = scaling.make_jobs(tmp_path, 3, sample=FIXTURE_JOB)
    assert sorted(p.name for p in jobs.iterdir()) == ["fd-001", "fd-002", "fd-003"]
    assert (jobs / "fd-002" / "job.toml").read_text() == (FIXTURE_JOB / "job.toml").read_text()


def test_least_squares_line() -> None:
    # y = 0.5 x + 20 exactly, then with a residual
    exact = scaling.linear_fit([(2, 21.0), (50, 45.0), (300, 170.0)])
    assert exact["slope"] == pytest.approx(0.5) and exact["intercept"] == pytest.approx(20.0)
    assert exact["r2"] == pytest.approx(1.0)
    noisy = scaling.linear_fit([(0, 0.0), (1, 2.0), (2, 1.0)])  # hand-computed: slope 0.5, intercept 0.5
    assert noisy["slope"] == pytest.approx(0.5) and noisy["intercept"] == pytest.approx(0.5)
    assert scaling.linear_fit([(2, 1.0)]) == {"slope": None, "intercept": None, "r2": None}


def _body(widgets: list[dict[str, Any]], variables: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``Fn::Join`` body as the CDK writes it: the text cut at every token."""
    text = json.dumps({"start": "-PT3H", "widgets": widgets, "variables": variables}, separators=(",", ":"))
    head, tail = text.split("ARN", 1)
    return {"Fn::Join": ["", [head, {"Fn::GetAtt": ["Fn", "Arn"]}, tail]]}


def test_widgets_counted_through_the_join_not_the_variables() -> None:
    widgets = [
        {"type": "custom", "properties": {"endpoint": "ARN", "type": "nested"}},
        {"type": "metric", "properties": {"metrics": [["A", "B", {"type": "x"}]]}},
        {"type": "text", "properties": {"markdown": 'say "type": no'}},
    ]
    body = _body(widgets, [{"type": "property", "property": "region"}])
    assert scaling.widget_count(body) == 3
    assert scaling._top_level_types(scaling.join_text(body)) == 3  # the fallback agrees
    assert scaling.widget_count('{"widgets":[{"type":"text"}]}') == 1


def _run(jobs: int, *, wall: float, resources: int = 46, widgets: int = 11, fixed: float = 1.2) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "exit_status": 0,
        "wall_s": wall,
        "cpu_s": wall,
        "stderr": [],
        "load_average_1m_before": 1.0,
        "max": {"resources": resources, "outputs": 26, "bytes": 45_000},
        "total": {"resources": resources * 2, "outputs": 26, "bytes": 90_000},
        "largest_stack": "ScheduledAthenaRefresh",
        "stacks": [
            {"stack": "ScheduledAthenaRefresh", "resources": 46, "outputs": 26, "bytes": 45_000, "jobs": None},
            {"stack": "ScheduledAthenaRefresh-Jobs-00", "resources": 11, "outputs": 0, "bytes": 19_000, "jobs": 1},
        ],
        "job_stacks": 16,
        "job_stacks_non_empty": min(jobs, 16),
        "jobs_per_stack_max": -(-jobs // 16),
        "dashboard_widgets": widgets,
        "cost": {
            "fixed_monthly_usd": fixed,
            "own_fixed_usd": 1.0,
            "deployment_share_usd": fixed - 1.0,
            "schedule": "cron(0/30 * * * ? *)",
        },
    }


def _result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["exit_status"] == 0]
    fit = scaling.linear_fit([(r["jobs"], r["wall_s"]) for r in ok])
    return {
        "sample": "tests/fixtures/jobs/flights-dashboard",
        "copies": [r["jobs"] for r in runs],
        "runs": runs,
        "fit": {
            "seconds_per_job": fit["slope"],
            "intercept_s": fit["intercept"],
            "r2": fit["r2"],
            "cpu_seconds_per_job": fit["slope"],
            "cpu_intercept_s": fit["intercept"],
            "points": len(ok),
        },
    }


def test_goals_on_hand_made_figures() -> None:
    # GIVEN 2, 50 and 300 jobs: 300 jobs in 170 s, the 300-job shared stack at 520 resources, widgets constant,
    # the fixed cost $1.60 at 50 jobs and $1.10 at 300
    result = _result(
        [
            _run(2, wall=21.0, fixed=2.8),
            _run(50, wall=45.0, fixed=1.6),
            _run(300, wall=170.0, resources=520, fixed=1.1),
        ]
    )
    checks = {c["target"]: c for c in check_targets({}, None, None, None, result)}

    assert checks["synth of 300 jobs < 300 s"]["met"] and checks["synth of 300 jobs < 300 s"]["measured"] == 170.0
    resources = checks["every template < 500 resources (up to 300 jobs)"]
    assert not resources["met"] and resources["measured"] == 520 and "20" in resources["missed_by"]
    assert checks["dashboard widgets < 500"]["met"] and checks["dashboard widgets constant in N"]["met"]
    assert not checks["fixed monthly cost of a 30-minute job < $1.50 at 50 jobs"]["met"]
    assert checks["fixed monthly cost of a 30-minute job < $1.50 at 300 jobs"]["met"]
    assert not any("at 2 jobs" in target for target in checks)  # 2 jobs: no cost goal
    assert all(c["endpoint"] == "scaling" for c in checks.values())
    assert "scaling" in targets_table(list(checks.values()))


def test_widgets_growing_with_n_and_a_failed_synth_are_misses() -> None:
    failed = {"jobs": 300, "exit_status": 2, "wall_s": 90.0, "cpu_s": 80.0, "stderr": ["over 500 resources"]}
    result = _result([_run(2, wall=20.0, widgets=11), _run(50, wall=40.0, widgets=13), failed])
    checks = {c["target"]: c for c in report.scaling_checks(result)}

    assert not checks["synth of 300 jobs succeeds"]["met"] and "500" in checks["synth of 300 jobs succeeds"]["note"]
    assert not checks["dashboard widgets constant in N"]["met"]
    synth = checks["synth of 300 jobs < 300 s"]  # no 300-job run: the fit (0.4167 s per job + 19.2 s), extrapolated
    assert synth["note"] == "extrapolated from the fit" and synth["measured"] == pytest.approx(144.2, abs=0.1)
    lines: list[str] = []
    report.render_scaling(result, lines.append)
    assert "FAILED (exit 2)" in "\n".join(lines)


@pytest.mark.slow
def test_one_copy_synthesized_in_a_fresh_process() -> None:
    # WHEN one copy of the sample job is synthesized in a fresh process (about 20 s)
    result = scaling.scaling((1,), sample=FIXTURE_JOB, say=lambda _: None)

    # THEN the report holds the synth, every stack, the dashboard and the cost at one job
    if result.get("skipped"):
        pytest.skip(result["skipped"])
    (run,) = result["runs"]
    assert run["exit_status"] == 0, run["stderr"]
    assert run["jobs"] == 1 and run["wall_s"] > 0 and run["cpu_s"] > 0
    names = {s["stack"] for s in run["stacks"]}
    assert scaling.SHARED_STACK in names and run["job_stacks"] == len(names) - 1
    assert run["job_stacks_non_empty"] == 1 and run["jobs_per_stack_max"] == 1
    assert run["max"]["resources"] == max(s["resources"] for s in run["stacks"]) < 500
    assert run["total"]["bytes"] == sum(s["bytes"] for s in run["stacks"])
    assert run["dashboard_widgets"] > 0 and len(run["dashboards"]) == 1
    cost = run["cost"]
    # one job carries the whole deployment: the dashboard alone is a few dollars a month
    assert cost["deployment_share_usd"] == cost["deployment_usd"] > 0
    assert cost["fixed_monthly_usd"] == pytest.approx(cost["own_fixed_usd"] + cost["deployment_share_usd"], abs=1e-6)
    assert result["fit"]["points"] == 1 and result["fit"]["seconds_per_job"] is None
    assert report.scaling_checks(result)  # resources, outputs, bytes, widgets
