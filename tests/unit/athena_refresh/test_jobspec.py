"""JobSpec, the one job model: constructed from keyword arguments, it runs every rule synth runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from athena_refresh.checks import ConfigError
from athena_refresh.job_defaults import spec_of
from athena_refresh.job_rules import heartbeat_bound_s
from athena_refresh.jobspec import AlarmsSpec, JobSpec, ValueMetricsSpec, as_raw

REQUIRED: dict[str, Any] = {
    "job_name": "flights-dashboard",
    "schedule_expression": "cron(0/30 * * * ? *)",
    "database": "flights_demo",
    "table": "flights",
    "workgroup": "athena-refresh",
    "sql": "SELECT 1 FROM flights WHERE t >= ? AND t < ?",
}


def test_spec_of_derives_every_default_from_the_schedule() -> None:
    # GIVEN only the required keys / WHEN built / THEN the defaults are the job file's (one period: 1800 s)
    spec = spec_of(**REQUIRED)
    assert (spec.racers, spec.lease_duration_s, spec.heartbeat_interval_s) == (3, 45, 15)
    assert (spec.max_slot_age_s, spec.window_s, spec.lambda_timeout_s) == (1800, 1800, 900)
    assert spec.alarms == AlarmsSpec(data_scanned_bytes=800_000_000, query_duration_ms=720_000)
    assert spec.period.shortest_s == 1800


def test_a_spec_round_trips_through_its_plain_data() -> None:
    spec = spec_of(**REQUIRED, value_metrics={"columns": ["flights"], "dimensions": ["origin"]})
    assert spec.value_metrics == ValueMetricsSpec(columns=("flights",), dimensions=("origin",))
    assert JobSpec.from_context(as_raw(spec)) == spec


def test_constructing_a_spec_checks_each_key_and_every_relationship() -> None:
    # GIVEN a valid spec / WHEN a key is out of range and the heartbeat breaks the lease rule
    spec = spec_of(**REQUIRED)
    with pytest.raises(ConfigError) as excinfo:
        dataclasses.replace(spec, racers=0, lease_duration_s=20)
    # THEN every problem is listed, each naming its key
    assert excinfo.value.problems == (
        "racers: must be an integer from 1 to 20, got 0",
        (
            "heartbeat_interval_s: must be below (lease_duration_s - 5 s clock skew allowance) / 2 = 7.5 s, so that "
            "a renewal lands before other racers may see the lease as expired, got 15"
        ),
    )


def test_the_heartbeat_default_follows_a_short_lease() -> None:
    spec = spec_of(**REQUIRED, lease_duration_s=20)
    assert spec.heartbeat_interval_s == 7 < heartbeat_bound_s(20)


def test_a_spec_normalizes_what_its_checks_normalize() -> None:
    assert spec_of(**REQUIRED, removal_policy="destroy").removal_policy == "DESTROY"


def test_a_sub_spec_checks_its_own_keys() -> None:
    with pytest.raises(ConfigError, match=r"alarms.query_duration_ms: must be an integer from 1 to 86400000, got 0"):
        AlarmsSpec(data_scanned_bytes=1, query_duration_ms=0)
