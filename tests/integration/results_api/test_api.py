"""``results_api.api``: every route and status of the read API, resolved in-process (payload format 2.0 events),
over the history the real writers wrote (conftest ``world``). Every JSON body is validated against the documented
models (``results_api.models``), and the served OpenAPI document is the committed ``docs/openapi.json``.

The API adds HTTP semantics over the reader, not DynamoDB behaviour (``test_reader.py`` runs both backends), so
this module runs on moto only. The real-HTTP 302 (a client following the presigned URL) belongs to the local
server's tests.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from pydantic import BaseModel

from athena_refresh.catalog import CatalogQuery, CatalogSchedule
from athena_refresh.engine import Column, QueryResult, QueryStatistics
from results_api import api, handler, models
from results_api.api import SLOT_COLUMNS, openapi_json
from results_api.responses import IMMUTABLE
from results_api.views import JOB_COLUMNS
from slotlock import Lease, Slot, SlotLock, request_generation

JOB = "flights-dashboard"
PAUSED_JOB = "carrier-on-time"
IDLE_JOB = "daily-ny"
S0, S1, S2, S3, S4 = (
    Slot.parse(f"2026-11-22T{hour:02d}:{minute:02d}:00Z")
    for hour, minute in (
        (0, 0),
        (0, 30),
        (1, 0),
        (1, 30),
        (2, 0),
    )
)
LATEST = f"/jobs/{JOB}/results/latest"
OPENAPI_DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"
CSV_TYPE = "text/csv; charset=utf-8; header=present"
OPERATOR = "arn:aws:iam::123456789012:user/operator"
MB = 1_000_000


def body_of(response: dict[str, Any], model: type[BaseModel], content_type: str = "application/json") -> Any:
    """The response's JSON body, checked against ``model`` and the Content-Type."""
    assert response["headers"]["Content-Type"] == content_type
    document = json.loads(response["body"])
    model.model_validate(document)
    return document


def problem_of(response: dict[str, Any], status: int, code: str, parameter: str | None = None) -> dict[str, Any]:
    """The response's RFC 9457 problem, checked: status, code, the parameter to blame, never cached."""
    assert response["statusCode"] == status, response["body"][:300]
    document: dict[str, Any] = body_of(response, models.Problem, "application/problem+json")
    assert (document["status"], document["code"], document.get("parameter")) == (status, code, parameter)
    assert response["headers"]["Cache-Control"] == "no-store"
    assert len(document["detail"]) < 400  # never an echo of a megabyte
    return document


def parse_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


# ---------------------------------------------------------------------------------------------------
# GET /jobs
# ---------------------------------------------------------------------------------------------------
def test_jobs_as_json(get: Callable[..., dict[str, Any]], world: Any, request_log: Any) -> None:
    request_log.clear()
    response = get("/jobs")
    # one BatchGetItem of the lock and LATEST items, one of the slot items the freshness reads
    assert response["statusCode"] == 200 and request_log.operations == ["BatchGetItem"] * 2
    assert response["headers"]["Cache-Control"] == "no-cache" and response["headers"]["Vary"] == "Accept"
    jobs = {job["job"]: job for job in body_of(response, models.Jobs)["jobs"]}
    # each job's freshness is what latest says (results_api.freshness), for a job without a result too
    latest = json.loads(get(f"/jobs/{JOB}/results/latest")["body"])
    assert jobs[JOB]["freshness"] == latest["freshness"] and jobs[JOB]["freshness"]["state"] == "on_time"
    assert (jobs["daily-ny"]["freshness"]["slot"], jobs["daily-ny"]["freshness"]["late"]) == (None, True)
    assert list(jobs) == sorted(world.catalog)
    assert jobs[JOB]["lease"] == {
        "state": "held",
        "owner_id": "racer-4",
        "slot": S4.iso,
        "fencing_token": 4,
        "expires_at_ms": world.held_lease.expires_at_ms,
    }
    assert jobs[JOB]["schedule"] == {"expression": "cron(0/30 * * * ? *)", "timezone": "UTC", "racers": 3}
    assert jobs[JOB]["latest"] == {
        "slot": S3.iso,
        "generation": 1,
        "fencing_token": 3,
        "committed_at_ms": world.committed_at_ms[(S3, 1)],
    }
    assert jobs[JOB]["last_success"] == {"slot": S3.iso, "at_ms": world.committed_at_ms[(S3, 1)]}
    assert (jobs[PAUSED_JOB]["paused"], jobs[PAUSED_JOB]["schedule"]) == (True, None)
    assert jobs["tampered"]["lease"]["state"] == "unknown" and "fencing_token" in jobs["tampered"]["problem"]


