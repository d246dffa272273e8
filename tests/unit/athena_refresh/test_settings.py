"""``Settings``: the wiring from the environment, the job from its ``JobSpec`` (the job catalog, or
``Settings.from_spec``), a local run's tuning, every rule, and the slot-to-window mapping.

A job's own settings are never read from text: their rules are those of the spec's construction
(``spec_of``/``JobSpec``, keyword arguments), tested here with the same expectations the environment variables had.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CatalogError, CatalogQuery, catalog_document, write_catalog
from athena_refresh.checks import ConfigError
from athena_refresh.errors import ConfigurationError
from athena_refresh.job_defaults import spec_of
from athena_refresh.jobspec import JobSpec, ValueMetricsSpec
from athena_refresh.permits import CapacitySettings
from athena_refresh.settings import DEFAULT_CATALOG, Settings
from slotlock import _dynamodb as slotlock_dynamodb

SQL = "SELECT origin, count(*) AS n FROM flights WHERE t >= CAST(? AS timestamp) AND t < CAST(? AS timestamp)"
JOB = "flights-dashboard"
#: The spec's required keys (every other key defaults as a job file's would: ``spec_of``).
REQUIRED_KEYS: dict[str, Any] = {
    "job_name": JOB,
    "schedule_expression": "cron(0/30 * * * ? *)",
    "database": "flights_demo",
    "table": "flights",
    "workgroup": "athena-refresh",
    "sql": SQL,
}
#: Every job setting, set to a valid non-default value.
FULL_SPEC = spec_of(
    **REQUIRED_KEYS,
    lease_duration_s=45,
    heartbeat_interval_s=15,
    max_slot_age_s=1800,
    history_ttl_s=2_592_000,
    max_query_attempts=4,
    window_s=86_400,
    data_year=2013,
    value_metrics=ValueMetricsSpec(columns=("n", "avg_delay"), dimensions=("origin",), max_series=20),
    result_reuse_max_age_min=90,
    max_slot_lead_s=3,
    bytes_scanned_cutoff_per_query=10_000_000_000,
    alarms={"data_scanned_bytes": 5_000_000_000, "query_duration_ms": 120_000},
)
#: The wiring (the capacity budget's too), as the stack sets it, beside the catalog (JOB_CATALOG_PATH: ``full_env``).
WIRING_ENV = {
    contract.ENV_JOB_NAME: JOB,
    contract.ENV_LOCK_TABLE_NAME: "locks-table",
    contract.ENV_RESULTS_TABLE_NAME: "results-table",
    contract.ENV_RESULTS_BUCKET_NAME: "results-bucket",
    contract.ENV_ATHENA_WORKGROUP: "athena-refresh",
    contract.ENV_ATHENA_DATABASE: "flights_demo",
    contract.ENV_ATHENA_CATALOG: "OtherCatalog",
    contract.ENV_CAPACITY_SEMAPHORE_NAME: "123456789012-eu-west-1",
    contract.ENV_CAPACITY_TABLE_NAME: "other-deployment-locks",
    contract.ENV_DEFERRAL_ROLE_ARN: "arn:aws:iam::123456789012:role/job-scheduler",
    contract.ENV_DEFERRAL_SCHEDULE_GROUP: "default",
    contract.ENV_DEFERRAL_SCHEDULE_PREFIX: "sar-0123456789ab-",
}
#: The capacity budget's numbers, as the stack writes them into the catalog (its ``capacity`` section).
BUDGET = CapacityBudget(permits=10, wait_in_place_s=45.5, manual_headroom=3, retry_delay_s=180, max_query_active_s=900)
REQUIRED = (
    contract.ENV_JOB_NAME,
    contract.ENV_LOCK_TABLE_NAME,
    contract.ENV_RESULTS_TABLE_NAME,
    contract.ENV_ATHENA_WORKGROUP,
    contract.ENV_ATHENA_DATABASE,
    contract.ENV_JOB_CATALOG_PATH,  # no catalog is bundled in the repository
)
OPTIONAL = tuple(name for name in contract.ALL_ENV_VARS if name not in REQUIRED)
#: The local tuning, set to valid values (the lease and heartbeat of the spec).
TUNING_ENV = {
    contract.ENV_LEASE_DURATION_S: "45",
    contract.ENV_HEARTBEAT_INTERVAL_S: "15",
    contract.ENV_MAX_SLOT_AGE_S: "1800",
}


def catalog_of(spec: JobSpec, directory: Path, capacity: CapacityBudget | None = None) -> Path:
    """The job catalog the stack would bundle for ``spec`` (its query bound to the window's start and end) and the
    deployment's ``capacity`` budget (``None``: no section)."""
    query = CatalogQuery(spec.sql, spec=spec)
    return write_catalog(directory / "job_catalog.json", {spec.job_name: query}, capacity=capacity)


@pytest.fixture(scope="module")
def full_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every variable the runtime reads, valid: the wiring, the budget, the tuning and the catalog of FULL_SPEC."""
    path = catalog_of(FULL_SPEC, tmp_path_factory.mktemp("catalog"), BUDGET)
    return {**WIRING_ENV, **TUNING_ENV, contract.ENV_JOB_CATALOG_PATH: str(path)}


@pytest.fixture
def env(full_env: dict[str, str]) -> Any:
    """``env(**changes)``: ``full_env`` with ``changes`` applied (``None`` removes the variable)."""

    def changed(**changes: str | None) -> dict[str, str]:
        result = dict(full_env)
        for key, value in changes.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = value
        return result

    return changed


def config_error(environment: dict[str, str]) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env(environment)
    return info.value


def spec_problem(**keys: Any) -> str:
    """The one problem of a spec built from REQUIRED_KEYS and ``keys`` (``spec_of``: the defaults derived)."""
    with pytest.raises(ConfigError) as info:
        spec_of(**{**REQUIRED_KEYS, **keys})
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


def of_spec(**keys: Any) -> Settings:
    """The settings of a spec built from REQUIRED_KEYS and ``keys``, wired to stand-in tables."""
    return Settings.from_spec(spec_of(**{**REQUIRED_KEYS, **keys}), lock_table_name="locks", results_table_name="r")


# ---------------------------------------------------------------------------------------------------
# happy paths
# ---------------------------------------------------------------------------------------------------


def test_from_env_reads_the_wiring_and_the_jobs_spec(full_env: dict[str, str]) -> None:
    # GIVEN every variable the runtime reads (the test's table covers them all) and the job's spec in the catalog
    assert set(full_env) == set(contract.ALL_ENV_VARS)

    # WHEN the settings are read
    settings = Settings.from_env(full_env)

    # THEN each variable and each key of the spec landed in its field, with its type
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
        racers=3,
        spec=FULL_SPEC,
    )
    assert isinstance(settings.history_ttl_s, int) and isinstance(settings.max_query_attempts, int)
    # AND from_spec with the same wiring builds the same settings (the tuning equal to the spec's)
    wired = Settings.from_spec(
        FULL_SPEC,
        lock_table_name="locks-table",
        results_table_name="results-table",
        results_bucket_name="results-bucket",
        athena_catalog="OtherCatalog",
        capacity=settings.capacity,
    )
    assert wired == settings


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch, full_env: dict[str, str]) -> None:
    # GIVEN the variables in the process environment
    for key, value in full_env.items():
        monkeypatch.setenv(key, value)

    # WHEN no mapping is passed
    settings = Settings.from_env()

    # THEN os.environ was read
    assert settings.lock_table_name == "locks-table" and settings.data_year == 2013


def test_optional_variables_and_keys_have_documented_defaults(tmp_path: Path) -> None:
    # GIVEN only the required variables, and a spec of only the required keys (a 30-minute schedule), in a catalog
    # without a capacity section
    spec = spec_of(**REQUIRED_KEYS)
    environment = {key: WIRING_ENV[key] for key in REQUIRED if key in WIRING_ENV}
    settings = Settings.from_env({**environment, contract.ENV_JOB_CATALOG_PATH: str(catalog_of(spec, tmp_path))})

    # THEN everything else takes its default: the wiring's, and the spec's (derived from the period as a job file's)
    assert settings.results_bucket_name is None
    assert settings.athena_catalog == DEFAULT_CATALOG == "AwsDataCatalog"
    assert settings.lease_duration_s == 45.0
    assert settings.heartbeat_interval_s == 15.0
    assert settings.max_slot_age_s == 1800.0  # one period
    assert settings.history_ttl_s == 30 * 24 * 3600
    assert settings.max_query_attempts == 3
    assert settings.window_s == 1800  # one period
    assert settings.data_year is None
    assert (
        settings.max_slot_lead_s == 5.0 == contract.DEFAULT_MAX_SLOT_LEAD_S == slotlock_dynamodb.DEFAULT_MAX_SLOT_LEAD_S
    )
    assert not settings.capacity.enabled  # no capacity section: the budget off
    assert settings.capacity == CapacitySettings.of(CapacityBudget(), WIRING_ENV) == CapacitySettings()


def test_the_default_heartbeat_is_derived_from_the_lease() -> None:
    # GIVEN a lease of 20 s and no heartbeat / WHEN the spec derives it / THEN it is below (20 - 5 s skew) / 2
    assert of_spec(lease_duration_s=20).heartbeat_interval_s == 7.0
    assert of_spec(lease_duration_s=54).heartbeat_interval_s == 15.0  # the built-in 15 s when it fits


@pytest.mark.parametrize("raw", ["none", "None", "off"])
def test_max_slot_age_can_be_turned_off(raw: str, env: Any) -> None:
    # GIVEN / WHEN a local run sets the maximum slot age to a word meaning "off"
    settings = Settings.from_env(env(**{contract.ENV_MAX_SLOT_AGE_S: raw}))
    # THEN deliveries of any age are accepted
    assert settings.max_slot_age_s is None


def test_values_are_stripped_and_blank_optionals_mean_default(env: Any) -> None:
    # GIVEN values with surrounding whitespace, and blank optional values (a blank job setting is no setting)
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
    # THEN values are stripped and blank optionals take their defaults (the data year: the spec's)
    assert settings.lock_table_name == "locks-table"
    assert settings.results_bucket_name is None
    assert settings.athena_catalog == DEFAULT_CATALOG
    assert settings.data_year == FULL_SPEC.data_year == 2013


# ---------------------------------------------------------------------------------------------------
# missing and invalid values: the error names the variable (or the spec's key)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", REQUIRED)
@pytest.mark.parametrize("value", [None, "", "   "], ids=["missing", "empty", "blank"])
def test_each_missing_required_variable_is_named(key: str, value: str | None, env: Any) -> None:
    # GIVEN a complete environment except one required variable
    # WHEN the settings are read
    if key == contract.ENV_JOB_CATALOG_PATH:  # no catalog: the bundled one is not in the repository
        with pytest.raises(ConfigurationError, match="job catalog .*job_catalog.json: not found") as info:
            Settings.from_env(env(**{key: value}))
        assert isinstance(info.value, ValueError)
        return
    error = config_error(env(**{key: value}))

    # THEN the error names that variable, in .key and in the message
    assert error.key == key
    assert str(error).startswith(f"{key}:")
    assert isinstance(error, ValueError)  # callers can also catch ValueError


@pytest.mark.parametrize("key", OPTIONAL)
def test_no_optional_variable_is_required(key: str, env: Any) -> None:
    # GIVEN a complete environment without one optional variable
    # WHEN / THEN the settings are read without error, with that field's default
    settings = Settings.from_env(env(**{key: None}))
    assert settings.job_name == WIRING_ENV[contract.ENV_JOB_NAME]


@pytest.mark.parametrize(
    "key", [name for name in (contract.ENV_QUERY_SQL, *contract.JOB_SETTING_ENV_VARS) if name not in TUNING_ENV]
)
def test_a_job_setting_in_the_environment_is_refused(key: str, env: Any) -> None:
    # GIVEN / WHEN a job setting (or the former inline query) set in the environment
    error = config_error(env(**{key: "1"}))
    # THEN it is refused naming the variable: the job's settings come from its spec only
    assert error.key == key
    assert "must not be set: the job's query and settings come from its spec in the job catalog" in str(error)


@pytest.mark.parametrize("key", contract.CAPACITY_SETTING_ENV_VARS)
def test_a_capacity_number_in_the_environment_is_refused(key: str, env: Any) -> None:
    # GIVEN / WHEN one of the budget's numbers set in the environment (as the stack set them before they moved into
    # the catalog) / THEN it is refused naming the variable and the catalog's section: the budget never silently
    # turns off
    error = config_error(env(**{key: "1"}))
    assert error.key == key
    assert "must not be set: the capacity budget's numbers come from the job catalog's capacity section" in str(error)


def test_a_catalog_entry_without_a_spec_is_refused(tmp_path: Path, env: Any) -> None:
    # GIVEN an entry holding only a query (the read side's shape) / WHEN the job reads it / THEN refused, naming it
    path = write_catalog(tmp_path / "c.json", {JOB: CatalogQuery(SQL)})
    with pytest.raises(ConfigurationError, match=f"jobs.{JOB}.spec: missing"):
        Settings.from_env(env(**{contract.ENV_JOB_CATALOG_PATH: str(path)}))


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (contract.ENV_LEASE_DURATION_S, "forty-five"),
        (contract.ENV_LEASE_DURATION_S, "45s"),
        (contract.ENV_HEARTBEAT_INTERVAL_S, "fast"),
        (contract.ENV_MAX_SLOT_AGE_S, "1h"),
    ],
)
def test_non_numeric_tuning_is_rejected(key: str, raw: str, env: Any) -> None:
    # GIVEN / WHEN a local run's tuning holds text that is not a number
    error = config_error(env(**{key: raw}))
    # THEN the variable is named, and the value quoted
    assert error.key == key
    assert repr(raw) in str(error)


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("history_ttl_s", "30d"),
        ("history_ttl_s", 60.5),  # integers only
        ("max_query_attempts", "three"),
        ("max_query_attempts", 2.5),
        ("window_s", "1 day"),
        ("data_year", "MMXIII"),
        ("data_year", 2013.0),
    ],
)
def test_non_integer_keys_are_rejected(key: str, raw: Any) -> None:
    # GIVEN / WHEN a job's number key holds something that is not an integer
    problem = spec_problem(**{key: raw})
    # THEN the key is named, and the value quoted
    assert problem.startswith(f"{key}: must be an integer")
    assert repr(raw) in problem


@pytest.mark.parametrize(
    "key", [contract.ENV_LEASE_DURATION_S, contract.ENV_HEARTBEAT_INTERVAL_S, contract.ENV_MAX_SLOT_AGE_S]
)
@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "infinity"])
def test_non_finite_numbers_are_rejected(key: str, raw: str, env: Any) -> None:
    # GIVEN a float that Python parses but that is no duration ("nan" compares false with everything,
    # so a minimum check alone lets it through to the lock, which rejects it with another error type)
    environment = env(**{key: raw})
    if key == contract.ENV_LEASE_DURATION_S:
        environment.pop(contract.ENV_HEARTBEAT_INTERVAL_S)  # let the heartbeat come from the spec

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
    ],
)
def test_negative_and_out_of_range_tuning_is_rejected(key: str, raw: str, env: Any) -> None:
    # GIVEN / WHEN a local run's tuning below its minimum / THEN the variable is named
    assert config_error(env(**{key: raw})).key == key


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("history_ttl_s", -1),
        ("history_ttl_s", 59),
        ("max_query_attempts", 0),
        ("max_query_attempts", -3),
        ("window_s", -86400),
        ("window_s", 59),
        ("data_year", -2013),
        ("data_year", 1899),
        ("data_year", 2101),
    ],
)
def test_negative_and_out_of_range_keys_are_rejected(key: str, raw: int) -> None:
    # GIVEN / WHEN a number below its minimum (or a year outside 1900..2100) / THEN the key is named
    assert spec_problem(**{key: raw}).startswith(f"{key}: must be an integer from ")


@pytest.mark.parametrize(("lease", "heartbeat"), [("45", "23"), ("44", "22"), ("40", "27"), ("30", "15")])
def test_heartbeat_must_be_below_half_the_lease(lease: str, heartbeat: str, env: Any) -> None:
    # GIVEN a local run's heartbeat of half the lease or more: one late heartbeat would lose the lease. The lock
    # (SlotLock) requires strictly less than half (a spec: less than (lease - skew) / 2), so the settings must too,
    # or a value accepted here fails later with a LockConfigurationError that names no variable.
    error = config_error(env(**{contract.ENV_LEASE_DURATION_S: lease, contract.ENV_HEARTBEAT_INTERVAL_S: heartbeat}))

    # THEN the heartbeat variable is named
    assert error.key == contract.ENV_HEARTBEAT_INTERVAL_S
    assert contract.ENV_LEASE_DURATION_S in str(error)
    # AND the same tuning through from_spec is refused the same way
    with pytest.raises(ConfigurationError) as info:
        Settings.from_spec(
            FULL_SPEC,
            lock_table_name="l",
            results_table_name="r",
            lease_duration_s=float(lease),
            heartbeat_interval_s=float(heartbeat),
        )
    assert info.value.key == contract.ENV_HEARTBEAT_INTERVAL_S


def test_heartbeat_just_below_half_the_lease_is_accepted(env: Any) -> None:
    # GIVEN / WHEN a heartbeat just below half the lease
    settings = Settings.from_env(
        env(**{contract.ENV_LEASE_DURATION_S: "30", contract.ENV_HEARTBEAT_INTERVAL_S: "14.9"})
    )
    # THEN it is accepted as is
    assert settings.heartbeat_interval_s == 14.9


@pytest.mark.parametrize("sql", ["", "   ", None], ids=["empty", "blank", "none"])
def test_sql_must_be_a_statement(sql: str | None) -> None:
    # GIVEN / WHEN a spec without SQL / THEN the key is named
    assert spec_problem(sql=sql).startswith("sql: must be a non-empty SQL statement")


@pytest.mark.parametrize("job_name", ["flights#dashboard", "j" * 65, "flights dashboard", "flights/x"])
def test_job_name_must_fit_the_lock_keys(job_name: str, env: Any) -> None:
    # GIVEN / WHEN a job name outside the one rule ('#' separates key parts; 64 characters at most)
    error = config_error(env(**{contract.ENV_JOB_NAME: job_name}))
    # THEN the variable is named (and the spec refuses the name too)
    assert error.key == contract.ENV_JOB_NAME
    assert spec_problem(job_name=job_name).startswith("job_name: must be ")


# ---------------------------------------------------------------------------------------------------
# the query window
# ---------------------------------------------------------------------------------------------------


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def test_data_year_maps_the_slot_onto_the_data_timeline() -> None:
    # GIVEN the demo's settings: a one-day window on the 2013 flights data
    settings = of_spec(data_year=2013, window_s=86400)

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
    settings = of_spec(data_year=2013, window_s=3600)

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
    settings = of_spec(data_year=2012, window_s=3600)
    # WHEN the leap-day slot asks for its window
    end = settings.window(at("2028-02-29T12:00:00Z"))[1]
    # THEN 29 February exists there and is kept
    assert end == dt.datetime(2012, 2, 29, 12, 0)


def test_without_data_year_the_window_ends_at_the_slot_in_utc() -> None:
    # GIVEN no data year: the query covers the slot's own time
    settings = of_spec(data_year=None, window_s=1800)

    # WHEN a time with a +01:00 offset and sub-second noise asks for its window
    start, end = settings.window(dt.datetime(2026, 11, 22, 1, 30, 0, 999, tzinfo=dt.timezone(dt.timedelta(hours=1))))

    # THEN the window is the same instant in naive UTC, whole seconds
    assert (start, end) == (dt.datetime(2026, 11, 22, 0, 0), dt.datetime(2026, 11, 22, 0, 30))


# the window's dates, for a partition filter ``dt BETWEEN :window_first_date AND :window_last_date``
# ---------------------------------------------------------------------------------------------------
def window_dates(slot: str, *, window_s: int, data_year: int | None = None) -> list[str]:
    """``window_first_date`` and ``window_last_date`` of the slot, as Athena receives them."""
    settings = of_spec(window_s=window_s, data_year=data_year)
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
        of_spec(window_s=1800, data_year=None), query_parameters=("window_first_date", "window_last_date")
    )
    slot = dt.datetime(2026, 11, 22, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert settings.execution_parameters(slot) == ["'2026-11-22'", "'2026-11-22'"]


def test_the_window_dates_follow_the_data_year() -> None:
    # GIVEN the demo's mapping onto 2013 (the sample's partitions are 2013-01-01..2014-01-01)
    assert window_dates("2026-11-22T00:30:00Z", window_s=86400, data_year=2013) == ["'2013-11-21'", "'2013-11-22'"]
    # and the leap day mapped onto 28 February 2013, a one-hour window
    assert window_dates("2028-02-29T12:00:00Z", window_s=3600, data_year=2013) == ["'2013-02-28'", "'2013-02-28'"]
    # and New Year's first half hour: the window starts in the previous year
    assert window_dates("2027-01-01T00:15:00Z", window_s=1800, data_year=2013) == ["'2012-12-31'", "'2013-01-01'"]


def test_every_built_in_parameter_is_bound_in_the_querys_order() -> None:
    settings = Settings.from_spec(
        spec_of(**REQUIRED_KEYS, window_s=86400, data_year=2013),
        lock_table_name="locks",
        results_table_name="results",
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
        (10081, "must be an integer from 0 to 10080 (minutes, 0: off; Athena's maximum is 7 days), got 10081"),
        (-1, "must be an integer from 0 to 10080"),
        (1.5, "must be an integer from 0 to 10080"),
    ],
)
def test_result_reuse_age_is_checked_against_athenas_range(raw: Any, message: str) -> None:
    problem = spec_problem(result_reuse_max_age_min=raw)
    assert problem.startswith("result_reuse_max_age_min: ")
    assert re.search(re.escape(message), problem)


def test_result_reuse_is_off_by_default() -> None:
    assert of_spec().result_reuse_max_age_min == 0


# ---------------------------------------------------------------------------------------------------
# bounds of every number (issue rule 6): shared with the stack through contract.NUMERIC_BOUNDS
# ---------------------------------------------------------------------------------------------------

#: The numbers read from the environment (a local run's tuning): whether each is an integer.
ENV_NUMERIC = {
    contract.ENV_LEASE_DURATION_S: False,
    contract.ENV_HEARTBEAT_INTERVAL_S: False,
    contract.ENV_MAX_SLOT_AGE_S: False,
}
#: The capacity budget's numbers (the catalog's ``capacity`` section), by the bound's name: (key, integer?).
CAPACITY_NUMERIC = {
    contract.ENV_CAPACITY_PERMITS: ("permits", True),
    contract.ENV_CAPACITY_WAIT_IN_PLACE_S: ("wait_in_place_s", False),
    contract.ENV_CAPACITY_MANUAL_HEADROOM: ("manual_headroom", True),
    contract.ENV_CAPACITY_RETRY_DELAY_S: ("retry_delay_s", False),
    contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S: ("max_query_active_s", False),
}
#: The job's numbers (the spec's keys, integers), by the bound's name in contract.NUMERIC_BOUNDS.
SPEC_NUMERIC = {
    contract.ENV_HISTORY_TTL_S: "history_ttl_s",
    contract.ENV_MAX_QUERY_ATTEMPTS: "max_query_attempts",
    contract.ENV_WINDOW_S: "window_s",
    contract.ENV_DATA_YEAR: "data_year",
    contract.ENV_RESULT_REUSE_MAX_AGE_MIN: "result_reuse_max_age_min",
    contract.ENV_VALUE_METRIC_MAX_SERIES: "value_metrics.max_series",
    contract.ENV_MAX_SLOT_LEAD_S: "max_slot_lead_s",
    contract.ENV_ALARM_DATA_SCANNED_BYTES: "alarms.data_scanned_bytes",
    contract.ENV_ALARM_QUERY_DURATION_MS: "alarms.query_duration_ms",
}
TEXT = (
    contract.ENV_JOB_NAME,
    contract.ENV_LOCK_TABLE_NAME,
    contract.ENV_RESULTS_TABLE_NAME,
    contract.ENV_RESULTS_BUCKET_NAME,
    contract.ENV_ATHENA_WORKGROUP,
    contract.ENV_ATHENA_DATABASE,
    contract.ENV_ATHENA_CATALOG,
    contract.ENV_JOB_CATALOG_PATH,
    contract.ENV_CAPACITY_SEMAPHORE_NAME,
    contract.ENV_CAPACITY_TABLE_NAME,
    contract.ENV_DEFERRAL_ROLE_ARN,
    contract.ENV_DEFERRAL_SCHEDULE_GROUP,
    contract.ENV_DEFERRAL_SCHEDULE_PREFIX,
)


def _text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _cases(bounds: dict[str, Any], integer: Any) -> list[tuple[str, str, Any, bool]]:
    cases = []
    for key in bounds:
        lo, hi = contract.NUMERIC_BOUNDS[key]
        step = 1 if integer(key) else 0.001
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
            cases.append((key, label, raw, accepted))
    return cases


def env_bound_cases() -> list[Any]:
    """(variable, raw value, accepted?) at and around each environment number's bounds, plus absurd values."""
    return [
        pytest.param(key, raw, accepted, id=f"{key}-{label}")
        for key, label, raw, accepted in _cases(ENV_NUMERIC, ENV_NUMERIC.__getitem__)
    ]


def spec_bound_cases() -> list[Any]:
    """(key, value, accepted?) at and around each spec number's bounds (the integers of the runtime's range)."""
    cases = []
    for variable, label, raw, accepted in _cases(SPEC_NUMERIC, lambda _: True):
        value = float(raw) if label in ("1e308", "inf") else int(raw)
        cases.append(pytest.param(variable, value, accepted, id=f"{SPEC_NUMERIC[variable]}-{label}"))
    return cases


def capacity_bound_cases() -> list[Any]:
    """(bound's name, value, accepted?) at and around each budget number's bounds, plus absurd values, as the
    catalog's JSON holds them (an integer where the text is one, else a float)."""
    cases = []
    for variable, label, raw, accepted in _cases(CAPACITY_NUMERIC, lambda key: CAPACITY_NUMERIC[key][1]):
        value = int(raw) if re.fullmatch(r"-?[0-9]+", raw) else float(raw)
        cases.append(pytest.param(variable, value, accepted, id=f"capacity.{CAPACITY_NUMERIC[variable][0]}-{label}"))
    return cases


def with_partners(key: str, raw: str, env: Any) -> dict[str, str]:
    """The full environment with ``key`` set to ``raw``, and the lease/heartbeat partner chosen so that only
    ``key``'s own range decides (the heartbeat must stay below half the lease)."""
    if key == contract.ENV_LEASE_DURATION_S:
        return env(**{key: raw, contract.ENV_HEARTBEAT_INTERVAL_S: "0.1"})
    if key == contract.ENV_HEARTBEAT_INTERVAL_S:
        return env(**{key: raw, contract.ENV_LEASE_DURATION_S: _text(contract.MAX_LEASE_DURATION_S)})
    return env(**{key: raw})


def budget_with(key: str, value: Any) -> dict[str, Any]:
    """BUDGET's section with ``key`` set to ``value``, the headroom/permits partner chosen so that only ``key``'s own
    range decides (the headroom must stay below the permits while the budget is on)."""
    section = BUDGET.as_raw()
    if key == "manual_headroom":
        section["permits"] = contract.MAX_CAPACITY_PERMITS
    if key == "permits":
        section["manual_headroom"] = 0
    return {**section, key: value}


def spec_keys(key: str, value: Any) -> dict[str, Any]:
    """The spec's keys with ``key`` (dotted: a sub key) set to ``value``, partners chosen so that only its own range
    decides (a byte threshold below the largest cutoff, value metrics on for their series cap)."""
    if key.startswith("alarms."):
        return {"alarms": {key.removeprefix("alarms."): value}, "bytes_scanned_cutoff_per_query": 2**63 - 1}
    if key == "value_metrics.max_series":
        return {"value_metrics": {"columns": ["n"], "max_series": value}}
    return {key: value}


def test_every_variable_is_either_text_or_a_number_with_bounds() -> None:
    # GIVEN the contract's variables / WHEN classified / THEN each number has bounds, and nothing is left out
    assert set(ENV_NUMERIC) | set(SPEC_NUMERIC) | set(CAPACITY_NUMERIC) == set(contract.NUMERIC_BOUNDS)
    assert set(ENV_NUMERIC) | set(TEXT) == set(contract.ALL_ENV_VARS) and not set(ENV_NUMERIC) & set(TEXT)
    assert not set(SPEC_NUMERIC) & set(contract.ALL_ENV_VARS)  # a job's numbers come from its spec only
    assert not set(CAPACITY_NUMERIC) & set(contract.ALL_ENV_VARS)  # the budget's from the catalog only
    assert set(CAPACITY_NUMERIC) == set(contract.CAPACITY_SETTING_ENV_VARS)
    for key, (lo, hi) in contract.NUMERIC_BOUNDS.items():
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi, key


@pytest.mark.parametrize(("key", "raw", "accepted"), env_bound_cases())
def test_every_environment_number_is_checked_against_both_of_its_bounds(
    key: str, raw: str, accepted: bool, env: Any
) -> None:
    # GIVEN a numeric variable at, just outside, or far outside its range
    environment = with_partners(key, raw, env)
    lo, hi = contract.NUMERIC_BOUNDS[key]

    if accepted:
        # WHEN it is at a bound / THEN it is read as that number
        settings = Settings.from_env(environment)
        expected = int(raw) if ENV_NUMERIC[key] else float(raw)
        assert getattr(settings, key.lower()) == expected
    else:
        # WHEN it is outside / THEN it is refused naming the variable, the allowed range and the value
        error = config_error(environment)
        assert error.key == key
        assert str(error).startswith(f"{key}: must be ")
        assert f"from {_text(lo)} to {_text(hi)}" in str(error)
        assert raw in str(error)


@pytest.mark.parametrize(("variable", "value", "accepted"), capacity_bound_cases())
def test_every_capacity_number_is_checked_against_both_of_its_bounds(
    variable: str, value: Any, accepted: bool, env: Any, tmp_path: Path
) -> None:
    # GIVEN the catalog's capacity section with one number at, just outside, or far outside its range
    key, integer = CAPACITY_NUMERIC[variable]
    lo, hi = contract.NUMERIC_BOUNDS[variable]
    document = catalog_document({JOB: CatalogQuery(SQL, spec=FULL_SPEC)}, capacity=BUDGET)
    document["capacity"] = budget_with(key, value)
    path = tmp_path / "job_catalog.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    environment = env(**{contract.ENV_JOB_CATALOG_PATH: str(path)})

    if accepted:
        # WHEN it is at a bound / THEN the budget holds that number (0 permits: the budget off)
        settings = Settings.from_env(environment)
        if key == "permits" and value == 0:
            assert not settings.capacity.enabled  # 0: off
        else:
            assert getattr(settings.capacity, key) == (int(value) if integer else float(value))
            assert type(getattr(settings.capacity, key)) is (int if integer else float)
    else:
        # WHEN it is outside / THEN the catalog is refused naming the key, the allowed range and the value
        with pytest.raises(CatalogError) as info:
            Settings.from_env(environment)
        assert f"capacity.{key}: must be " in str(info.value)
        assert f"from {_text(lo)} to {_text(hi)}" in str(info.value)
        assert repr(value) in str(info.value)


@pytest.mark.parametrize(("variable", "value", "accepted"), spec_bound_cases())
def test_every_spec_number_is_checked_against_both_of_its_bounds(variable: str, value: Any, accepted: bool) -> None:
    # GIVEN a job's number key at, just outside, or far outside its range (the bounds the runtime shares with synth)
    key = SPEC_NUMERIC[variable]
    lo, hi = contract.NUMERIC_BOUNDS[variable]

    if accepted:
        # WHEN it is at a bound / THEN the settings hold that number
        settings = of_spec(**spec_keys(key, value))
        field = {"value_metrics.max_series": "value_metric_max_series"}.get(key, key.replace("alarms.", "alarm_"))
        assert getattr(settings, field) == value
    else:
        # WHEN it is outside / THEN it is refused naming the key, the allowed range and the value
        problem = spec_problem(**spec_keys(key, value))
        assert problem.startswith(f"{key}: must be ")
        assert f"from {math.ceil(lo)} to {math.floor(hi)}" in problem
        assert repr(value) in problem


def test_the_alarm_thresholds_are_off_unless_set(env: Any) -> None:
    # GIVEN settings constructed without a spec (the job's unit tests) / THEN no threshold is compared with
    settings = of_spec()
    bare = dataclasses.replace(settings, spec=None, alarm_data_scanned_bytes=None, alarm_query_duration_ms=None)
    assert Settings(**{f.name: getattr(bare, f.name) for f in dataclasses.fields(Settings)}) == bare
    assert (bare.alarm_data_scanned_bytes, bare.alarm_query_duration_ms) == (None, None)
    # AND a spec always has them (derived: 80% of the cutoff and of the timeout); blank variables change nothing
    for raw in ("", "  "):
        read = Settings.from_env(
            env(**{contract.ENV_ALARM_DATA_SCANNED_BYTES: raw, contract.ENV_ALARM_QUERY_DURATION_MS: raw})
        )
        assert (read.alarm_data_scanned_bytes, read.alarm_query_duration_ms) == (5_000_000_000, 120_000)
    assert (settings.alarm_data_scanned_bytes, settings.alarm_query_duration_ms) == (800_000_000, 720_000)


def test_the_largest_byte_threshold_is_read_exactly() -> None:
    # GIVEN / WHEN the largest byte threshold (int64's maximum minus one: below any workgroup cutoff)
    settings = of_spec(alarms={"data_scanned_bytes": 2**63 - 2}, bytes_scanned_cutoff_per_query=2**63 - 1)
    # THEN it is that integer, not a float rounded to 2**63
    assert settings.alarm_data_scanned_bytes == 2**63 - 2 and isinstance(settings.alarm_data_scanned_bytes, int)


def test_an_absurd_window_is_refused_with_the_range() -> None:
    # GIVEN / WHEN a window of 10**12 s (which would overflow the datetime arithmetic of every slot)
    # THEN the message names the key and the range
    assert spec_problem(window_s=10**12) == f"window_s: must be an integer from 60 to {366 * 86400}, got 1000000000000"


@pytest.mark.parametrize("data_year", [None, contract.MIN_DATA_YEAR, contract.MAX_DATA_YEAR])
@pytest.mark.parametrize("slot", ["1970-01-01T00:00:00Z", "2028-02-29T12:00:00Z", "9999-12-31T23:30:00Z"])
def test_the_longest_window_is_a_valid_timestamp_for_any_slot_year(data_year: int | None, slot: str) -> None:
    # GIVEN the longest window, with and without a data year at its bounds
    settings = of_spec(window_s=contract.MAX_WINDOW_S, data_year=data_year)

    # WHEN a slot of an extreme year asks for its window
    start, end = settings.window(at(slot))
    parameters = settings.execution_parameters(at(slot))

    # THEN both ends are timestamps, a year and a day apart
    assert end - start == dt.timedelta(days=366)
    assert len(parameters) == 2 and all(len(value) == len("'1970-01-01 00:00:00'") for value in parameters)


@pytest.mark.parametrize(("raw", "expected"), [(0, 0.0), (5, 5.0), (60, 60.0)])
def test_max_slot_lead_is_read_as_seconds(raw: int, expected: float) -> None:
    # GIVEN / WHEN the slot lead allowance is set (0: refuse any lead; whole seconds, as every job key)
    settings = of_spec(max_slot_lead_s=raw)
    # THEN it is a float number of seconds
    assert settings.max_slot_lead_s == expected and isinstance(settings.max_slot_lead_s, float)


@pytest.mark.parametrize("raw", [-1, 61, "off", math.nan, 0.5])
def test_max_slot_lead_outside_0_to_60_seconds_is_refused(raw: Any) -> None:
    # GIVEN / WHEN a negative, too large, fractional or non-numeric slot lead
    problem = spec_problem(max_slot_lead_s=raw)
    # THEN the key and its range are named
    assert problem.startswith("max_slot_lead_s: ")
    assert "from 0 to 60" in problem
