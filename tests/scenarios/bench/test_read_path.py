"""The read-path scenario at its smallest: it seeds through the real writers and counts the requests of the read API.

Counts, never times: the 1.3x goal is judged by ``make bench`` (:mod:`bench.report`). Runs against the serialized
moto server (the session fixture).
"""

from __future__ import annotations

import pytest

from bench import read_path, report, report_tables, scenarios
from bench.backends import Endpoint

pytestmark = pytest.mark.slow


@pytest.fixture
def endpoint(atomic_moto_endpoint: str) -> Endpoint:
    return Endpoint("moto-atomic", atomic_moto_endpoint)


def test_read_path_sends_one_batchgetitem_per_latest_and_one_query_per_page(endpoint: Endpoint) -> None:
    # WHEN the scenario runs at its smallest size (history seeded through slotlock and ResultsStore)
    size = read_path.ReadSize(latest_samples=3, history_samples=2, warmup=1, stub_samples=2)
    figures = read_path.read_path(endpoint, scenarios.new_run_id(), size, say=lambda _: None)

    # THEN more than a page of history exists, of every kind the seeding writes
    assert figures["seeded"]["records"] == read_path.HISTORY_SLOTS > read_path.PAGE_LIMIT
    assert set(figures["seeded"]["by_status"]) == {"SUCCEEDED", "FAILED", "MISSED"}
    # AND every GET latest sent exactly one request, a BatchGetItem of the result's LATEST item and its freshness' lock
    # and newest slot items (issue 35), and served the seeded rows
    latest = figures["latest"]
    assert latest["requests"] == {
        "calls": 3,
        "requests_min": 1,
        "requests_max": 1,
        "by_operation": {"BatchGetItem": 1},
        "by_operation_variants": ['{"BatchGetItem": 1}'],
    }
    assert (latest["status"], latest["resolver"]["n"], latest["bare_getitem"]["n"]) == (200, 3, 3)
    assert latest["p50_ratio"] is not None and latest["limit"] == 1.3
    # AND a history page of 50 is one Query (no Scan), 50 entries and a token; the next page holds the rest
    history = figures["history"]
    assert history["first_page"]["entries"] == 50 and history["first_page"]["next_token"]
    assert history["first_page"]["requests"]["by_operation"] == {"Query": 1}
    assert history["timed_pages_requests"]["by_operation"] == {"Query": 1}
    assert history["timed_pages_requests"]["calls"] == 2
    assert history["next_page"]["entries"] == read_path.HISTORY_SLOTS - 50
    assert not history["next_page"]["next_token"]
    assert history["next_page"]["requests"]["by_operation"] == {"Query": 1}
    # AND the breakdown covers every layer and piece
    assert len(figures["breakdown"]["layers_p50_us"]) == 4
    assert figures["breakdown"]["profile"]["self_time_share"]

    # AND the report judges the counts (whatever the timing) and prints the tables
    checks = report.read_checks("moto-atomic", figures)
    met = {check["target"]: check["met"] for check in checks}
    assert met[report.READ_TARGETS["latest_requests"]] is True
    assert met[report.READ_TARGETS["history_requests"]] is True
    assert met[report.READ_TARGETS["history_page"]] is True
    assert report.READ_TARGETS["latest_vs_getitem_p50"] in met
    assert "1: BatchGetItem per request" in report_tables.read_path_table(figures)
    assert "1: Query per page" in report_tables.read_path_table(figures)
    assert "GET latest cut at each layer" in report_tables.read_breakdown_table(figures)


def test_read_checks_fail_on_a_second_request_and_a_slow_resolver() -> None:
    # GIVEN figures where one GET latest sent two requests and the resolver's p50 is 1.5x the GetItem's
    requests = {"calls": 2, "requests_min": 1, "requests_max": 2, "by_operation": None}
    requests["by_operation_variants"] = ['{"GetItem": 1}', '{"GetItem": 1, "Query": 1}']
    page = {"calls": 1, "requests_min": 1, "requests_max": 1, "by_operation": {"Query": 1}}
    page["by_operation_variants"] = ['{"Query": 1}']
    figures = {
        "latest": {"requests": requests, "p50_ratio": 1.5, "limit": 1.3},
        "history": {
            "limit": 50,
            "first_page": {"entries": 50, "next_token": True, "requests": page},
            "timed_pages_requests": page,
        },
    }

    # WHEN they are judged
    checks = {check["target"]: check for check in report.read_checks("dynamodb-local", figures)}

    # THEN both misses are reported, with by how much
    assert not checks[report.READ_TARGETS["latest_requests"]]["met"]
    slow = checks[report.READ_TARGETS["latest_vs_getitem_p50"]]
    assert not slow["met"] and slow["missed_by"] == "0.20 (15% over)"
    assert checks[report.READ_TARGETS["history_requests"]]["met"]
