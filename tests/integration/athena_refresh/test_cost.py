"""athena_refresh.cost: the price table as data, and the arithmetic from usage to USD, checked by hand."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import cost as cost_module
from athena_refresh.cost import (
    MB,
    TB,
    InvocationCost,
    PriceTableError,
    SlotUsage,
    athena_billed_bytes,
    estimate_slot_cost,
    format_usd,
    load_prices,
)
from athena_refresh.results import ResultsStore
from slotlock import Slot, SlotLock
from slotlock.capacity import CapacitySnapshot

pytestmark = pytest.mark.backends("moto", "dynamodb-local")


@pytest.mark.parametrize(
    ("scanned", "billed_mb"),
    [
        (0, 10),  # a query that read nothing still pays the minimum
        (1, 10),
        (10 * MB - 1, 10),
        (10 * MB, 10),
        (10 * MB + 1, 11),  # rounded up to the next MB
        (123_456_789, 118),  # 117.74 MB -> 118
        (5 * 2**30, 5 * 1024),  # 5 GiB
    ],
)
def test_athena_bills_whole_megabytes_with_a_ten_megabyte_minimum(scanned: int, billed_mb: int) -> None:
    assert athena_billed_bytes(scanned) == billed_mb * MB


@pytest.mark.parametrize("scanned", [2**53 + 1, 2**60 + 1, 2**60 + 127, 2**62 + 3 * MB + 1])
def test_athena_billed_bytes_are_exact_past_two_to_the_53(scanned: int) -> None:
    # a float division rounds these to a whole MB below: it would bill less than was scanned
    assert math.ceil(scanned / MB) * MB < scanned
    billed = athena_billed_bytes(scanned)
    assert isinstance(billed, int) and billed % MB == 0
    assert scanned <= billed < scanned + MB  # the next whole MB, exactly
    assert athena_billed_bytes(2**60 + 1) == 2**60 + MB and athena_billed_bytes(2**60) == 2**60


def test_athena_billed_bytes_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="data_scanned_bytes"):
        athena_billed_bytes(-1)


def test_the_bundled_table_has_us_east_1_list_prices_with_sources_and_a_date() -> None:
    prices = load_prices("us-east-1")
    assert prices.region == prices.requested_region == "us-east-1" and not prices.fallback
    assert prices.athena_usd_per_tb_scanned == 5.0 and prices.athena_min_mb_per_query == 10
    assert prices.lambda_usd_per_gb_s == {"arm64": 0.0000133334, "x86_64": 0.0000166667}
    assert prices.dynamodb_usd_per_million_write_units == 0.625
    assert prices.dynamodb_usd_per_million_read_units == 0.125
    assert prices.scheduler_usd_per_million_invocations == 1.0
    assert prices.retrieved == "2026-11-24"
    assert set(prices.sources) >= {"athena", "lambda", "dynamodb", "scheduler", "cloudwatch", "s3"}
    assert all(url.startswith("https://aws.amazon.com/") for url in prices.sources.values())


def test_a_region_with_the_same_prices_says_so_and_an_unlisted_one_falls_back() -> None:
    oregon, virginia = load_prices("us-west-2"), load_prices("us-east-1")
    assert oregon.region == "us-west-2" and not oregon.fallback
    assert oregon.athena_usd_per_tb_scanned == virginia.athena_usd_per_tb_scanned
    assert oregon.lambda_usd_per_gb_s == virginia.lambda_usd_per_gb_s
    frankfurt = load_prices("eu-central-1")
    assert frankfurt.fallback and frankfurt.region == "us-east-1" and frankfurt.requested_region == "eu-central-1"
    assert frankfurt.label() == {"region": "us-east-1", "requested_region": "eu-central-1", "retrieved": "2026-11-24"}
    assert load_prices(None).region == "us-east-1"  # the table's default region


def _table(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_missing_price_is_named(tmp_path: Path) -> None:
    bundled = (Path(load_prices.__code__.co_filename).parent / "prices.toml").read_text(encoding="utf-8")
    broken = bundled.replace("usd_per_million_write_units = 0.625\n", "")
    with pytest.raises(PriceTableError, match=r"regions\.us-east-1\.dynamodb\.usd_per_million_write_units"):
        load_prices("us-east-1", _table(tmp_path, broken))


def _bundled() -> str:
    return (Path(load_prices.__code__.co_filename).parent / "prices.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+inf", "-nan", "-0.5", "-1", "true", "false", "'5'"])
def test_a_price_that_is_not_a_finite_number_at_least_zero_is_refused_naming_its_key(
    tmp_path: Path, value: str
) -> None:
    # GIVEN the bundled table with Athena's price per TB replaced by a valid TOML value that is no price
    broken = _bundled().replace("usd_per_tb_scanned = 5.00\n", f"usd_per_tb_scanned = {value}\n", 1)
    assert broken != _bundled()
    # WHEN it is loaded THEN it is refused, naming the key (nan compares false with 0: it used to pass)
    with pytest.raises(PriceTableError, match=r"must be a finite number >= 0") as raised:
        load_prices("us-east-1", _table(tmp_path, broken))
    assert raised.value.key == "regions.us-east-1.athena.usd_per_tb_scanned"
    assert "regions.us-east-1.athena.usd_per_tb_scanned" in str(raised.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "true", "10.0", "10.5"])
def test_the_athena_minimum_must_be_a_whole_number_of_megabytes(tmp_path: Path, value: str) -> None:
    broken = _bundled().replace("min_mb_per_query = 10\n", f"min_mb_per_query = {value}\n", 1)
    with pytest.raises(PriceTableError, match=r"must be an integer >= 0") as raised:
        load_prices("us-east-1", _table(tmp_path, broken))
    assert raised.value.key == "regions.us-east-1.athena.min_mb_per_query"


def test_a_huge_but_finite_price_is_a_price(tmp_path: Path) -> None:
    huge = _bundled().replace("usd_per_gb_s_arm64 = 0.0000133334\n", "usd_per_gb_s_arm64 = 1e308\n", 1)
    assert load_prices("us-east-1", _table(tmp_path, huge)).lambda_usd_per_gb_s["arm64"] == 1e308


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("format = 2\n", "format"),
        ("format = 1\ndefault_region = 'x'\n[regions.y]\n", "default_region"),
        ("format = 1\ndefault_region = 'a'\n[regions.a]\nsame_as = 'b'\n[regions.b]\nsame_as = 'a'\n", "same_as"),
        ("format = 1\ndefault_region = 'a'\n[regions.a]\nsame_as = ['b']\n[regions.b]\n", "same_as"),
        ("not toml = [\n", "file"),
    ],
)
def test_a_broken_table_is_refused_with_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(PriceTableError, match=key) as raised:
        load_prices("a", _table(tmp_path, text))
    assert raised.value.key.endswith(key)


def test_a_slot_estimate_by_hand() -> None:
    # GIVEN 3 racers at 256 MB on arm64: the winner ran 2,000 ms, each loser 40 ms; the query scanned 1 MB;
    # the winner's requests consumed 20 WRU and 2 RRU, each loser's failed write 1 WRU
    usage = SlotUsage(
        data_scanned_bytes=[1 * MB],
        winner_billed_ms=2000,
        loser_billed_ms=40,
        racers=3,
        memory_mb=256,
        architecture="arm64",
        read_units=2,
        write_units=20,
        loser_write_units=1,
    )
    estimate = estimate_slot_cost(usage, load_prices("us-east-1"))
    # Athena: the 10 MB minimum: 10 * 2^20 / 2^40 TB * $5 = $0.0000476837
    assert estimate.athena_billed_bytes == 10 * MB
    assert estimate.athena_usd == pytest.approx(10 * MB / TB * 5.0, abs=1e-10)
    assert estimate.athena_usd == pytest.approx(0.0000476837, abs=1e-10)
    # Lambda: 0.25 GB x (2.000 + 2 x 0.040) s = 0.52 GB-s x $0.0000133334 + 3 requests x $0.20/M
    assert estimate.lambda_gb_s == pytest.approx(0.52)
    assert estimate.lambda_usd == pytest.approx(0.52 * 0.0000133334 + 3 * 0.2e-6, abs=1e-10)
    # DynamoDB: (20 + 2 x 1) WRU x $0.625/M + 2 RRU x $0.125/M = $0.00001375 + $0.00000025
    assert estimate.write_units == 22 and estimate.read_units == 2
    assert estimate.dynamodb_usd == pytest.approx(0.000014, abs=1e-10)
    # Scheduler: 3 invocations x $1/M
    assert estimate.scheduler_usd == pytest.approx(0.000003, abs=1e-10)
    assert estimate.s3_usd == 0
    assert estimate.total_usd == pytest.approx(0.0000476837 + 0.0000075334 + 0.000014 + 0.000003, abs=2e-10)


def test_billed_duration_rounds_each_invocation_up_to_the_millisecond() -> None:
    usage = SlotUsage(data_scanned_bytes=[], winner_billed_ms=10.2, loser_billed_ms=0.1, racers=2, memory_mb=1024)
    estimate = estimate_slot_cost(usage, load_prices())
    assert estimate.lambda_gb_s == pytest.approx((11 + 1) / 1000)  # 1 GB x (11 ms + 1 ms)
    assert estimate.athena_usd == 0 and estimate.athena_billed_bytes == 0  # no billed query, no minimum


def test_every_billed_query_pays_its_own_minimum_and_offloaded_rows_pay_a_put() -> None:
    usage = SlotUsage(
        data_scanned_bytes=[MB, 30 * MB + 5],
        winner_billed_ms=0,
        loser_billed_ms=0,
        racers=1,
        memory_mb=128,
        s3_put_requests=1,
    )
    estimate = estimate_slot_cost(usage, load_prices())
    assert estimate.athena_billed_bytes == (10 + 31) * MB
    assert estimate.s3_usd == pytest.approx(0.005 / 1000)


def test_the_stored_shape_is_labelled_an_estimate() -> None:
    usage = SlotUsage(data_scanned_bytes=[MB], winner_billed_ms=100, loser_billed_ms=10, racers=3, memory_mb=256)
    document = estimate_slot_cost(usage, load_prices("us-east-1")).as_dict()
    assert document["estimate"] is True
    assert set(document["by_service_usd"]) == {"athena", "lambda", "dynamodb", "scheduler", "s3"}
    assert document["estimated_cost_usd"] == pytest.approx(sum(document["by_service_usd"].values()), abs=1e-9)
    assert document["prices"]["retrieved"] == "2026-11-24"


@pytest.mark.parametrize(
    ("value", "text"), [(None, "-"), (0.0000476837, "$0.000048"), (0.5, "$0.5000"), (1234.5, "$1,234.5000")]
)
def test_format_usd(value: float | None, text: str) -> None:
    assert format_usd(value) == text


class _Meter:
    def __init__(self) -> None:
        self.now = CapacitySnapshot()

    def snapshot(self) -> CapacitySnapshot:
        return self.now


def test_invocation_cost_models_losers_on_the_winners_time_to_its_lock_decision() -> None:
    # GIVEN a clock and a meter the test moves: 30 ms and 1 WRU to the lock decision, then 1,970 ms more,
    # 3 WRU and 1 RRU before the commit; a cold start of 500 ms
    clock = [100.0]
    meter = _Meter()
    meter.now = CapacitySnapshot(write_units=7.0, requests={"UpdateItem": 5})  # earlier invocations: not ours
    tracker = InvocationCost(
        prices=load_prices("us-east-1"),
        racers=3,
        memory_mb=256,
        capacity=meter,
        init_ms=500,
        clock_s=lambda: clock[0],
    )
    clock[0] += 0.030
    meter.now = CapacitySnapshot(write_units=8.0, requests={"UpdateItem": 6})
    tracker.lock_decided()
    clock[0] += 1.970
    meter.now = CapacitySnapshot(read_units=1.0, write_units=11.0, requests={"UpdateItem": 9, "GetItem": 1})
    put = {"Put": {"TableName": "r", "Item": {"job": {"S": "j"}, "rows_json": {"S": "x" * 1500}}}}
    estimate = tracker.estimate(data_scanned_bytes=[MB], commit_writes=[put], summary_bytes=300)
    # Lambda: winner 500 + 2000 ms, each loser 500 + 30 ms: 0.25 GB x (2.5 + 2 x 0.53) s
    assert estimate.lambda_gb_s == pytest.approx(0.25 * (2.5 + 2 * 0.53))
    # DynamoDB: 4 WRU metered since the start + the commit's model (result item 1.5 KB + cost attribute: 2 KB
    # -> 2 x 3; slot item 300 + 768 + 400 bytes -> 2 x 2, and its history index copy 1 x 2; lock item -> 2 x 1)
    # + 2 losers x 1 WRU
    assert estimate.write_units == 4 + (6 + 4 + 2 + 2) + 2
    assert estimate.read_units == 1


# ---------------------------------------------------------------------------------------------------
# the estimate never fails a slot: whatever it computes, the slot commits (without it when it is no number)
# ---------------------------------------------------------------------------------------------------
class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def results_log() -> Iterator[list[logging.LogRecord]]:
    """What the results store logs during the test (its logger does not propagate: Powertools' configuration)."""
    handler = _Records()
    store_logger = logging.getLogger("athena_refresh.results")
    store_logger.addHandler(handler)
    yield handler.records
    store_logger.removeHandler(handler)


def _tracker(failure: str, tmp_path: Path, lock: SlotLock, monkeypatch: pytest.MonkeyPatch) -> InvocationCost:
    """A winner's cost tracker whose estimate overflows to ``inf`` (a huge but valid price), holds a ``nan``
    (a figure patched), or raises."""
    prices = load_prices("us-east-1")
    if failure == "overflow":
        huge = _bundled().replace("usd_per_gb_s_arm64 = 0.0000133334\n", "usd_per_gb_s_arm64 = 1e308\n", 1)
        prices = load_prices("us-east-1", _table(tmp_path, huge))
    elif failure == "nan":
        real = cost_module.estimate_slot_cost
        monkeypatch.setattr(
            cost_module,
            "estimate_slot_cost",
            lambda usage, prices: dataclasses.replace(real(usage, prices), dynamodb_usd=math.nan),
        )
    else:

        def broken(*_: Any, **__: Any) -> int:
            raise RuntimeError("the commit's model broke")

        monkeypatch.setattr(cost_module, "commit_write_units", broken)
    seconds = [0.0]
    tracker = InvocationCost(
        prices=prices, racers=1, memory_mb=10240, capacity=lock.capacity, clock_s=lambda: seconds[0]
    )
    seconds[0] = 10.0  # the winner runs 10 s at 10 GB: 100 GB-s (x 1e308 USD: inf)
    return tracker


@pytest.mark.parametrize("failure", ["overflow", "nan", "raises"])
def test_an_estimate_that_is_not_finite_or_fails_is_logged_and_the_slot_commits_without_it(
    failure: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_job: Callable[..., Any],
    make_engine: Callable[..., Any],
    make_runner: Callable[..., Any],
    lock: SlotLock,
    store: ResultsStore,
    slot: Slot,
    clock: Any,
    results_log: list[logging.LogRecord],
    scan: Callable[[str], list[dict[str, Any]]],
    results_table: str,
) -> None:
    # GIVEN a winner whose estimate is inf (finite prices, overflowing product), nan, or an exception
    tracker = _tracker(failure, tmp_path, lock, monkeypatch)
    if failure == "overflow":  # no patch: the arithmetic itself gives inf
        probe = tracker.estimate(data_scanned_bytes=[MB], commit_writes=[], summary_bytes=0)
        assert math.isinf(probe.lambda_usd) and math.isinf(probe.total_usd)
    job = make_job(make_engine(), cost=tracker)

    # WHEN it runs the slot
    outcome = make_runner().run(job, slot=slot, owner_id="winner", deadline_ms=clock.now + 300_000)

    # THEN the slot committed, once: result, LATEST and history, none of them with an estimate
    assert outcome.status == "succeeded", outcome
    stored, latest = store.result(job.settings.job_name, slot.iso), store.latest(job.settings.job_name)
    assert stored is not None and latest is not None
    assert (stored.row_count, stored.cost, latest.slot_iso, latest.cost) == (3, None, slot.iso, None)
    items = scan(results_table)
    assert len(items) == 2 and not any("cost_json" in item for item in items)
    history = lock.get_slot(slot)
    assert history is not None and history["status"] == "SUCCEEDED"
    assert history["summary"]["row_count"] == 3 and "cost" not in history["summary"]
    # AND no estimated cost reported (the log line leaves the field out), the rest as usual; the store logged why,
    # with the traceback
    assert (job.report.committed, job.report.rows_stored, job.report.estimated_cost_usd) == (True, 3, None)
    assert [record.levelno for record in results_log] == [logging.ERROR]
    assert "commits without a cost estimate" in results_log[0].getMessage() and results_log[0].exc_info