def test_jobs_as_csv(get: Callable[..., dict[str, Any]], world: Any) -> None:
    response = get("/jobs", headers={"Accept": "text/csv"})
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"] == CSV_TYPE
    assert response["headers"]["Cache-Control"] == "no-cache"
    header, *rows = parse_csv(response["body"])
    assert header == list(JOB_COLUMNS)
    by_job = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert list(by_job) == sorted(world.catalog)
    assert by_job[JOB] | {"schedule": ""} == {
        "job": JOB,
        "lease_state": "held",
        "paused": "false",
        "latest_slot": S3.iso,
        "latest_generation": "1",
        "latest_fencing_token": "3",
        "last_success_slot": S3.iso,
        "last_success_at_ms": str(world.committed_at_ms[(S3, 1)]),
        "schedule": "",
        "freshness_state": "on_time",
        "late": "false",
        "expected_next_slot": "2026-11-22T02:30:00Z",
    }
    assert json.loads(by_job[JOB]["schedule"]) == {"expression": "cron(0/30 * * * ? *)", "timezone": "UTC", "racers": 3}
    assert (by_job[PAUSED_JOB]["paused"], by_job[PAUSED_JOB]["schedule"]) == ("true", "")  # NULL: empty
    assert (by_job[IDLE_JOB]["latest_slot"], by_job["tampered"]["lease_state"]) == ("", "unknown")


