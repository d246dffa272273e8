"""``Settings.from_env``: every variable of the contract, every rule, and the slot-to-window mapping."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.errors import ConfigurationError
from athena_refresh.permits import CapacitySettings
from athena_refresh.settings import DEFAULT_CATALOG, Settings
from slotlock import _dynamodb as slotlock_dynamodb

SQL = "SELECT origin, count(*) AS n FROM flights WHERE t >= CAST(? AS timestamp) AND t < CAST(? AS timestamp)"

#: Every variable of the contract, set to a valid non-default value.
FULL_ENV = {
    contract.ENV_JOB_NAME: "flights-dashboard",
    contract.ENV_LOCK_TABLE_NAME: "locks-table",
    contract.ENV_RESULTS_TABLE_NAME: "results-table",
    contract.ENV_RESULTS_BUCKET_NAME: "results-bucket",
    contract.ENV_LEASE_DURATION_S: "45",
    contract.ENV_HEARTBEAT_INTERVAL_S: "15",
    contract.ENV_MAX_SLOT_AGE_S: "1800",
    contract.ENV_HISTORY_TTL_S: "2592000",
    contract.ENV_MAX_QUERY_ATTEMPTS: "4",
    contract.ENV_WINDOW_S: "86400",
    contract.ENV_DATA_YEAR: "2013",
    contract.ENV_ATHENA_WORKGROUP: "athena-refresh",
    contract.ENV_ATHENA_DATABASE: "flights_demo",
    contract.ENV_ATHENA_CATALOG: "OtherCatalog",
    contract.ENV_QUERY_SQL: SQL,
    contract.ENV_VALUE_METRIC_COLUMNS: "n, avg_delay",
    contract.ENV_VALUE_METRIC_DIMENSIONS: "origin",
    contract.ENV_VALUE_METRIC_MAX_SERIES: "20",
    contract.ENV_RESULT_REUSE_MAX_AGE_MIN: "90",
    contract.ENV_MAX_SLOT_LEAD_S: "3",
    contract.ENV_ALARM_DATA_SCANNED_BYTES: "5000000000",
    contract.ENV_ALARM_QUERY_DURATION_MS: "120000",
    contract.ENV_CAPACITY_PERMITS: "10",
    contract.ENV_CAPACITY_SEMAPHORE_NAME: "123456789012-eu-west-1",
    contract.ENV_CAPACITY_TABLE_NAME: "other-deployment-locks",
    contract.ENV_CAPACITY_WAIT_IN_PLACE_S: "45.5",
    contract.ENV_CAPACITY_MANUAL_HEADROOM: "3",
    contract.ENV_CAPACITY_RETRY_DELAY_S: "180",
    contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S: "900",
    contract.ENV_DEFERRAL_ROLE_ARN: "arn:aws:iam::123456789012:role/job-scheduler",
    contract.ENV_DEFERRAL_SCHEDULE_GROUP: "default",
    contract.ENV_DEFERRAL_SCHEDULE_PREFIX: "sar-0123456789ab-",
}
REQUIRED = (
    contract.ENV_JOB_NAME,
    contract.ENV_LOCK_TABLE_NAME,
    contract.ENV_RESULTS_TABLE_NAME,
    contract.ENV_ATHENA_WORKGROUP,
    contract.ENV_ATHENA_DATABASE,
    contract.ENV_QUERY_SQL,
)
#: The catalog path is optional too, but not beside QUERY_SQL (test_catalog covers it).
OPTIONAL = tuple(name for name in contract.ALL_ENV_VARS if name not in (*REQUIRED, contract.ENV_JOB_CATALOG_PATH))


def env(**changes: str | None) -> dict[str, str]:
    """FULL_ENV with ``changes`` applied (``None`` removes the variable)."""
    result = dict(FULL_ENV)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def config_error(environment: dict[str, str]) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(environment)
    return info.value


# ---------------------------------------------------------------------------------------------------
# happy paths
# ---------------------------------------------------------------------------------------------------


def test_from_env_reads_every_contract_variable() -> None:
    # GIVEN every variable of the contract (the test's table covers them all; the inline query, not a catalog)
    assert set(FULL_ENV) == set(contract.ALL_ENV_VARS) - {contract.ENV_JOB_CATALOG_PATH}

    # WHEN the settings are read
    settings = Settings.from_env(FULL_ENV)

    # THEN each variable landed in its field, with its type
    assert settings == Settings(
        job_name="flights-dashboard",
        lock_table_name="locks-table",
        results_table_name="results-table",
        results_bucket_name="results-bucket",
        athena_workgroup="athena-refresh",
        athena_database="flights_demo",
        athena_catalog="OtherCatalog",
        query_sql=SQL,
        lease_duration_s=45.0,
        heartbeat_interval_s=15.0,
        max_slot_age_s=1800.0,
        history_ttl_s=2_592_000,
        max_query_attempts=4,
        window_s=86_400,
        data_year=2013,
        value_metric_columns=("n", "avg_delay"),
        value_metric_dimensions=("origin",),
        value_metric_max_series=20,
        result_reuse_max_age_min=90,
        max_slot_lead_s=3.0,
        alarm_data_scanned_bytes=5_000_000_000,
        alarm_query_duration_ms=120_000,
        capacity=CapacitySettings(
            permits=10,
            semaphore_name="123456789012-eu-west-1",
            table_name="other-deployment-locks",
            wait_in_place_s=45.5,
            manual_headroom=3,
            retry_delay_s=180.0,
            max_query_active_s=900.0,
            deferral_role_arn="arn:aws:iam::123456789012:role/job-scheduler",
            deferral_schedule_group="default",
            deferral_schedule_prefix="sar-0123456789ab-",
        ),
    )
    assert isinstance(settings.history_ttl_s, int) and isinstance(settings.max_query_attempts, int)


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the variables in the process environment
    for key, value in FULL_ENV.items():
        monkeypatch.setenv(key, value)

    # WHEN no mapping is passed
    settings = Settings.from_env()

    # THEN os.environ was read
    assert settings.lock_table_name == "locks-table" and settings.data_year == 2013


def test_optional_variables_have_documented_defaults() -> None:
    # GIVEN only the required variables
    settings = Settings.from_env({key: FULL_ENV[key] for key in REQUIRED})

    # THEN everything else takes its default
    assert settings.results_bucket_name is None
    assert settings.athena_catalog == DEFAULT_CATALOG == "AwsDataCatalog"
    assert settings.lease_duration_s == 45.0
    assert settings.heartbeat_interval_s == 15.0  # a third of the lease
    assert settings.max_slot_age_s == 1800.0
    assert settings.history_ttl_s == 30 * 24 * 3600
    assert settings.max_query_attempts == 3
    assert settings.window_s == 86400
    assert settings.data_year is None
    assert (
        settings.max_slot_lead_s == 5.0 == contract.DEFAULT_MAX_SLOT_LEAD_S == slotlock_dynamodb.DEFAULT_MAX_SLOT_LEAD_S
    )


def test_default_heartbeat_is_a_third_of_the_lease() -> None:
    # GIVEN a lease of 54 s and no heartbeat variable
    environment = env(**{contract.ENV_LEASE_DURATION_S: "54", contract.ENV_HEARTBEAT_INTERVAL_S: None})
    # WHEN the settings are read
    settings = Settings.from_env(environment)
    # THEN the heartbeat is a third of the lease
    assert settings.heartbeat_interval_s == 18.0


@pytest.mark.parametrize("raw", ["none", "None", "off"])
def test_max_slot_age_can_be_turned_off(raw: str) -> None:
    # GIVEN / WHEN the maximum slot age is set to a word meaning "off"
    settings = Settings.from_env(env(**{contract.ENV_MAX_SLOT_AGE_S: raw}))
    # THEN deliveries of any age are accepted
    assert settings.max_slot_age_s is None


def test_values_are_stripped_and_blank_optionals_mean_default() -> None:
    # GIVEN values with surrounding whitespace, and blank optional values
    # WHEN the settings are read
    settings = Settings.from_env(
        env(
            **{
                contract.ENV_LOCK_TABLE_NAME: "  locks-table \n",
                contract.ENV_RESULTS_BUCKET_NAME: "   ",
                contract.ENV_ATHENA_CATALOG: "",
                contract.ENV_DATA_YEAR: " ",
            }
        )
    )
    # THEN values are stripped and blank optionals take their defaults
    assert settings.lock_table_name == "locks-table"
    assert settings.results_bucket_name is None
    assert settings.athena_catalog == DEFAULT_CATALOG
    assert settings.data_year is None


# ---------------------------------------------------------------------------------------------------
# missing and invalid values: the error names the variable
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", REQUIRED)
@pytest.mark.parametrize("value", [None, "", "   "], ids=["missing", "empty", "blank"])
def test_each_missing_required_variable_is_named(key: str, value: str | None) -> None:
    # GIVEN a complete environment except one required variable
    # WHEN the settings are read
    error = config_error(env(**{key: value}))

    # THEN the error names that variable, in .key and in the message
    assert error.key == key
    assert str(error).startswith(f"{key}:")
    assert isinstance(error, ValueError)  # callers can also catch ValueError


@pytest.mark.parametrize("key", OPTIONAL)
def test_no_optional_variable_is_required(key: str) -> None:
    # GIVEN a complete environment without one optional variable
    # WHEN / THEN the settings are read without error, with that field's default
    settings = Settings.from_env(env(**{key: None}))
    assert settings.job_name == FULL_ENV[contract.ENV_JOB_NAME]


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (contract.ENV_LEASE_DURATION_S, "forty-five"),
        (contract.ENV_LEASE_DURATION_S, "45s"),
        (contract.ENV_HEARTBEAT_INTERVAL_S, "fast"),
        (contract.ENV_MAX_SLOT_AGE_S, "1h"),
        (contract.ENV_HISTORY_TTL_S, "30d"),
        (contract.ENV_HISTORY_TTL_S, "60.5"),  # integers only
        (contract.ENV_MAX_QUERY_ATTEMPTS, "three"),
        (contract.ENV_MAX_QUERY_ATTEMPTS, "2.5"),
        (contract.ENV_WINDOW_S, "1 day"),
        (contract.ENV_DATA_YEAR, "MMXIII"),
        (contract.ENV_DATA_YEAR, "2013.0"),
    ],
)
def test_non_numeric_values_are_rejected(key: str, raw: str) -> None:
    # GIVEN / WHEN a number variable holds text that is not a number of the required kind
    error = config_error(env(**{key: raw}))
    # THEN the variable is named, and the value quoted
    assert error.key == key
    assert repr(raw) in str(error)


@pytest.mark.parametrize(
    "key", [contract.ENV_LEASE_DURATION_S, contract.ENV_HEARTBEAT_INTERVAL_S, contract.ENV_MAX_SLOT_AGE_S]
)
@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "infinity"])
def test_non_finite_numbers_are_rejected(key: str, raw: str) -> None:
    # GIVEN a float that Python parses but that is no duration ("nan" compares false with everything,
    # so a minimum check alone lets it through to the lock, which rejects it with another error type)
    environment = env(**{key: raw})
    if key == contract.ENV_LEASE_DURATION_S:
        environment.pop(contract.ENV_HEARTBEAT_INTERVAL_S)  # let the heartbeat default from the lease

    # WHEN / THEN it is refused here, naming the variable
    assert config_error(environment).key == key


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (contract.ENV_LEASE_DURATION_S, "-45"),
        (contract.ENV_LEASE_DURATION_S, "0"),
        (contract.ENV_HEARTBEAT_INTERVAL_S, "-1"),
        (contract.ENV_HEARTBEAT_INTERVAL_S, "0"),
        (contract.ENV_MAX_SLOT_AGE_S, "-1800"),
        (contract.ENV_MAX_SLOT_AGE_S, "0"),
        (contract.ENV_HISTORY_TTL_S, "-1"),
        (contract.ENV_HISTORY_TTL_S, "59"),
        (contract.ENV_MAX_QUERY_ATTEMPTS, "0"),
        (contract.ENV_MAX_QUERY_ATTEMPTS, "-3"),
        (contract.ENV_WINDOW_S, "-86400"),
        (contract.ENV_WINDOW_S, "59"),
        (contract.ENV_DATA_YEAR, "-2013"),
        (contract.ENV_DATA_YEAR, "1899"),
        (contract.ENV_DATA_YEAR, "2101"),
    ],
)
def test_negative_and_out_of_range_numbers_are_rejected(key: str, raw: str) -> None:
    # GIVEN / WHEN a number below its minimum (or a year outside 1900..2100)
    error = config_error(env(**{key: raw}))
    # THEN the variable is named
    assert error.key == key


@pytest.mark.parametrize(("lease", "heartbeat"), [("45", "23"), ("44", "22"), ("40", "27"), ("30", "15")])
def test_heartbeat_must_be_below_half_the_lease(lease: str, heartbeat: str) -> None:
    # GIVEN a heartbeat of half the lease or more: one late heartbeat would lose the lease. The lock
    # (SlotLock) and the stack's config both require strictly less than half, so the settings must too,
    # or a value accepted here fails later with a LockConfigurationError that names no variable.
    error = config_error(env(**{contract.ENV_LEASE_DURATION_S: lease, contract.ENV_HEARTBEAT_INTERVAL_S: heartbeat}))

    # THEN the heartbeat variable is named
    assert error.key == contract.ENV_HEARTBEAT_INTERVAL_S
    assert contract.ENV_LEASE_DURATION_S in str(error)


def test_heartbeat_just_below_half_the_lease_is_accepted() -> None:
    # GIVEN / WHEN a heartbeat just below half the lease
    settings = Settings.from_env(
        env(**{contract.ENV_LEASE_DURATION_S: "30", contract.ENV_HEARTBEAT_INTERVAL_S: "14.9"})
    )
    # THEN it is accepted as is
    assert settings.heartbeat_interval_s == 14.9


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM flights",
        "SELECT count(*) FROM flights WHERE t >= CAST(? AS timestamp)",
        "SELECT count(*) FROM flights WHERE t >= ? AND t < ? AND origin = ?",
    ],
    ids=["none", "one", "three"],
)
def test_sql_needs_exactly_two_placeholders(sql: str) -> None:
    # GIVEN / WHEN SQL without exactly one placeholder for each end of the window
    error = config_error(env(**{contract.ENV_QUERY_SQL: sql}))
    # THEN the SQL variable is named
    assert error.key == contract.ENV_QUERY_SQL
    assert "exactly two ?" in str(error)


@pytest.mark.parametrize("job_name", ["flights#dashboard", "j" * 65, "flights dashboard", "flights/x"])
def test_job_name_must_fit_the_lock_keys(job_name: str) -> None:
    # GIVEN / WHEN a job name outside the one rule ('#' separates key parts; 64 characters at most)
    error = config_error(env(**{contract.ENV_JOB_NAME: job_name}))
    # THEN the variable is named
    assert error.key == contract.ENV_JOB_NAME


# ---------------------------------------------------------------------------------------------------
# the query window
# ---------------------------------------------------------------------------------------------------


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def test_data_year_maps_the_slot_onto_the_data_timeline() -> None:
    # GIVEN the demo's settings: a one-day window on the 2013 flights data
    settings = Settings.from_env(env(**{contract.ENV_DATA_YEAR: "2013", contract.ENV_WINDOW_S: "86400"}))

    # WHEN the slot 2026-11-22T00:30Z asks for its window
    start, end = settings.window(at("2026-11-22T00:30:00Z"))
    parameters = settings.execution_parameters(at("2026-11-22T00:30:00Z"))

    # THEN the same month, day and time of day in 2013 end the window, as naive UTC
    assert (start, end) == (dt.datetime(2013, 11, 21, 0, 30), dt.datetime(2013, 11, 22, 0, 30))
    assert start.tzinfo is None and end.tzinfo is None
    # and Athena gets SQL literal text, quotes included
    assert parameters == ["'2013-11-21 00:30:00'", "'2013-11-22 00:30:00'"]


def test_29_february_maps_to_28_february_in_a_common_year() -> None:
    # GIVEN a one-hour window on 2013's data (2013 has no 29 February)
    settings = Settings.from_env(env(**{contract.ENV_DATA_YEAR: "2013", contract.ENV_WINDOW_S: "3600"}))

    # WHEN the leap-day slot 2028-02-29T12:00Z asks for its window
    start, end = settings.window(at("2028-02-29T12:00:00Z"))

    # THEN it ends on 28 February 2013 at the same time of day
    assert end == dt.datetime(2013, 2, 28, 12, 0)
    assert start == dt.datetime(2013, 2, 28, 11, 0)
    assert settings.execution_parameters(at("2028-02-29T12:00:00Z")) == [
        "'2013-02-28 11:00:00'",
        "'2013-02-28 12:00:00'",
    ]


def test_29_february_stays_in_a_leap_data_year() -> None:
    # GIVEN a leap data year
    settings = Settings.from_env(env(**{contract.ENV_DATA_YEAR: "2012", contract.ENV_WINDOW_S: "3600"}))
    # WHEN the leap-day slot asks for its window
    end = settings.window(at("2028-02-29T12:00:00Z"))[1]
    # THEN 29 February exists there and is kept
    assert end == dt.datetime(2012, 2, 29, 12, 0)


def test_without_data_year_the_window_ends_at_the_slot_in_utc() -> None:
    # GIVEN no data year: the query covers the slot's own time
    settings = Settings.from_env(env(**{contract.ENV_DATA_YEAR: None, contract.ENV_WINDOW_S: "1800"}))

    # WHEN a time with a +01:00 offset and sub-second noise asks for its window
    start, end = settings.window(dt.datetime(2026, 11, 22, 1, 30, 0, 999, tzinfo=dt.timezone(dt.timedelta(hours=1))))

    # THEN the window is the same instant in naive UTC, whole seconds
    assert (start, end) == (dt.datetime(2026, 11, 22, 0, 0), dt.datetime(2026, 11, 22, 0, 30))


# the window's dates, for a partition filter ``dt BETWEEN :window_first_date AND :window_last_date``
# ---------------------------------------------------------------------------------------------------
def window_dates(slot: str, *, window_s: int, data_year: str | None = None) -> list[str]:
    """``window_first_date`` and ``window_last_date`` of the slot, as Athena receives them."""
    settings = Settings.from_env(env(**{contract.ENV_WINDOW_S: str(window_s), contract.ENV_DATA_YEAR: data_year}))
    settings = dataclasses.replace(settings, query_parameters=("window_first_date", "window_last_date"))
    return settings.execution_parameters(at(slot))


def test_a_window_ending_at_midnight_does_not_touch_the_next_day() -> None:
    # GIVEN a one-day window ending exactly at midnight: [2026-11-21 00:00, 2026-11-22 00:00)
    # THEN its last instant (23:59:59) is on the 21st: one partition, not two
    assert window_dates("2026-11-22T00:00:00Z", window_s=86400) == ["'2026-11-21'", "'2026-11-21'"]


def test_a_window_crossing_midnight_spans_both_days() -> None:
    # GIVEN a one-day window ending at 00:30: [2026-11-21 00:30, 2026-11-22 00:30)
    assert window_dates("2026-11-22T00:30:00Z", window_s=86400) == ["'2026-11-21'", "'2026-11-22'"]
    # and a 30-minute window crossing midnight: [23:45, 00:15)
    assert window_dates("2026-11-22T00:15:00Z", window_s=1800) == ["'2026-11-21'", "'2026-11-22'"]


def test_a_window_inside_one_day_is_that_day_in_utc() -> None:
    # GIVEN a 30-minute window at 01:30+01:00 = 00:30 UTC: the dates are UTC dates
    settings = dataclasses.replace(
        Settings.from_env(env(**{contract.ENV_WINDOW_S: "1800", contract.ENV_DATA_YEAR: None})),
        query_parameters=("window_first_date", "window_last_date"),
    )
    slot = dt.datetime(2026, 11, 22, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert settings.execution_parameters(slot) == ["'2026-11-22'", "'2026-11-22'"]


def test_the_window_dates_follow_the_data_year() -> None:
    # GIVEN the demo's mapping onto 2013 (the sample's partitions are 2013-01-01..2014-01-01)
    assert window_dates("2026-11-22T00:30:00Z", window_s=86400, data_year="2013") == ["'2013-11-21'", "'2013-11-22'"]
    # and the leap day mapped onto 28 February 2013, a one-hour window
    assert window_dates("2028-02-29T12:00:00Z", window_s=3600, data_year="2013") == ["'2013-02-28'", "'2013-02-28'"]
    # and New Year's first half hour: the window starts in the previous year
    assert window_dates("2027-01-01T00:15:00Z", window_s=1800, data_year="2013") == ["'2012-12-31'", "'2013-01-01'"]


def test_every_built_in_parameter_is_bound_in_the_querys_order() -> None:
    settings = dataclasses.replace(
        Settings.from_env(env(**{contract.ENV_WINDOW_S: "86400", contract.ENV_DATA_YEAR: "2013"})),
        query_parameters=("window_last_date", "slot_time", "window_first_date", "window_start", "window_end"),
    )
    assert settings.execution_parameters(at("2026-11-22T00:00:00Z")) == [
        "'2013-11-21'",
        "'2013-11-22 00:00:00'",
        "'2013-11-21'",
        "'2013-11-21 00:00:00'",
        "'2013-11-22 00:00:00'",
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("10081", "must be from 0 to 10080 (minutes, 0: off; Athena's maximum is 7 days), got 10081"),
        ("-1", "must be from 0 to 10080"),
        ("1.5", "must be an integer from 0 to 10080"),
    ],
)
def test_result_reuse_age_is_checked_against_athenas_range(raw: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)) as caught:
        Settings.from_env(env(**{contract.ENV_RESULT_REUSE_MAX_AGE_MIN: raw}))
    assert caught.value.key == contract.ENV_RESULT_REUSE_MAX_AGE_MIN


def test_result_reuse_is_off_by_default() -> None:
    assert Settings.from_env(env(**{contract.ENV_RESULT_REUSE_MAX_AGE_MIN: None})).result_reuse_max_age_min == 0


# ---------------------------------------------------------------------------------------------------
# bounds of every number (issue rule 6): shared with the stack through contract.NUMERIC_BOUNDS
# ---------------------------------------------------------------------------------------------------

#: Every numeric variable and whether it is read as an integer (else: a float number of seconds).
NUMERIC = {
    contract.ENV_LEASE_DURATION_S: False,
    contract.ENV_HEARTBEAT_INTERVAL_S: False,
    contract.ENV_MAX_SLOT_AGE_S: False,
    contract.ENV_HISTORY_TTL_S: True,
    contract.ENV_MAX_QUERY_ATTEMPTS: True,
    contract.ENV_WINDOW_S: True,
    contract.ENV_DATA_YEAR: True,
    contract.ENV_RESULT_REUSE_MAX_AGE_MIN: True,
    contract.ENV_VALUE_METRIC_MAX_SERIES: True,
    contract.ENV_MAX_SLOT_LEAD_S: False,
    contract.ENV_ALARM_DATA_SCANNED_BYTES: True,
    contract.ENV_ALARM_QUERY_DURATION_MS: True,
    contract.ENV_CAPACITY_PERMITS: True,
    contract.ENV_CAPACITY_WAIT_IN_PLACE_S: False,
    contract.ENV_CAPACITY_MANUAL_HEADROOM: True,
    contract.ENV_CAPACITY_RETRY_DELAY_S: False,
    contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S: False,
}
TEXT = (
    contract.ENV_JOB_NAME,
    contract.ENV_LOCK_TABLE_NAME,
    contract.ENV_RESULTS_TABLE_NAME,
    contract.ENV_RESULTS_BUCKET_NAME,
    contract.ENV_ATHENA_WORKGROUP,
    contract.ENV_ATHENA_DATABASE,
    contract.ENV_ATHENA_CATALOG,
    contract.ENV_QUERY_SQL,
    contract.ENV_JOB_CATALOG_PATH,
    contract.ENV_VALUE_METRIC_COLUMNS,
    contract.ENV_VALUE_METRIC_DIMENSIONS,
    contract.ENV_CAPACITY_SEMAPHORE_NAME,
    contract.ENV_CAPACITY_TABLE_NAME,
    contract.ENV_DEFERRAL_ROLE_ARN,
    contract.ENV_DEFERRAL_SCHEDULE_GROUP,
    contract.ENV_DEFERRAL_SCHEDULE_PREFIX,
)


def _text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def bound_cases() -> list[Any]:
    """(variable, raw value, accepted?) at and around each variable's bounds, plus absurd values."""
    cases = []
    for key, integer in NUMERIC.items():
        lo, hi = contract.NUMERIC_BOUNDS[key]
        step = 1 if integer else 0.001
        for label, raw, accepted in [
            ("below-min", _text(round(lo - step, 3)), False),
            ("min", _text(lo), True),
            ("max", _text(hi), True),
            ("above-max", _text(round(hi + step, 3)), False),
            ("10e12", str(10**12), lo <= 10**12 <= hi),  # a byte threshold may be that large
            ("10e400", str(10**400), False),
            ("1e308", "1e308", False),
            ("inf", "inf", False),
        ]:
            cases.append(pytest.param(key, raw, accepted, id=f"{key}-{label}"))
    return cases


