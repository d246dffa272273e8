"""The cost scenarios (issue 14) at their smallest: bytes versus a tiny history, one measured slot's counts, and the
per-slot arithmetic and goals on given figures (hand-computed).

Bytes and counts, never times: the goals are judged by ``make bench`` (:mod:`bench.report`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from athena_refresh.cost import MB, TB, Prices
from bench import cost, cost_measure, cost_slot, report, report_tables, scenarios
from bench.backends import Endpoint
from bench.cost_slot import SlotFigures
from tests.sample_jobs import sample_repo_fixture

# ``bench.cost`` measures the flights-dashboard sample job of the repository's folders: here its canonical copy (tests/fixtures/jobs), whatever jobs/ holds.
sample_repo = sample_repo_fixture("bench.cost.REPO_ROOT")


#: Round prices for hand computation: $5 per TB, 10 MB minimum; $1e-5 per GB-s and $0.2 per million requests;
#: $1 per million WRU; $1 per million Scheduler invocations.
PRICES = Prices(
    region="test-1",
    requested_region="test-1",
    retrieved="2026-11-25",
    athena_usd_per_tb_scanned=5.0,
    athena_min_mb_per_query=10,
    lambda_usd_per_gb_s={"arm64": 1e-5, "x86_64": 2e-5},
    lambda_usd_per_million_requests=0.2,
    dynamodb_usd_per_million_write_units=1.0,
    dynamodb_usd_per_million_read_units=0.25,
    scheduler_usd_per_million_invocations=1.0,
    cloudwatch_usd_per_metric_month=0.3,
    cloudwatch_usd_per_alarm_month=0.1,
    cloudwatch_usd_per_dashboard_month=3.0,
    cloudwatch_usd_per_gb_logs_ingested=0.5,
    cloudwatch_usd_per_gb_month_logs_stored=0.03,
    cloudwatch_usd_per_gb_logs_insights_scanned=0.005,
    s3_usd_per_thousand_put=0.005,
    s3_usd_per_thousand_get=0.0004,
    apigateway_usd_per_million_http_requests=1.0,
)
ONE_QUERY = 10 * MB / TB * 5.0  # 4.76837158203125e-05: one minimum-billed query
USD = pytest.approx


def figures(**overrides: Any) -> SlotFigures:
    """A 1 GB function; a 1 s query; the winner's own work 50 ms, a loser 10 ms, an unlocked runner's 10 ms;
    winner 20 WRU, loser 1, the result PutItem 2; 1,000 bytes scanned (billed 10 MB)."""
    values: dict[str, Any] = {
        "scan_bytes": 1000,
        "winner_lock_ms": 50.0,
        "loser_ms": 10.0,
        "runner_own_ms": 10.0,
        "winner_write_units": 20.0,
        "loser_write_units": 1.0,
        "put_write_units": 2.0,
        "winner_requests": {"TransactWriteItems": 2, "UpdateItem": 1},
        "loser_requests": {"UpdateItem": 1},
        "put_requests": {"PutItem": 1},
        "memory_mb": 1024,
        "assumed_query_ms": 1000.0,
    }
    return SlotFigures(**{**values, **overrides})


@pytest.mark.slow
def test_scan_versus_a_tiny_history(tmp_path: Path) -> None:
    # WHEN the job's query runs on 1x and 2x the sample, partitioned and as one file
    scan = cost.scan_versus_history((1, 2), work_dir=tmp_path, say=lambda _: None)

    # THEN the partitioned bytes per slot are the same at both sizes (2 of the daily files, their 6 columns)
    part, unpart = scan["partitioned"], scan["unpartitioned"]
    assert [r["years"] for r in part] == [r["years"] for r in unpart] == [1, 2]
    assert part[0]["engine_bytes"] > 0 and part[0]["engine_bytes"] == part[1]["engine_bytes"]
    assert all(r["engine_bytes"] == r["scan"]["bytes"] for r in part + unpart)  # the engine and the breakdown agree
    assert [r["scan"]["files_read"] for r in part] == [2, 2]
    assert part[1]["scan"]["files_total"] > part[0]["scan"]["files_total"]
    assert scan["flat"] == {"limit": 0.10, "max_deviation": 0.0, "from": 1, "to": 2}
    # AND the unpartitioned query has no dt predicate, reads one file, and the whole-table bound doubles
    assert scan["removed_predicate"] == ["dt BETWEEN :window_first_date AND :window_last_date"]
    assert all(r["engine_bytes"] > 0 and r["scan"]["files_total"] == 1 for r in unpart)
    assert unpart[1]["whole_table_bytes"] > 1.9 * unpart[0]["whole_table_bytes"]
    assert scan["row_group_rows"] > 0
    # AND the temporary tables are gone; the table prints
    assert list(tmp_path.iterdir()) == []
    assert "| partitioned   | 2x" in report_tables.scan_table(scan)


def test_strip_partition_filter_keeps_every_other_conjunct() -> None:
    sql = "SELECT a FROM t WHERE x >= :window_start AND dt BETWEEN :window_first_date AND :window_last_date AND y = 1"
    stripped, removed = cost.strip_partition_filter(sql)
    assert removed == ("dt BETWEEN :window_first_date AND :window_last_date",)
    assert "dt" not in stripped.replace("window", "") and ":window_start" in stripped and "y = 1" in stripped
    with pytest.raises(ValueError, match="no WHERE conjunct"):
        cost.strip_partition_filter("SELECT a FROM t WHERE x = 1")


def test_the_job_query_without_its_partition_predicate_binds_two_parameters() -> None:
    query = cost.job_query()
    assert query.partitioned.parameter_order == ("window_start", "window_end", "window_first_date", "window_last_date")
    assert query.unpartitioned.parameter_order == ("window_start", "window_end")
    # the slot 2026-11-21T00:30Z is mapped onto 2013 by the job's data_year: the newest copy of the history
    assert query.parameters(True) == ["'2013-11-20 00:30:00'", "'2013-11-21 00:30:00'", "'2013-11-20'", "'2013-11-21'"]


def test_cost_per_slot_for_three_and_nine_racers_by_hand() -> None:
    per_slot = cost_slot.alternatives_for(figures(), (3, 9), PRICES)
    three, nine = per_slot["3"], per_slot["9"]

    # N=3, ours: Lambda 1 GB x (1.05 s + 2 x 0.01 s) = 1.07 GB-s and 3 requests; 20 + 2 WRU; 3 invocations
    ours = three["ours"]["by_service_usd"]
    assert ours["athena"] == USD(ONE_QUERY, abs=1e-10)
    assert ours["lambda"] == USD(1.07e-5 + 0.6e-6)
    assert ours["dynamodb"] == USD(22e-6)
    assert ours["scheduler"] == USD(3e-6)
    assert three["ours"]["requests"] == {
        "lambda_invocations": 3,
        "scheduler_invocations": 3,
        "athena_queries": 1,
        "dynamodb_requests": 5,
        "dynamodb_by_operation": {"TransactWriteItems": 2, "UpdateItem": 3},
    }
    # 1 runner, no lock: 1.01 GB-s and 1 request, 2 WRU, 1 invocation
    single = three["single"]["by_service_usd"]
    assert (single["lambda"], single["dynamodb"], single["scheduler"]) == (USD(1.03e-5), USD(2e-6), USD(1e-6))
    assert three["single"]["estimated_cost_usd"] == USD(ONE_QUERY + 1.03e-5 + 3e-6, abs=1e-10)
    # 3 runners, no lock: 3 queries, 3 x 1.01 GB-s, 3 requests, 6 WRU
    unlocked = three["unlocked"]["by_service_usd"]
    assert unlocked["athena"] == USD(3 * ONE_QUERY, abs=1e-10)
    assert (unlocked["lambda"], unlocked["dynamodb"]) == (USD(3.03e-5 + 0.6e-6), USD(6e-6))
    assert three["unlocked"]["requests"]["athena_queries"] == 3

    # the lock's overhead: (1.13e-5 - 1.03e-5) Lambda + 20e-6 DynamoDB + 2e-6 Scheduler = 23e-6 < one query
    assert three["overhead"]["usd"] == USD(23e-6, abs=1e-10)
    assert three["overhead"]["reference_usd"] == USD(ONE_QUERY)
    assert three["overhead"]["met"] is True
    assert three["athena_multiple"] == {"ratio": USD(3.0), "limit": 3, "met": True}

    # N=9: Lambda 1.13 GB-s + 9 requests, 20 + 8 WRU, 9 invocations: overhead 36.8e-6
    assert nine["ours"]["by_service_usd"]["lambda"] == USD(1.13e-5 + 1.8e-6)
    assert nine["ours"]["by_service_usd"]["dynamodb"] == USD(28e-6)
    assert nine["overhead"]["usd"] == USD(36.8e-6, abs=1e-10)
    assert nine["overhead"]["met"] is True
    assert nine["athena_multiple"]["ratio"] == USD(9.0) and nine["athena_multiple"]["met"]
    assert nine["unlocked"]["requests"]["dynamodb_by_operation"] == {"PutItem": 9}
    # a loser billed tools.cost's 100 ms instead: 8 x 0.09 GB-s more
    assert nine["overhead"]["with_modelled_loser_usd"] == USD(36.8e-6 + 8 * 0.09 * 1e-5, abs=1e-10)


def _cost_report(per_slot: dict[str, Any], deviation: float = 0.0) -> dict[str, Any]:
    return {
        "scan": {"flat": {"limit": 0.10, "max_deviation": deviation, "from": 1, "to": 16}},
        "figures": figures().as_dict() | {"units_source": "reported"},
        "slot_measurement": {"endpoint": "dynamodb-local"},
        "per_slot": per_slot,
    }


def test_the_goals_met_and_missed() -> None:
    # GIVEN the figures above (met), and the same with a winner writing 40 WRU (N=9: 56.8e-6 > one query)
    met = report.cost_checks(_cost_report(cost_slot.alternatives_for(figures(), (3, 9), PRICES)))
    heavy = cost_slot.alternatives_for(figures(winner_write_units=40.0), (3, 9), PRICES)
    missed = report.cost_checks(_cost_report(heavy, deviation=0.25))

    # THEN every goal is met in the first
    assert [c["met"] for c in met] == [True] * 5
    overhead3 = next(c for c in met if c["target"].startswith("N=3: the lock"))
    assert overhead3["measured"] == USD(23.0) and overhead3["limit"] == USD(ONE_QUERY * 1e6)
    # AND in the second the flat goal and N=9's overhead are missed, by how much; N=3 (43e-6) still passes
    by_target = {c["target"][:12]: c for c in missed}
    assert by_target["bytes read p"]["met"] is False and by_target["bytes read p"]["missed_by"] == "15.0 points"
    assert by_target["N=3: the loc"]["met"] is True
    assert by_target["N=9: the loc"]["met"] is False
    assert by_target["N=9: the loc"]["missed_by"] == f"{56.8 - ONE_QUERY * 1e6:.2f} µUSD"
    # AND an Athena multiple below N is missed
    fewer = copy.deepcopy(heavy)
    fewer["3"]["athena_multiple"] = {"ratio": 1.0, "limit": 3, "met": False}
    athena = [c for c in report.cost_checks(_cost_report(fewer)) if c["target"].startswith("N=3: N unlocked")]
    assert athena[0]["met"] is False and athena[0]["missed_by"] == "2.00 below"
    # AND the per-slot table prints the verdict
    assert "MISSED: limit 47.68" in report_tables.per_slot_table(heavy["9"])


def test_without_a_measurement_every_figure_but_the_bytes_is_modelled() -> None:
    fig = cost_slot.slot_figures(None, scan_bytes=20_000, job=cost.job_definition())
    assert (fig.units_source, fig.loser_ms, fig.winner_lock_ms) == ("modelled", 100.0, 0.0)
    assert fig.winner_write_units >= 7 and fig.loser_write_units == 1.0  # acquire 1, record_state 4, commit >= 2
    assert fig.sources["units"].startswith("modelled")


@pytest.mark.slow
def test_one_measured_slot_counts_the_requests_of_each_role(atomic_moto_endpoint: str) -> None:
    # WHEN one real slot runs on the serialized moto server (no capacity figures: units by AWS's rule)
    endpoint = Endpoint("moto-atomic", atomic_moto_endpoint)
    measured = cost_measure.measure_slot(endpoint, scenarios.new_run_id(), repetitions=1, warmup=0, say=lambda _: None)

    # THEN the winner acquired, recorded its state and committed; the loser sent one write; the runner one PutItem
    assert measured["requests"] == {
        "winner": {"TransactWriteItems": 2, "UpdateItem": 1},
        "loser": {"UpdateItem": 1},
        "runner": {"PutItem": 1},
    }
    assert measured["reported_units"] is None  # moto's capacity figures are placeholders
    rule, model = measured["aws_rule_units"], measured["modelled_units"]
    # AND AWS's rule counts the history index's copies of the slot item, which the model leaves out
    assert rule["index_write_units"] >= 4
    assert rule["winner_write_units"] >= model["winner_write_units"]
    assert measured["scan_bytes"] > 0
    fig = cost_slot.slot_figures(measured, scan_bytes=measured["scan_bytes"], job=cost.job_definition())
    assert fig.units_source == "aws_rule" and fig.winner_write_units == rule["winner_write_units"]