# ---------------------------------------------------------------------------------------------------
# results: JSON, CSV, ETag, Cache-Control
# ---------------------------------------------------------------------------------------------------
def test_the_latest_result_as_json_is_one_batch_of_the_result_and_its_freshness(
    get: Callable[..., dict[str, Any]], world: Any, request_log: Any
) -> None:
    # Issue 35: latest also says how fresh it is; the LATEST item, the lock item and the newest slot items are read
    # in one BatchGetItem across the two tables, each strongly consistent (the LATEST item as its GetItem was)
    request_log.clear()
    response = get(LATEST)
    assert response["statusCode"] == 200 and request_log.operations == ["BatchGetItem"]
    [batch] = request_log.requests("BatchGetItem")
    results, locks = batch["RequestItems"][world.results_table], batch["RequestItems"][world.lock_table]
    assert results == {"Keys": [{"job": {"S": JOB}, "slot": {"S": "LATEST"}}], "ConsistentRead": True}
    assert locks["ConsistentRead"] is True and locks["Keys"][0] == {"pk": {"S": f"lock#{JOB}"}}
    assert {key["pk"]["S"].split("#")[0] for key in locks["Keys"][1:]} == {"slot"} and len(locks["Keys"]) == 5
    result = body_of(response, models.Result)
    assert result == {
        "freshness": {
            "slot": S3.iso,
            "committed_at_ms": world.committed_at_ms[(S3, 1)],
            "expected_next_slot": "2026-11-22T02:30:00Z",  # the clock is 5 s into S4's lease
            "late": False,
            "state": "on_time",
            "due_slot": S2.iso,  # S3's grace (one period + 300 s: a catalog without freshness_s) is not over yet
            "reason": "the latest slot due has finished",
        },
        "job": JOB,
        "slot": S3.iso,
        "generation": 1,
        "fencing_token": 3,
        "query_execution_id": "qe-s3",
        "committed_at_ms": world.committed_at_ms[(S3, 1)],
        "window": {"start": "2013-11-21T00:00:00", "end": "2013-11-22T00:00:00"},
        "statistics": {
            "data_scanned_bytes": 7_340_032,
            "engine_execution_time_ms": 850,
            "query_queue_time_ms": 40,
            "total_execution_time_ms": 910,
        },
        "row_count": 3,
        "estimated_cost_usd": world.latest_cost["estimated_cost_usd"],
        "cost": world.latest_cost,
        "columns": world.latest_columns,
        "rows": world.latest_rows,
        "assertions_failed": None,  # a published result: no assertion broken
    }
    assert result["cost"]["estimate"] is True and result["cost"]["usage"]["athena_billed_bytes"] == 10 * 2**20
    # typed: integers stay integers, NULL is null, nested values stay nested
    assert result["rows"][0]["flights"] == 3 and isinstance(result["rows"][0]["flights"], int)
    assert result["rows"][1]["avg_delay"] is None and result["rows"][0]["detail"] == {"a": [1, 2], "b": []}
    headers = response["headers"]
    assert (headers["X-Job"], headers["X-Slot"], headers["X-Generation"]) == (JOB, S3.iso, "1")
    assert (headers["X-Fencing-Token"], headers["X-Query-Execution-Id"]) == ("3", "qe-s3")
    assert headers["Vary"] == "Accept" and headers["ETag"].startswith('"')
    # revalidated before every reuse: an operator's run may commit a new generation at any time
    assert headers["Cache-Control"] == "no-cache"
    assert (headers["X-Late"], headers["X-Freshness-State"]) == ("false", "on_time")
    assert (headers["X-Expected-Next-Slot"], headers["X-Committed-At"]) == (
        "2026-11-22T02:30:00Z",
        dt.datetime.fromtimestamp(world.committed_at_ms[(S3, 1)] // 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def test_latest_turns_late_and_its_etag_changes_so_a_revalidation_never_keeps_late_false(
    get: Callable[..., dict[str, Any]], world: Any, clock: Any
) -> None:
    # GIVEN latest on time, and its ETag
    etag = get(LATEST)["headers"]["ETag"]
    # WHEN the clock passes S4's grace (S4 still unfinished: its holder never commits)
    saved = clock.now
    clock.now = S4.epoch_ms + 2_100_000
    try:
        again = get(LATEST, headers={"If-None-Match": etag})
        as_csv = get(LATEST, headers={"Accept": "text/csv"})
    finally:
        clock.now = saved
    # THEN a full 200 (not a 304 keeping the old body), late, with a new ETag; CSV stays rows only, late on a header
    assert again["statusCode"] == 200 and again["headers"]["ETag"] != etag
    freshness = json.loads(again["body"])["freshness"]
    assert (freshness["late"], freshness["state"], freshness["due_slot"]) == (True, "late", S4.iso)
    assert again["headers"]["X-Late"] == "true" and as_csv["headers"]["X-Late"] == "true"
    assert "freshness" not in as_csv["body"] and "late" not in as_csv["body"].splitlines()[0]


def test_a_slots_result_carries_no_freshness(get: Callable[..., dict[str, Any]], world: Any) -> None:
    for query in ("", "generation=1"):
        response = get(f"/jobs/{JOB}/results/{S3.iso}", query)
        assert response["statusCode"] == 200 and "freshness" not in json.loads(response["body"]), query
        assert "X-Late" not in response["headers"], query


def test_the_latest_result_as_csv(get: Callable[..., dict[str, Any]], world: Any) -> None:
    response = get(LATEST, headers={"accept": "text/csv;q=0.9, application/json;q=0.1"})
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"] == CSV_TYPE
    assert response["headers"]["Cache-Control"] == "no-cache"
    assert response["headers"]["X-Slot"] == S3.iso
    assert parse_csv(response["body"]) == [
        ["origin", "flights", "avg_delay", "note", "on_time", "detail"],
        ["<script>alert(1)</script>", "3", "1.5", 'say "hi", then\r\nleave', "true", '{"a":[1,2],"b":[]}'],
        ["Zürich ✈ 東京", "0", "", "a,b;c", "false", ""],
        ["JFK", "-2", "0.1", "' & <b>", "", '[1,"x"]'],
    ]
    # a representation of its own: another ETag than the JSON's
    assert response["headers"]["ETag"] != get(LATEST)["headers"]["ETag"]


def test_an_etag_that_matches_is_answered_304_with_no_body(get: Callable[..., dict[str, Any]], world: Any) -> None:
    # GIVEN the latest result's ETag
    first = get(LATEST)
    etag = first["headers"]["ETag"]
    # WHEN it is sent back, exactly, weak, in a list, or as * THEN 304, no body, the same tag and caching
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = get(LATEST, headers={"If-None-Match": header})
        assert response["statusCode"] == 304 and response["body"] == ""
        assert response["headers"]["ETag"] == etag and response["headers"]["Cache-Control"] == "no-cache"
        assert response["headers"]["X-Slot"] == S3.iso and response["headers"]["Vary"] == "Accept"
    # WHEN another tag is sent, or the JSON tag with a CSV request THEN the whole answer
    assert get(LATEST, headers={"If-None-Match": '"other"'})["statusCode"] == 200
    assert get(LATEST, headers={"If-None-Match": etag, "Accept": "text/csv"})["statusCode"] == 200
    # AND a slot's result has the latest's tag when it is the same result
    # (issue 35: latest's tag also covers its freshness, so the slot's result, without it, has a tag of its own)
    slot_response = get(f"/jobs/{JOB}/results/{S3.iso}", headers={"If-None-Match": etag})
    assert slot_response["statusCode"] == 200 and slot_response["headers"]["ETag"] != etag
    again = get(f"/jobs/{JOB}/results/{S3.iso}", headers={"If-None-Match": slot_response["headers"]["ETag"]})
    assert again["statusCode"] == 304


def reusable_unchecked_s(cache_control: str) -> float:
    """How long a cache may reuse an answer with ``cache_control`` without asking the origin (RFC 9111 §4.2,
    §5.2.2): 0 with ``no-cache``/``no-store``, else the ``max-age`` (``s-maxage`` for shared caches), plus any
    ``stale-while-revalidate``/``stale-if-error`` allowance; unbounded with ``immutable`` and no max-age."""
    directives = {}
    for part in cache_control.split(","):
        name, _, value = part.strip().partition("=")
        directives[name.strip().lower()] = value.strip().strip('"')
    if "no-cache" in directives or "no-store" in directives:
        return 0.0
    ages = [float(directives[name]) for name in ("max-age", "s-maxage") if directives.get(name)]
    if not ages:
        return 0.0 if "immutable" not in directives else float("inf")
    stale = [float(directives[name]) for name in ("stale-while-revalidate", "stale-if-error") if directives.get(name)]
    return max(ages) + max(stale, default=0.0)


def test_what_a_commit_can_change_is_revalidated_and_a_named_generation_is_immutable(
    make_app: Callable[..., Any], make_reader: Callable[..., Any], event: Callable[..., Any], world: Any, catalog: Any
) -> None:
    # WHEN the latest result, or a slot's without a generation, is read THEN every reuse is revalidated: no-cache,
    # whatever the schedule (half-hourly, daily in New York, none): an operator's run is not on the schedule
    daily = {
        **catalog,
        JOB: CatalogQuery("SELECT 1 AS a", (), schedule=CatalogSchedule("cron(0 6 * * ? *)", "America/New_York")),
    }
    unscheduled = {**catalog, JOB: CatalogQuery("SELECT 1 AS a", ())}
    for app in (make_app(), make_app(over=make_reader(catalog=daily)), make_app(over=make_reader(catalog=unscheduled))):
        for path in (LATEST, f"/jobs/{JOB}/results/{S3.iso}"):
            response = app.resolve(event(path), None)
            assert response["statusCode"] == 200 and response["headers"]["Cache-Control"] == "no-cache", path
            assert reusable_unchecked_s(response["headers"]["Cache-Control"]) == 0
    # WHEN a generation is named THEN the answer never changes: immutable
    app = make_app()
    for generation in (1, 2):
        slot = S3 if generation == 1 else S0
        response = app.resolve(event(f"/jobs/{JOB}/results/{slot.iso}", f"generation={generation}"), None)
        assert response["statusCode"] == 200 and response["headers"]["Cache-Control"] == IMMUTABLE
    assert IMMUTABLE == "public, max-age=31536000, immutable"


def test_a_manual_generation_committed_after_a_response_is_never_hidden_by_its_caching(
    get: Callable[..., dict[str, Any]],
    world: Any,
    make_lock: Callable[[str], SlotLock],
    make_store: Callable[..., Any],
    clock: Any,
) -> None:
    # GIVEN a client (or proxy) holding the latest result (S3, generation 1) and the slot's, with their ETags
    path_of_slot = f"/jobs/{JOB}/results/{S3.iso}"
    held = {path: get(path) for path in (LATEST, path_of_slot)}
    for response in held.values():
        assert response["statusCode"] == 200 and response["headers"]["X-Generation"] == "1"

    # WHEN an operator re-runs S3 a minute later (tools.ops rerun: requested, then run under the manual lease)
    # and its generation 2 commits, well before the next scheduled firing
    clock.advance(s=60)
    live = make_lock(JOB)
    request_generation(live.context, S3, run_id="op-9", kind="rerun", requested_by=OPERATOR, reason="late data")
    manual = live.for_generation(2)
    lease = manual.try_acquire(S3, "manual-9")
    assert isinstance(lease, Lease), lease
    store = make_store()
    prepared = store.prepare(
        job_name=JOB,
        slot_iso=S3.iso,
        fencing_token=lease.fencing_token,
        query_execution_id="qe-s3-g2",
        statistics=QueryStatistics(data_scanned_bytes=1),
        result=QueryResult(columns=(Column("origin", "varchar"),), rows=[{"origin": "re-run"}]),
        committed_at_ms=clock.now,
        window=("2013-11-21T00:00:00", "2013-11-22T00:00:00"),
        generation=2,
        move_latest=store.latest_order(JOB, S3.iso, 2) < 0,
    )
    manual.commit(lease, writes=prepared.writes, summary=prepared.summary)

    for path, first in held.items():
        # THEN the first answer allowed no reuse without revalidation (the documented bound: 0 s) ...
        assert reusable_unchecked_s(first["headers"]["Cache-Control"]) == 0, first["headers"]["Cache-Control"]
        # ... and revalidating with its ETag is a 200 with generation 2, never a 304
        again = get(path, headers={"If-None-Match": first["headers"]["ETag"]})
        assert again["statusCode"] == 200, path
        assert again["headers"]["X-Generation"] == "2" and again["headers"]["ETag"] != first["headers"]["ETag"]
        document = body_of(again, models.Result)
        assert (document["slot"], document["generation"], document["rows"]) == (S3.iso, 2, [{"origin": "re-run"}])
    # AND generation 1, named, is still the same answer: its ETag still matches (it never changes)
    # (the slot's tag: latest's also covers its freshness since issue 35)
    named = get(path_of_slot, "generation=1", headers={"If-None-Match": held[path_of_slot]["headers"]["ETag"]})
    assert named["statusCode"] == 304 and named["headers"]["Cache-Control"] == IMMUTABLE


def test_a_slot_in_the_path_may_be_percent_encoded_or_in_another_offset(
    get: Callable[..., dict[str, Any]], world: Any
) -> None:
    # GIVEN the latest result (S3, 01:30Z)
    latest = get(LATEST)
    # WHEN S3 is asked for by a client that percent-encodes the slot (the HTTP API delivers the path decoded),
    # or names it in another offset or with seconds THEN it is the same result
    for text in (
        S3.iso,
        "2026-11-22T01%3A30%3A00Z",
        "2026-11-22T02%3A30%3A00%2B01%3A00",
        "2026-11-22T02:30:00+01:00",
        "2026-11-22T01:30:42.5Z",
    ):
        response = get(f"/jobs/{JOB}/results/{text}")
        assert response["statusCode"] == 200, text
        # the same result; latest also says its freshness (issue 35), a slot's result does not
        assert json.loads(response["body"]) == {k: v for k, v in json.loads(latest["body"]).items() if k != "freshness"}
    # and the job name too
    assert get("/jobs/flights%2Ddashboard/results/latest")["statusCode"] == 200
    # BUT a path is not decoded twice: a client that encoded its '%' asked for a slot named with '%3A'
    problem_of(get(f"/jobs/{JOB}/results/2026-11-22T01%253A30%253A00Z"), 400, "bad_parameter", "slot")


def test_a_slot_is_its_newest_generation_unless_one_is_asked_for(
    get: Callable[..., dict[str, Any]], world: Any
) -> None:
    newest = body_of(get(f"/jobs/{JOB}/results/{S0.iso}"), models.Result)
    assert (newest["generation"], newest["fencing_token"], newest["rows"]) == (
        2,
        world.tokens[(S0, 2)],
        [{"origin": "EWR", "flights": 321}, {"origin": "LGA", "flights": 278}],
    )
    second = body_of(get(f"/jobs/{JOB}/results/{S0.iso}", "generation=2"), models.Result)
    assert second == newest


# ---------------------------------------------------------------------------------------------------
# offloaded rows: 302 to S3
# ---------------------------------------------------------------------------------------------------
def s3_target(location: str) -> tuple[str, str]:
    """Bucket and key of a presigned S3 URL (virtual-hosted or path style)."""
    url = urllib.parse.urlsplit(location)
    path = urllib.parse.unquote(url.path).lstrip("/")
    if url.hostname and url.hostname.endswith(".s3.amazonaws.com") and url.hostname != "s3.amazonaws.com":
        return url.hostname.removesuffix(".s3.amazonaws.com"), path
    bucket, _, key = path.partition("/")
    return bucket, key


def test_offloaded_rows_are_a_302_to_a_presigned_url_of_the_rows(
    get: Callable[..., dict[str, Any]], world: Any, s3: Any, request_log: Any, reader: Any
) -> None:
    for path, query, rows, token in (
        (f"/jobs/{JOB}/results/{S0.iso}", "generation=1", world.offloaded_rows, world.tokens[(S0, 1)]),
        (f"/jobs/{PAUSED_JOB}/results/latest", "", world.paused_rows, 1),
    ):
        # WHEN a result whose rows live in S3 is asked for as JSON (CSV: the next test)
        for accept in ("application/json", "*/*"):
            request_log.clear()
            response = get(path, query, {"Accept": accept})
            # THEN a redirect, never cached, with the result's metadata on headers and no body
            assert response["statusCode"] == 302 and response["body"] == ""
            headers = response["headers"]
            assert headers["Cache-Control"] == "no-store" and headers["ETag"].startswith('"')
            assert (headers["X-Slot"], headers["X-Generation"], headers["X-Fencing-Token"]) == (S0.iso, "1", str(token))
            # S3 is not read: the client fetches the rows (latest, of a job without a schedule: its LATEST item
            # alone, in the one BatchGetItem latest sends)
            latest = path.endswith("/latest")
            assert request_log.operations == ["BatchGetItem" if latest else "GetItem"]
            # AND Location is a presigned GetObject of the rows' object, which holds the rows as a JSON array
            bucket, key = s3_target(headers["Location"])
            assert bucket == "read-results-overflow"
            assert key == f"results/{path.split('/')[2]}/{S0.iso}/token-{token}.json"
            query_names = set(urllib.parse.parse_qs(urllib.parse.urlsplit(headers["Location"]).query))
            assert query_names & {"Signature", "X-Amz-Signature"}
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert json.loads(body) == rows
            # (the very object the result item names, checksum and all)
            stored = reader.result(path.split("/")[2], S0.iso, 1)
            assert stored.rows_s3_uri == f"s3://{bucket}/{key}"
            assert stored.rows_sha256 == hashlib.sha256(body).hexdigest() and stored.rows_bytes == len(body)
    # AND the redirect has its own ETag, which a client may send back
    redirect = get(f"/jobs/{PAUSED_JOB}/results/latest")
    again = get(f"/jobs/{PAUSED_JOB}/results/latest", headers={"If-None-Match": redirect["headers"]["ETag"]})
    assert again["statusCode"] == 304 and "Location" not in again["headers"] and again["body"] == ""


def test_offloaded_rows_asked_as_csv_are_answered_as_csv(
    get: Callable[..., dict[str, Any]], world: Any, request_log: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: after the 302, a CSV request got the JSON rows (the S3 object is JSON)."""
    # WHEN an offloaded result is asked for as CSV
    request_log.clear()
    response = get(f"/jobs/{PAUSED_JOB}/results/latest", headers={"Accept": "text/csv"})
    # THEN the CSV itself, its rows read from S3 here (the item, then the object), with the result's own ETag
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"].startswith("text/csv")
    assert request_log.operations == ["BatchGetItem"]  # DynamoDB's; the S3 GetObject is not on this log
    table = parse_csv(response["body"])
    assert table[0] == list(world.paused_rows[0]) and len(table) == len(world.paused_rows) + 1
    assert table[1] == [str(value) for value in world.paused_rows[0].values()]
    json_etag = get(f"/jobs/{PAUSED_JOB}/results/latest")["headers"]["ETag"]
    assert response["headers"]["ETag"] != json_etag
    again = get(f"/jobs/{PAUSED_JOB}/results/latest", headers={"Accept": "text/csv", "If-None-Match": json_etag})
    assert again["statusCode"] == 200  # the redirect's ETag is not the CSV's
    # AND a CSV above what a Lambda response can carry is a 406 naming the size and the way out (JSON)
    monkeypatch.setattr(api, "MAX_CSV_BODY_BYTES", 100)
    refused = get(f"/jobs/{PAUSED_JOB}/results/latest", headers={"Accept": "text/csv"})
    assert refused["statusCode"] == 406
    detail = json.loads(refused["body"])["detail"]
    assert "above the 100 a response can carry" in detail and "ask for JSON" in detail


# ---------------------------------------------------------------------------------------------------
# GET /jobs/{job}/slots
# ---------------------------------------------------------------------------------------------------
def test_slots_page_through_next_token(get: Callable[..., dict[str, Any]], world: Any, request_log: Any) -> None:
    request_log.clear()
    seen: list[tuple[str, int, str]] = []
    token = None
    for _ in range(10):
        query = "limit=2" + (f"&next_token={urllib.parse.quote(token)}" if token else "")
        response = get(f"/jobs/{JOB}/slots", query)
        assert response["statusCode"] == 200 and response["headers"]["Cache-Control"] == "no-cache"
        page = body_of(response, models.SlotsPage)
        assert (page["job"], page["limit"], page["filters"]) == (JOB, 2, {"from": None, "to": None, "status": None})
        assert len(page["slots"]) <= 2
        seen += [(entry["slot"], entry["generation"], entry["status"]) for entry in page["slots"]]
        token = page["next_token"]
        if token is None:
            break
    assert sorted(seen, reverse=True) == [(slot.iso, generation, status) for slot, generation, status in world.history]
    assert set(request_log.operations) == {"Query"}


def test_slots_with_bounds_and_a_status(get: Callable[..., dict[str, Any]], world: Any) -> None:
    page = body_of(
        get(f"/jobs/{JOB}/slots", f"from={urllib.parse.quote('2026-11-22T01:30:00+01:00')}&to={S2.iso}"),
        models.SlotsPage,
    )
    assert [(e["slot"], e["generation"], e["status"]) for e in page["slots"]] == [
        (S2.iso, 1, "MISSED"),
        (S1.iso, 2, "REQUESTED"),
        (S1.iso, 1, "FAILED"),
    ]
    assert page["filters"] == {"from": S1.iso, "to": S2.iso, "status": None}
    failed = body_of(get(f"/jobs/{JOB}/slots", "status=FAILED"), models.SlotsPage)
    assert [(e["slot"], e["status"], e["error"]) for e in failed["slots"]] == [
        (S1.iso, "FAILED", {"type": "QueryFailed"})
    ]


def test_slots_as_csv_carry_the_next_token_in_a_header(get: Callable[..., dict[str, Any]], world: Any) -> None:
    first = get(f"/jobs/{JOB}/slots", "limit=3", {"Accept": "text/csv"})
    assert first["statusCode"] == 200 and first["headers"]["Content-Type"] == CSV_TYPE
    header, *rows = parse_csv(first["body"])
    assert header == list(SLOT_COLUMNS) and len(rows) == 3
    as_dicts = [dict(zip(header, row, strict=True)) for row in rows]
    assert [(row["slot"], row["generation"], row["status"]) for row in as_dicts] == [
        (S4.iso, "1", "RUNNING"),
        (S3.iso, "1", "SUCCEEDED"),
        (S2.iso, "1", "MISSED"),
    ]
    assert json.loads(as_dicts[2]["error"])["holder_slot"] == S3.iso and as_dicts[2]["reason"] == "superseded"
    token = first["headers"]["X-Next-Token"]
    rest = get(f"/jobs/{JOB}/slots", f"limit=10&next_token={token}", {"Accept": "text/csv"})
    assert len(parse_csv(rest["body"])) == 1 + 4 and "X-Next-Token" not in rest["headers"]


# ---------------------------------------------------------------------------------------------------
# errors: 400, 404, 406, 503 (never 500)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "query", "parameter"),
    [
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=0", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=-1", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=x", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=1.5", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", f"generation={10**7}", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=1000001", "generation"),
        (f"/jobs/{JOB}/results/{S3.iso}", "generation=" + "1" * MB, "generation"),
        (f"/jobs/{JOB}/results/bad-slot", "", "slot"),
        (f"/jobs/{JOB}/results/2026-11-22T01:30:00", "", "slot"),
        (f"/jobs/{JOB}/results/2200-01-01T00:00:00Z", "", "slot"),
        (f"/jobs/{JOB}/results/%00", "", "slot"),
        (f"/jobs/{JOB}/results/2026-11-22T01:30:00Z%00", "", "slot"),
        (f"/jobs/{JOB}/results/" + "9" * MB, "", "slot"),
        ("/jobs/" + "j" * MB + "/results/latest", "", "job"),
        ("/jobs/j%00/results/latest", "", "job"),
        ("/jobs/j%C3%B6b/results/latest", "", "job"),
        ("/jobs/j%0Ab/slots", "", "job"),
        ("/jobs/" + "j" * 65 + "/slots", "", "job"),
        (f"/jobs/{JOB}/slots", "limit=0", "limit"),
        (f"/jobs/{JOB}/slots", "limit=1001", "limit"),
        (f"/jobs/{JOB}/slots", "limit=x", "limit"),
        (f"/jobs/{JOB}/slots", "limit=" + "1" * MB, "limit"),
        (f"/jobs/{JOB}/slots", "from=garbage", "from"),
        (f"/jobs/{JOB}/slots", "from=%00", "from"),
        (f"/jobs/{JOB}/slots", "from=" + "x" * MB, "from"),
        (f"/jobs/{JOB}/slots", "to=2026-11-22", "to"),
        (f"/jobs/{JOB}/slots", "to=" + "x" * MB, "to"),
        (f"/jobs/{JOB}/slots", f"from={S3.iso}&to={S1.iso}", "from"),
        (f"/jobs/{JOB}/slots", "status=DONE", "status"),
        (f"/jobs/{JOB}/slots", "status=%00", "status"),
        (f"/jobs/{JOB}/slots", "status=" + "S" * MB, "status"),
        (f"/jobs/{JOB}/slots", "next_token=abc", "next_token"),
        (f"/jobs/{JOB}/slots", "next_token=%00", "next_token"),
        (f"/jobs/{JOB}/slots", "next_token=" + "A" * MB, "next_token"),
    ],
    ids=lambda value: value[:40] + (f"...[{len(value)}]" if len(value) > 40 else ""),
)
def test_a_bad_parameter_is_a_400_naming_it_before_any_request(
    offline_get: Callable[..., dict[str, Any]], offline_requests: Any, path: str, query: str, parameter: str
) -> None:
    problem_of(offline_get(path, query), 400, "bad_parameter", parameter)
    assert offline_requests.operations == []


def test_a_long_accept_header_is_a_400_and_an_unacceptable_one_a_406(
    get: Callable[..., dict[str, Any]], world: Any
) -> None:
    for path in ("/jobs", LATEST, f"/jobs/{JOB}/results/{S3.iso}", f"/jobs/{JOB}/slots"):
        problem_of(get(path, headers={"Accept": "text/csv, " * 500}), 400, "bad_parameter", "Accept")
        document = problem_of(get(path, headers={"Accept": "image/png"}), 406, "not_acceptable")
        assert "image/png" in document["detail"]


def test_unknown_jobs_slots_generations_and_routes_are_404(get: Callable[..., dict[str, Any]], world: Any) -> None:
    for path in ("/jobs/no-such-job/results/latest", f"/jobs/no-such-job/results/{S3.iso}", "/jobs/no-such-job/slots"):
        document = problem_of(get(path), 404, "unknown_job")
        assert (
            document["detail"] == "no job 'no-such-job'; jobs: carrier-on-time, daily-ny, flights-dashboard, tampered"
        )
    # no committed result: named by job, slot and generation
    document = problem_of(get(f"/jobs/{JOB}/results/{S0.iso}", "generation=3"), 404, "no_result")
    assert document["detail"] == f"job '{JOB}' has no committed result for slot {S0.iso} generation 3"
    document = problem_of(get(f"/jobs/{JOB}/results/{S1.iso}"), 404, "no_result")
    assert document["detail"] == f"job '{JOB}' has no committed result for slot {S1.iso}"
    document = problem_of(get(f"/jobs/{IDLE_JOB}/results/latest"), 404, "no_result")
    assert document["detail"] == f"job '{IDLE_JOB}' has no committed result yet"
    # no such route (a job segment with a character no route accepts, such as '#', names no route either)
    for path in (
        "/",
        "/x",
        f"/jobs/{JOB}",
        f"/jobs/{JOB}/results",
        f"{LATEST}/more",
        "/jobs/",
        "/openapi",
        "/jobs/bad%23job/results/latest",
    ):
        document = problem_of(get(path), 404, "no_route")
        assert "see /openapi.json" in document["detail"]
    assert len(problem_of(get("/" + "x" * MB), 404, "no_route")["detail"]) < 200


def test_an_unknown_query_parameter_is_ignored(get: Callable[..., dict[str, Any]], world: Any) -> None:
    response = get(f"/jobs/{JOB}/slots", "colour=" + "x" * MB)
    assert response["statusCode"] == 200 and len(body_of(response, models.SlotsPage)["slots"]) == 7


@pytest.fixture
def refused_connections(ddb: Any) -> Iterator[None]:
    """Every DynamoDB call fails to connect (as after botocore's retries)."""

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    ddb.meta.events.register("before-call.dynamodb", refuse)
    yield
    ddb.meta.events.unregister("before-call.dynamodb", refuse)


ROUTES = [
    "/jobs",
    LATEST,
    f"/jobs/{JOB}/results/{S3.iso}",
    f"/jobs/{JOB}/results/{S3.iso}?generation=1",
    f"/jobs/{JOB}/slots",
]


def resolve_each(get: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    responses = []
    for route in ROUTES:
        path, _, query = route.partition("?")
        responses.append(get(path, query))
    return responses


def test_deleted_tables_are_a_503_never_a_500(get: Callable[..., dict[str, Any]], world: Any, ddb: Any) -> None:
    ddb.delete_table(TableName=world.results_table)
    ddb.delete_table(TableName=world.lock_table)
    for response in resolve_each(get):
        document = problem_of(response, 503, "backend_unavailable")
        assert "ResourceNotFoundException" in document["detail"] or "not found" in document["detail"].lower()


def test_a_connection_failure_is_a_503(
    get: Callable[..., dict[str, Any]], world: Any, refused_connections: None
) -> None:
    for response in resolve_each(get):
        assert "Could not connect" in problem_of(response, 503, "backend_unavailable")["detail"]


def test_a_tampered_latest_item_is_a_503(get: Callable[..., dict[str, Any]], world: Any, ddb: Any) -> None:
    ddb.update_item(
        TableName=world.results_table,
        Key={"job": {"S": JOB}, "slot": {"S": "LATEST"}},
        UpdateExpression="SET columns_json = :bad",
        ExpressionAttributeValues={":bad": {"S": "{not json"}},
    )
    problem_of(get(LATEST), 503, "backend_unavailable")


def test_lock_table_items_of_a_newer_layout_are_named_never_a_500(
    get: Callable[..., dict[str, Any]], world: Any, ddb: Any
) -> None:
    # GIVEN a newer slotlock rewrote the job's live lock item and one of its history items (schema_version 2)
    for key in (f"lock#{JOB}", f"slot#{JOB}#{S3.iso}"):
        ddb.update_item(
            TableName=world.lock_table,
            Key={"pk": {"S": key}},
            UpdateExpression="SET schema_version = :v",
            ExpressionAttributeValues={":v": {"N": "2"}},
        )

    # WHEN the job list and the job's history are read
    jobs = {job["job"]: job for job in body_of(get("/jobs"), models.Jobs)["jobs"]}
    history = get(f"/jobs/{JOB}/slots")

    # THEN the job's lease is "unknown" with the reason (the other jobs are listed as usual), and the history is a
    # documented 503 naming the item and the versions (the stored item is not decoded by guesswork)
    assert jobs[JOB]["lease"]["state"] == "unknown"
    assert f"lock item 'lock#{JOB}' has table layout schema_version=2" in jobs[JOB]["problem"]
    assert jobs[PAUSED_JOB]["lease"]["state"] == "free"
    detail = problem_of(history, 503, "backend_unavailable")["detail"]
    assert f"slot#{JOB}#{S3.iso}" in detail and "schema_version=2" in detail and "reads and writes layout 1" in detail


def test_a_missing_s3_object_does_not_break_the_redirect(
    get: Callable[..., dict[str, Any]], world: Any, s3: Any
) -> None:
    # (presigning is local: the API answers the redirect; the client's GET of the URL is what fails)
    response = get(f"/jobs/{PAUSED_JOB}/results/latest")
    bucket, key = s3_target(response["headers"]["Location"])
    s3.delete_object(Bucket=bucket, Key=key)
    assert get(f"/jobs/{PAUSED_JOB}/results/latest")["statusCode"] == 302


# ---------------------------------------------------------------------------------------------------
# the OpenAPI document
# ---------------------------------------------------------------------------------------------------
def test_the_served_openapi_document_is_the_committed_one(get: Callable[..., dict[str, Any]], make_app: Any) -> None:
    response = get("/openapi.json")
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"] == "application/json"
    committed = OPENAPI_DOCUMENT.read_bytes()
    assert response["body"].encode() == committed, "docs/openapi.json is stale: regenerate it with openapi_json"
    assert openapi_json(make_app()).encode() == committed


def test_every_documented_path_is_a_real_route(get: Callable[..., dict[str, Any]], world: Any) -> None:
    document = json.loads(OPENAPI_DOCUMENT.read_text(encoding="utf-8"))
    assert set(document["paths"]) == {
        "/jobs",
        "/jobs/{job}/results/latest",
        "/jobs/{job}/results/{slot}",
        "/jobs/{job}/slots",
    }
    for path, operations in document["paths"].items():
        assert set(operations) == {"get"}
        concrete = path.replace("{job}", JOB).replace("{slot}", S3.iso)
        response = get(concrete)
        assert response["statusCode"] == 200, path
        documented = set(operations["get"]["responses"])
        assert "200" in documented and {"400", "503"} <= documented and "422" not in documented
    # every route requires IAM (SigV4); 422 (Powertools' own validation answer) is not documented: it is a 400
    assert document["security"] == [{"sigv4": []}]
    assert document["components"]["securitySchemes"]["sigv4"]["x-amazon-apigateway-authtype"] == "awsSigv4"
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert {"Result", "Jobs", "SlotsPage", "Problem"} <= set(document["components"]["schemas"])


# ---------------------------------------------------------------------------------------------------
# the Lambda handlers, end to end (the reader built from the environment)
# ---------------------------------------------------------------------------------------------------
def test_the_api_handler_serves_events_end_to_end(
    deployed: None, event: Callable[..., Any], lambda_context: Any, world: Any, s3: Any
) -> None:
    # WHEN the Lambda handler gets API Gateway events
    jobs = handler.api_handler(event("/jobs"), lambda_context)
    latest = handler.api_handler(event(LATEST, headers={"accept": "text/csv"}), lambda_context)
    offloaded = handler.api_handler(event(f"/jobs/{PAUSED_JOB}/results/latest"), lambda_context)
    missing = handler.api_handler(event("/jobs/nope/results/latest"), lambda_context)

    # THEN it answers them with the reader it built from the environment (once per execution environment)
    assert jobs["statusCode"] == 200 and len(body_of(jobs, models.Jobs)["jobs"]) == 4
    assert latest["statusCode"] == 200 and parse_csv(latest["body"])[0][0] == "origin"
    assert missing["statusCode"] == 404
    assert handler._reader is not None and handler._app is not None
    # AND its own S3 client presigns with Signature Version 4 for 60 s
    assert offloaded["statusCode"] == 302
    location = urllib.parse.urlsplit(offloaded["headers"]["Location"])
    parameters = urllib.parse.parse_qs(location.query)
    assert parameters["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and parameters["X-Amz-Expires"] == ["60"]
    bucket, key = s3_target(offloaded["headers"]["Location"])
    assert json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())[0] == {"origin": "PJ000", "flights": 0}