def with_partners(key: str, raw: str) -> dict[str, str]:
    """FULL_ENV with ``key`` set to ``raw``, and the lease/heartbeat partner chosen so that only ``key``'s own
    range decides (the heartbeat must stay below half the lease)."""
    if key == contract.ENV_LEASE_DURATION_S:
        return env(**{key: raw, contract.ENV_HEARTBEAT_INTERVAL_S: None})  # heartbeat: a third of the lease
    if key == contract.ENV_HEARTBEAT_INTERVAL_S:
        return env(**{key: raw, contract.ENV_LEASE_DURATION_S: _text(contract.MAX_LEASE_DURATION_S)})
    if key == contract.ENV_CAPACITY_MANUAL_HEADROOM:  # the headroom must stay below the permits
        return env(**{key: raw, contract.ENV_CAPACITY_PERMITS: _text(contract.MAX_CAPACITY_PERMITS)})
    if key == contract.ENV_CAPACITY_PERMITS:
        return env(**{key: raw, contract.ENV_CAPACITY_MANUAL_HEADROOM: "0"})
    return env(**{key: raw})


def test_every_variable_is_either_text_or_a_number_with_bounds() -> None:
    # GIVEN the contract's variables / WHEN classified / THEN each number has bounds, and nothing is left out
    assert set(NUMERIC) == set(contract.NUMERIC_BOUNDS)
    assert set(NUMERIC) | set(TEXT) == set(contract.ALL_ENV_VARS) and not set(NUMERIC) & set(TEXT)
    for key, (lo, hi) in contract.NUMERIC_BOUNDS.items():
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi, key


