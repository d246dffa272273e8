"""local.emulators.duckdb_engine.quota: Athena's active-query quota and StartQueryExecution rate, across processes.

Every test drives time with a fake clock: nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import uuid
from pathlib import Path
from typing import Any

import pytest

from athena_refresh.errors import QueryEngineError
from local.emulators.duckdb_engine import DuckDBQueryEngine, EngineQuota, QuotaInterval, quota_report
from local.emulators.duckdb_engine.quota import QuotaGate, max_overlap

T0_MS = 1_700_000_000_000
SQL = "SELECT CAST(? AS INTEGER) AS n"
#: Room enough that the rate never interferes with the tests of the active-query quota.
NO_RATE_LIMIT = {"start_rate_per_s": 1000.0, "start_burst": 1000}


class FakeClock:
    def __init__(self, now_ms: int = T0_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def token(label: str = "t") -> str:
    return f"{label}-{uuid.uuid4().hex}"


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture()
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "engine-state"


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def make_engine(data_dir: Path, state_dir: Path, clock: FakeClock, **kwargs: Any) -> DuckDBQueryEngine:
    kwargs.setdefault("simulated_duration_ms", 60_000)
    return DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir, clock_ms=clock, **kwargs)


def start(engine: DuckDBQueryEngine, n: int = 1, client_request_token: str | None = None) -> str:
    return engine.start_query(sql=SQL, parameters=[str(n)], client_request_token=client_request_token or token())


# --------------------------------------------------------------------------------------------------
# EngineQuota
# --------------------------------------------------------------------------------------------------
def test_defaults_are_athenas() -> None:
    assert EngineQuota() == EngineQuota(active_queries=25, start_rate_per_s=20.0, start_burst=80)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"active_queries": 0}, "active_queries"),
        ({"active_queries": 2.5}, "active_queries"),
        ({"active_queries": True}, "active_queries"),
        ({"start_rate_per_s": 0}, "start_rate_per_s"),
        ({"start_rate_per_s": -1.0}, "start_rate_per_s"),
        ({"start_rate_per_s": float("inf")}, "start_rate_per_s"),
        ({"start_rate_per_s": float("nan")}, "start_rate_per_s"),
        ({"start_rate_per_s": "20"}, "start_rate_per_s"),
        ({"start_burst": 0}, "start_burst"),
        ({"start_burst": 1.0}, "start_burst"),
    ],
)
def test_invalid_quota_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        EngineQuota(**kwargs)


def test_without_a_quota_nothing_is_refused_or_recorded(data_dir: Path, state_dir: Path, clock: FakeClock) -> None:
    with make_engine(data_dir, state_dir, clock) as engine:
        ids = {start(engine, n) for n in range(30)}
    assert len(ids) == 30
    assert not (state_dir / "quota").exists()
    assert quota_report(state_dir).starts == 0


# --------------------------------------------------------------------------------------------------
# Active queries
# --------------------------------------------------------------------------------------------------
def test_the_26th_active_query_gets_too_many_requests(data_dir: Path, state_dir: Path, clock: FakeClock) -> None:
    # GIVEN Athena's default quota, and 25 queries started at one instant (QUEUED or RUNNING for a minute)
    with make_engine(data_dir, state_dir, clock, quota=EngineQuota()) as engine:
        ids = [start(engine, n) for n in range(25)]
        assert {engine.get_query(qid).state for qid in ids} == {"QUEUED"}

        # WHEN the 26th is started
        with pytest.raises(QueryEngineError) as refused:
            start(engine, 25)

    # THEN it is refused, retryably, before it ran; the 25 are all there
    assert refused.value.error_code == "TooManyRequestsException"
    assert refused.value.retryable is True
    assert refused.value.operation == "StartQueryExecution"
    assert "25 of 25 active queries" in str(refused.value)
    assert len(list((state_dir / "queries").glob("*.json"))) == 25
    report = quota_report(state_dir)
    assert (report.starts, report.too_many_requests, report.throttled) == (25, 1, 0)
    assert report.max_active_queries == 25
    assert [i.query_execution_id for i in report.intervals] == ids
    assert report.active_at(T0_MS) == 25 and report.active_at(T0_MS + 60_000) == 0


def test_queries_that_end_free_their_places(data_dir: Path, state_dir: Path, clock: FakeClock) -> None:
    quota = EngineQuota(active_queries=2, **NO_RATE_LIMIT)
    with make_engine(data_dir, state_dir, clock, quota=quota, simulated_duration_ms=10_000) as engine:
        first = start(engine, 1)
        clock.now_ms += 4_000
        start(engine, 2)  # active until T0 + 14 s

        # one millisecond before the first ends: still full
        clock.now_ms = T0_MS + 9_999
        with pytest.raises(QueryEngineError, match="TooManyRequestsException"):
            start(engine, 3)

        # at its end ([submitted, ends) is half-open), it no longer counts
        clock.now_ms = T0_MS + 10_000
        assert engine.get_query(first).state == "SUCCEEDED"
        third = start(engine, 3)
        with pytest.raises(QueryEngineError, match="TooManyRequestsException"):
            start(engine, 4)

        # the two others end (at T0 + 14 s and T0 + 20 s): two places
        clock.now_ms = T0_MS + 20_000
        assert engine.get_query(third).state == "SUCCEEDED"
        start(engine, 4)
        start(engine, 5)

    report = quota_report(state_dir)
    assert (report.starts, report.too_many_requests) == (5, 2)
    assert report.max_active_queries == 2


def test_reused_token_is_not_a_new_query_and_is_never_refused(
    data_dir: Path, state_dir: Path, clock: FakeClock
) -> None:
    # GIVEN a quota of one, taken by a query
    shared = token("retry")
    with make_engine(data_dir, state_dir, clock, quota=EngineQuota(active_queries=1, **NO_RATE_LIMIT)) as engine:
        query_execution_id = start(engine, 1, client_request_token=shared)

        # WHEN the same request is sent again (a retry), from this instance and from another one
        again = start(engine, 1, client_request_token=shared)
        with make_engine(data_dir, state_dir, clock, quota=EngineQuota(active_queries=1, **NO_RATE_LIMIT)) as other:
            from_other = start(other, 1, client_request_token=shared)

        # THEN the same query, not refused; another request with that token is still InvalidRequest
        assert again == from_other == query_execution_id
        with pytest.raises(QueryEngineError) as mismatch:
            start(engine, 2, client_request_token=shared)
        assert mismatch.value.error_code == "InvalidRequestException"
        with pytest.raises(QueryEngineError, match="TooManyRequestsException"):
            start(engine, 3)

    report = quota_report(state_dir)
    assert (report.starts, report.too_many_requests, report.max_active_queries) == (1, 1, 1)


def test_a_query_whose_caller_died_before_publishing_is_adopted_by_its_retry(
    data_dir: Path, state_dir: Path, clock: FakeClock
) -> None:
    # GIVEN a caller registered its query (the quota's last place) and died before running it
    quota = EngineQuota(active_queries=1, **NO_RATE_LIMIT)
    shared, orphan = token("killed"), str(uuid.uuid4())
    QuotaGate(state_dir, quota).admit(
        now_ms=T0_MS,
        client_request_token=shared,
        request_sha256=hashlib.sha256(json.dumps([SQL, ["1"]]).encode("utf-8")).hexdigest(),  # the engine's hash
        query_execution_id=orphan,
        duration_ms=30_000,
        published=lambda: None,
    )

    # WHEN its retry (same token, same request) arrives 5 s later
    clock.now_ms = T0_MS + 5_000
    with make_engine(data_dir, state_dir, clock, quota=quota) as retry:
        with pytest.raises(QueryEngineError) as mismatch:  # another request with that token is still refused
            start(retry, 2, client_request_token=shared)
        adopted = start(retry, 1, client_request_token=shared)
        execution = retry.get_query(adopted)

    # THEN it is the registered query, on its registered timeline; the quota did not refuse it or count it again
    assert mismatch.value.error_code == "InvalidRequestException"
    assert adopted == orphan
    assert execution.state == "RUNNING" and execution.statistics.total_execution_time_ms == 5_000
    report = quota_report(state_dir)
    assert report.starts == 1 and report.too_many_requests == 0
    assert report.intervals == (QuotaInterval(orphan, shared, T0_MS, T0_MS + 30_000),)


def test_a_lost_token_race_is_withdrawn_from_the_history(
    data_dir: Path, state_dir: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a winner already published the token (its query ended at once), unseen by a loser that is past its checks
    quota = EngineQuota(active_queries=5, **NO_RATE_LIMIT)
    shared = token("race")
    with make_engine(data_dir, state_dir, clock, quota=quota, simulated_duration_ms=0) as engine:
        winner = start(engine, 1, client_request_token=shared)
        loser = make_engine(data_dir, state_dir, clock, quota=quota, simulated_duration_ms=0)
        monkeypatch.setattr(loser, "_read_token", lambda _token: None)

        # WHEN the loser registers and runs its own query, then fails to publish the token
        same = start(loser, 1, client_request_token=shared)
        loser.close()

    # THEN it answers the winner's id, and its query is gone from the history and the counters
    assert same == winner
    assert [p.name for p in (state_dir / "queries").glob("*.json")] == [f"{winner}.json"]
    report = quota_report(state_dir)
    assert report.starts == 1
    assert [i.query_execution_id for i in report.intervals] == [winner]
    events = [json.loads(line)["event"] for line in (state_dir / "quota" / "history.jsonl").read_text().splitlines()]
    assert events == ["registered", "registered", "withdrawn"]


# --------------------------------------------------------------------------------------------------
# StartQueryExecution rate
# --------------------------------------------------------------------------------------------------
def test_token_bucket_allows_the_burst_then_throttles_until_refilled(
    data_dir: Path, state_dir: Path, clock: FakeClock
) -> None:
    # GIVEN 2 calls/s with a burst of 3, and queries that end at once (the active quota never binds)
    quota = EngineQuota(active_queries=100, start_rate_per_s=2.0, start_burst=3)
    with make_engine(data_dir, state_dir, clock, quota=quota, simulated_duration_ms=0) as engine:
        # WHEN 4 calls arrive at one instant: the burst passes, the 4th is throttled
        for n in range(3):
            start(engine, n)
        with pytest.raises(QueryEngineError) as throttled:
            start(engine, 3)
        assert throttled.value.error_code == "ThrottlingException"
        assert throttled.value.retryable is True
        assert "Rate exceeded" in str(throttled.value)

        # one token per 500 ms: not yet at 499 ms, then at 500 ms (from tenths of a token that add up)
        clock.now_ms = T0_MS + 499
        with pytest.raises(QueryEngineError, match="Rate exceeded"):
            start(engine, 3)
        clock.now_ms = T0_MS + 500
        start(engine, 3)
        with pytest.raises(QueryEngineError, match="Rate exceeded"):
            start(engine, 4)

        # a long pause refills to the burst, no more
        clock.now_ms = T0_MS + 3_600_000
        for n in range(3):
            start(engine, 10 + n)
        with pytest.raises(QueryEngineError, match="Rate exceeded"):
            start(engine, 13)

    report = quota_report(state_dir)
    assert (report.starts, report.throttled, report.too_many_requests) == (7, 4, 0)


def test_a_reused_token_is_still_a_call_within_the_rate(data_dir: Path, state_dir: Path, clock: FakeClock) -> None:
    # Athena rate-limits the API call before it looks at the request: a retry takes a token like any call
    shared = token("retry")
    quota = EngineQuota(active_queries=100, start_rate_per_s=1.0, start_burst=1)
    with make_engine(data_dir, state_dir, clock, quota=quota) as engine:
        first = start(engine, 1, client_request_token=shared)
        with pytest.raises(QueryEngineError, match="ThrottlingException"):
            start(engine, 1, client_request_token=shared)
        clock.now_ms += 1_000
        assert start(engine, 1, client_request_token=shared) == first
    assert quota_report(state_dir).starts == 1


# --------------------------------------------------------------------------------------------------
# Per-query durations
# --------------------------------------------------------------------------------------------------
def test_per_query_durations_set_each_querys_timeline(data_dir: Path, state_dir: Path, clock: FakeClock) -> None:
    # GIVEN a duration per query: parameter n -> n minutes (longer than a lock lease)
    def duration_ms_for(sql: str, parameters: tuple[str, ...] | list[str]) -> int:
        assert sql == SQL
        return int(parameters[0]) * 60_000

    quota = EngineQuota(active_queries=10, **NO_RATE_LIMIT)
    with make_engine(data_dir, state_dir, clock, duration_ms_for=duration_ms_for, quota=quota) as engine:
        ids = {n: start(engine, n) for n in (1, 5)}

        # THEN each is RUNNING until its own end, seen alike by an instance without the callable
        clock.now_ms = T0_MS + 60_000
        with make_engine(data_dir, state_dir, clock, simulated_duration_ms=0) as other:
            assert [other.get_query(ids[n]).state for n in (1, 5)] == ["SUCCEEDED", "RUNNING"]
        clock.now_ms = T0_MS + 5 * 60_000
        assert engine.get_query(ids[5]).state == "SUCCEEDED"
        assert engine.get_query(ids[5]).statistics.total_execution_time_ms >= 5 * 60_000

    assert {i.query_execution_id: i.ends_at_ms - i.submitted_at_ms for i in quota_report(state_dir).intervals} == {
        ids[1]: 60_000,
        ids[5]: 300_000,
    }


@pytest.mark.parametrize("bad", [-1, 1.5, True, None])
def test_a_bad_duration_is_a_value_error(data_dir: Path, state_dir: Path, clock: FakeClock, bad: Any) -> None:
    engine = make_engine(data_dir, state_dir, clock, duration_ms_for=lambda _sql, _params: bad)
    with engine, pytest.raises(ValueError, match="duration_ms_for"):
        start(engine)


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------
def intervals(*bounds: tuple[int, int]) -> list[QuotaInterval]:
    return [QuotaInterval(f"q{n}", f"t{n}", start_ms, end_ms) for n, (start_ms, end_ms) in enumerate(bounds)]


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ((), 0),
        (((0, 10),), 1),
        (((0, 10), (10, 20)), 1),  # touching half-open intervals never overlap
        (((10, 20), (0, 10), (20, 30)), 1),
        (((0, 10), (9, 20)), 2),
        (((0, 100), (10, 20), (15, 30), (20, 40)), 3),  # at 15..20: [0,100), [10,20), [15,30)
        (((0, 10), (0, 10), (0, 10)), 3),
        (((5, 5), (5, 5)), 0),  # empty intervals are never active
        (((0, 10), (10, 10), (10, 20)), 1),
    ],
)
def test_max_overlap_sweeps_half_open_intervals(bounds: tuple[tuple[int, int], ...], expected: int) -> None:
    assert max_overlap(intervals(*bounds)) == expected
    # the sweep agrees with counting at every boundary
    points = [t for bound in bounds for t in bound]
    assert max((sum(1 for s, e in bounds if s <= t < e) for t in points), default=0) == expected


def test_report_of_an_unused_state_dir_is_empty(state_dir: Path) -> None:
    report = quota_report(state_dir)
    assert (report.starts, report.too_many_requests, report.throttled, report.max_active_queries) == (0, 0, 0, 0)
    assert report.intervals == ()


def test_history_left_by_a_killed_writer_is_ignored_then_cut_off(
    data_dir: Path, state_dir: Path, clock: FakeClock
) -> None:
    quota = EngineQuota(active_queries=5, **NO_RATE_LIMIT)
    with make_engine(data_dir, state_dir, clock, quota=quota) as engine:
        first = start(engine, 1)
        history = state_dir / "quota" / "history.jsonl"
        with open(history, "a", encoding="utf-8") as f:  # a writer killed before it committed state.json
            f.write('{"event":"registered","query_execution_id":"ghost","client_req')
        assert [i.query_execution_id for i in quota_report(state_dir).intervals] == [first]

        second = start(engine, 2)

    assert [i.query_execution_id for i in quota_report(state_dir).intervals] == [first, second]
    assert "ghost" not in history.read_text()


# --------------------------------------------------------------------------------------------------
# Several processes on one state_dir
# --------------------------------------------------------------------------------------------------
PROCESSES = 4
STARTS_PER_PROCESS = 4
QUOTA = 5


def _start_many(data_dir: str, state_dir: str, worker: int, barrier: Any, out: Any) -> None:
    """A child process: a frozen clock (nothing ever ends), STARTS_PER_PROCESS starts as fast as it can."""
    engine = DuckDBQueryEngine(
        data_dir=Path(data_dir),
        state_dir=Path(state_dir),
        simulated_duration_ms=60_000,
        clock_ms=FakeClock(),
        quota=EngineQuota(active_queries=QUOTA, **NO_RATE_LIMIT),
    )
    outcomes: list[str] = []
    barrier.wait(timeout=60)
    for n in range(STARTS_PER_PROCESS):
        try:
            outcomes.append(start(engine, n, client_request_token=token(f"w{worker}-{n}")))
        except QueryEngineError as exc:
            outcomes.append(str(exc.error_code))
    engine.close()
    out.put(outcomes)


@pytest.mark.slow
def test_processes_sharing_a_state_dir_never_exceed_the_quota(data_dir: Path, state_dir: Path) -> None:
    # GIVEN 4 processes, 4 starts each, against a quota of 5, with a clock frozen so that no query ends
    ctx = multiprocessing.get_context("spawn")  # no fork after DuckDB started its threads
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    workers = [
        ctx.Process(target=_start_many, args=(str(data_dir), str(state_dir), n, barrier, out)) for n in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [outcome for _ in workers for outcome in out.get(timeout=120)]
    for worker in workers:
        worker.join(timeout=60)

    # THEN exactly 5 starts succeeded in all, every other one was refused with TooManyRequestsException
    assert all(worker.exitcode == 0 for worker in workers)
    started = [o for o in outcomes if o != "TooManyRequestsException"]
    assert len(outcomes) == PROCESSES * STARTS_PER_PROCESS
    assert len(started) == QUOTA == len(set(started))
    assert sorted(p.stem for p in (state_dir / "queries").glob("*.json")) == sorted(started)
    # and the report, read by this (another) process, agrees
    report = quota_report(state_dir)
    assert report.starts == QUOTA
    assert report.too_many_requests == PROCESSES * STARTS_PER_PROCESS - QUOTA
    assert report.max_active_queries == QUOTA
    assert sorted(i.query_execution_id for i in report.intervals) == sorted(started)
