"""athena_refresh.cost: the price table as data, and the arithmetic from usage to USD, checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from slotlock.capacity import CapacitySnapshot


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


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("format = 2\n", "format"),
        ("format = 1\ndefault_region = 'x'\n[regions.y]\n", "default_region"),
        ("format = 1\ndefault_region = 'a'\n[regions.a]\nsame_as = 'b'\n[regions.b]\nsame_as = 'a'\n", "same_as"),
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