@pytest.mark.parametrize(("key", "raw", "accepted"), bound_cases())
def test_every_number_is_checked_against_both_of_its_bounds(key: str, raw: str, accepted: bool) -> None:
    # GIVEN a numeric variable at, just outside, or far outside its range
    environment = with_partners(key, raw)
    lo, hi = contract.NUMERIC_BOUNDS[key]

    if accepted:
        # WHEN it is at a bound / THEN it is read as that number
        settings = Settings.from_env(environment)
        holder = settings.capacity if key.startswith("CAPACITY_") else settings
        field = key.lower().removeprefix("capacity_") if key.startswith("CAPACITY_") else key.lower()
        expected = int(raw) if NUMERIC[key] else float(raw)
        if key == contract.ENV_CAPACITY_PERMITS and expected == 0:
            assert not settings.capacity.enabled  # 0: off
        else:
            assert getattr(holder, field) == expected
    else:
        # WHEN it is outside / THEN it is refused naming the variable, the allowed range and the value
        error = config_error(environment)
        assert error.key == key
        assert str(error).startswith(f"{key}: must be ")
        assert f"from {_text(lo)} to {_text(hi)}" in str(error)
        assert raw in str(error)


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_the_alarm_thresholds_are_off_unless_set(raw: str | None) -> None:
    # GIVEN / WHEN neither ALARM_* setting (a catalog written before them), or empty ones
    settings = Settings.from_env(
        env(**{contract.ENV_ALARM_DATA_SCANNED_BYTES: raw, contract.ENV_ALARM_QUERY_DURATION_MS: raw})
    )
    # THEN no threshold is compared with
    assert (settings.alarm_data_scanned_bytes, settings.alarm_query_duration_ms) == (None, None)


