"""athena_refresh.cost.estimate: the one place a price is multiplied, each service's arithmetic pinned by hand
(us-east-1 prices of prices.toml)."""

from __future__ import annotations

import pytest

from athena_refresh.cost import TB, Cost, SlotUsage, Usage, estimate, estimate_slot_cost, load_prices
from athena_refresh.prices import PRICES_PATH
from athena_refresh.prices import load_prices as load_prices_from_table


def test_each_service_is_its_quantity_times_its_price() -> None:
    prices = load_prices("us-east-1")
    cost = estimate(
        Usage(
            athena_billed_bytes=2 * TB,
            lambda_gb_s=1000.0,
            lambda_requests=2_000_000,
            read_units=4_000_000,
            write_units=1_000_000,
            scheduler_invocations=3_000_000,
            s3_put_requests=2000,
            s3_get_requests=10_000,
            metrics=10,
            metric_month_fraction=0.5,
            alarm_metrics=3,
            dashboards=2,
            log_gb=4.0,
            http_requests=5_000_000,
        ),
        prices,
    )
    assert cost.athena == pytest.approx(2 * 5.00)
    assert cost.lambda_ == pytest.approx(1000 * 0.0000133334 + 2 * 0.20)
    assert cost.dynamodb == pytest.approx(1 * 0.625 + 4 * 0.125)
    assert cost.scheduler == pytest.approx(3 * 1.00)
    assert cost.s3 == pytest.approx(2 * 0.005 + 10 * 0.0004)
    assert cost.cloudwatch_metrics == pytest.approx(10 * 0.30 * 0.5)
    assert cost.cloudwatch_alarms == pytest.approx(3 * 0.10)
    assert cost.cloudwatch_dashboards == pytest.approx(2 * 3.00)
    assert cost.cloudwatch_logs == pytest.approx(4 * (0.50 + 0.03))
    assert cost.apigateway == pytest.approx(5 * 1.00)
    assert list(cost.by_service()) == [
        "athena",
        "lambda",
        "dynamodb",
        "scheduler",
        "s3",
        "cloudwatch_metrics",
        "cloudwatch_alarms",
        "cloudwatch_dashboards",
        "cloudwatch_logs",
        "apigateway",
    ]


def test_no_usage_costs_nothing_and_x86_is_priced_apart() -> None:
    prices = load_prices("us-east-1")
    assert estimate(Usage(), prices) == Cost()
    assert estimate(Usage(lambda_gb_s=1.0, architecture="x86_64"), prices).lambda_ == pytest.approx(0.0000166667)
    with pytest.raises(ValueError, match="architecture"):
        Usage(architecture="sparc")


def test_a_slot_is_its_billed_usage_at_estimate() -> None:
    # GIVEN a slot: 3 racers, one query of 1 byte (billed at 10 MB), 1,000.4 ms winner, 100 ms losers at 1 GB
    prices = load_prices("us-east-1")
    slot = SlotUsage(
        data_scanned_bytes=(1,),
        winner_billed_ms=1000.4,
        loser_billed_ms=100.0,
        racers=3,
        memory_mb=1024,
        read_units=2.0,
        write_units=10.0,
    )
    billed = slot.billed(min_mb=prices.athena_min_mb_per_query)
    # THEN the billed usage rounds each duration up to the ms, adds a write per loser and a schedule per racer
    assert billed.athena_billed_bytes == 10 * 2**20
    assert billed.lambda_gb_s == pytest.approx((1001 + 2 * 100) / 1000)
    assert (billed.lambda_requests, billed.scheduler_invocations) == (3, 3)
    assert (billed.read_units, billed.write_units) == (2.0, 12.0)
    # AND the slot's estimate is that usage's estimate, rounded per service
    per_service = estimate(billed, prices)
    assert estimate_slot_cost(slot, prices).lambda_usd == round(per_service.lambda_, 10)
    assert estimate_slot_cost(slot, prices).athena_usd == round(per_service.athena, 10)


def test_the_cost_module_re_exports_the_price_table() -> None:
    assert load_prices is load_prices_from_table and PRICES_PATH.name == "prices.toml"
    assert PRICES_PATH.parent.name == "athena_refresh"  # shipped in the Lambda asset