def test_the_largest_byte_threshold_is_read_exactly() -> None:
    # GIVEN / WHEN the largest byte threshold (int64's maximum minus one: below any workgroup cutoff)
    settings = Settings.from_env(env(**{contract.ENV_ALARM_DATA_SCANNED_BYTES: str(2**63 - 2)}))
    # THEN it is that integer, not a float rounded to 2**63
    assert settings.alarm_data_scanned_bytes == 2**63 - 2 and isinstance(settings.alarm_data_scanned_bytes, int)


def test_an_absurd_window_is_refused_with_the_range() -> None:
    # GIVEN / WHEN a window of 10**12 s (which would overflow the datetime arithmetic of every slot)
    error = config_error(env(**{contract.ENV_WINDOW_S: str(10**12)}))
    # THEN the message names the variable and the range
    assert str(error) == f"WINDOW_S: must be from 60 to {366 * 86400}, got 1000000000000"


@pytest.mark.parametrize("data_year", [None, str(contract.MIN_DATA_YEAR), str(contract.MAX_DATA_YEAR)])
@pytest.mark.parametrize("slot", ["1970-01-01T00:00:00Z", "2028-02-29T12:00:00Z", "9999-12-31T23:30:00Z"])
def test_the_longest_window_is_a_valid_timestamp_for_any_slot_year(data_year: str | None, slot: str) -> None:
    # GIVEN the longest window, with and without a data year at its bounds
    settings = Settings.from_env(
        env(**{contract.ENV_WINDOW_S: str(contract.MAX_WINDOW_S), contract.ENV_DATA_YEAR: data_year})
    )

    # WHEN a slot of an extreme year asks for its window
    start, end = settings.window(at(slot))
    parameters = settings.execution_parameters(at(slot))

    # THEN both ends are timestamps, a year and a day apart
    assert end - start == dt.timedelta(days=366)
    assert len(parameters) == 2 and all(len(value) == len("'1970-01-01 00:00:00'") for value in parameters)


@pytest.mark.parametrize(("raw", "expected"), [("0", 0.0), ("0.5", 0.5), ("5", 5.0), ("60", 60.0)])
def test_max_slot_lead_is_read_as_seconds(raw: str, expected: float) -> None:
    # GIVEN / WHEN the slot lead allowance is set (0: refuse any lead)
    settings = Settings.from_env(env(**{contract.ENV_MAX_SLOT_LEAD_S: raw}))
    # THEN it is a float number of seconds
    assert settings.max_slot_lead_s == expected and isinstance(settings.max_slot_lead_s, float)


@pytest.mark.parametrize("raw", ["-1", "61", "off", "nan"])
def test_max_slot_lead_outside_0_to_60_seconds_is_refused(raw: str) -> None:
    # GIVEN / WHEN a negative, too large, or non-numeric slot lead
    error = config_error(env(**{contract.ENV_MAX_SLOT_LEAD_S: raw}))
    # THEN the variable and its range are named
    assert error.key == contract.ENV_MAX_SLOT_LEAD_S
    assert "from 0 to 60" in str(error)
