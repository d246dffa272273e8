"""athena_refresh.catalog and its use by Settings: the job's query from the bundled catalog, validated at
cold start; named parameters bound in order, constants as written."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import (
    MAX_PARAMETERS,
    CatalogError,
    CatalogQuery,
    CatalogSchedule,
    catalog_document,
    load_catalog,
    load_job,
    load_query,
    parse_entry,
    write_catalog,
)
from athena_refresh.checks import ConfigError
from athena_refresh.errors import ConfigurationError
from athena_refresh.job_defaults import spec_of
from athena_refresh.jobspec import as_raw
from athena_refresh.settings import Settings

JOB = "carrier-on-time"
SQL = "SELECT carrier FROM flights WHERE t >= CAST(? AS timestamp) AND t < CAST(? AS timestamp) AND d <= ? OR s = ?"
ENTRY = {
    "sql": SQL,
    "parameters": ["window_start", "window_end", "delay_min", "window_start"],
    "constants": {"delay_min": "15"},
}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "job_catalog.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def test_a_written_catalog_reads_back_as_the_same_query(tmp_path: Path) -> None:
    query = CatalogQuery(sql=SQL, parameters=tuple(ENTRY["parameters"]), constants={"delay_min": "15"})
    path = write(tmp_path, catalog_document({JOB: query, "other": CatalogQuery("SELECT 1 AS a", ())}))
    loaded = load_query(JOB, path)
    assert (loaded.sql, loaded.parameters, dict(loaded.constants)) == (SQL, query.parameters, {"delay_min": "15"})


def test_settings_bind_each_named_parameter_in_order_with_constants_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry(window_s=3600)}})
    settings = Settings.from_env(ENV_WIRING, catalog_path=path)
    assert settings.query_sql == SQL
    scheduled = dt.datetime(2026, 11, 24, 6, 15, tzinfo=dt.UTC)
    assert settings.execution_parameters(scheduled) == [
        "'2026-11-24 05:15:00'",
        "'2026-11-24 06:15:00'",
        "15",
        "'2026-11-24 05:15:00'",
    ]


def test_slot_time_is_the_windows_end_on_the_datas_timeline(tmp_path: Path) -> None:
    entry = {**spec_entry(sql="SELECT ? AS t", data_year=2013), "parameters": ["slot_time"], "constants": {}}
    settings = Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))
    assert settings.execution_parameters(dt.datetime(2026, 11, 24, 6, 15, tzinfo=dt.UTC)) == ["'2013-11-24 06:15:00'"]


def test_the_window_dates_are_built_in_and_bound_on_the_datas_timeline(tmp_path: Path) -> None:
    entry = {
        **spec_entry(sql="SELECT 1 AS a FROM t WHERE dt BETWEEN ? AND ?", data_year=2013, window_s=3600),
        "parameters": ["window_first_date", "window_last_date"],
        "constants": {},
    }
    settings = Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))
    # the one-hour window [2013-11-24 00:00, 01:00) ends within its day
    assert settings.execution_parameters(dt.datetime(2026, 11, 24, 1, 0, tzinfo=dt.UTC)) == ["'2013-11-24'"] * 2


def test_the_catalog_path_may_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry()}})
    settings = Settings.from_env({**ENV_WIRING, contract.ENV_JOB_CATALOG_PATH: str(path)})
    assert settings.query_parameters == tuple(ENTRY["parameters"])


def test_a_catalog_and_an_inline_query_together_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry()}})
    with pytest.raises(ConfigurationError, match="QUERY_SQL: must not be set"):
        Settings.from_env({**ENV_WIRING, contract.ENV_QUERY_SQL: SQL}, catalog_path=path)


def test_without_a_catalog_the_cold_start_names_the_missing_catalog() -> None:
    # GIVEN no catalog (none is bundled in the repository) / WHEN the settings are read / THEN the catalog is named;
    # the former inline query (QUERY_SQL) is no longer read: the job's settings come from its spec only
    with pytest.raises(CatalogError, match="job_catalog.json: not found"):
        Settings.from_env(ENV_WIRING)
    with pytest.raises(ConfigurationError, match="QUERY_SQL: must not be set") as caught:
        Settings.from_env({**ENV_WIRING, contract.ENV_QUERY_SQL: "SELECT 1 AS a FROM t WHERE x >= ? AND x < ?"})
    assert caught.value.key == contract.ENV_QUERY_SQL


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("{not json", "cannot be read as JSON"),
        ({"format": 3, "jobs": {}}, "format 2"),
        ({"format": 1}, "must hold a 'jobs' object"),
        ({"format": 1, "jobs": {"other": ENTRY}}, "holds no job 'carrier-on-time' \\(jobs: other\\)"),
        ({"format": 1, "jobs": {JOB: "SELECT 1"}}, "must be an object"),
        ({"format": 1, "jobs": {JOB: {**ENTRY, "sql": " "}}}, r"jobs.carrier-on-time.sql: must be a non-empty"),
        ({"format": 1, "jobs": {JOB: {**ENTRY, "parameters": "window_start"}}}, "must be a list"),
        ({"format": 1, "jobs": {JOB: {**ENTRY, "constants": {"delay_min": 15}}}}, "SQL literal text"),
        (
            {"format": 1, "jobs": {JOB: {**ENTRY, "parameters": ["window_start", "carrier"]}}},
            "carrier neither built in nor among the constants",
        ),
        (
            {"format": 1, "jobs": {JOB: {**ENTRY, "parameters": ["window_start"] * (MAX_PARAMETERS + 1)}}},
            "at most 25",
        ),
    ],
)
def test_a_broken_catalog_fails_the_cold_start_naming_what_is_wrong(
    tmp_path: Path, document: Any, expected: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(CatalogError, match=expected) as caught:
        Settings.from_env(ENV_WIRING, catalog_path=path)
    assert caught.value.path == str(path)


def test_a_missing_catalog_is_named(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not found"):
        load_query(JOB, tmp_path / "absent.json")


def test_an_entry_under_an_invalid_job_name_is_refused() -> None:
    with pytest.raises(CatalogError, match="job name must be"):
        parse_entry("bad name!", ENTRY)


def spec_entry(**keys: Any) -> dict[str, Any]:
    """A catalog entry as the stack writes it: the query's binding and the job's spec as typed JSON."""
    required = {"schedule_expression": "cron(0/30 * * * ? *)", "database": "db", "table": "flights", "sql": SQL}
    spec = spec_of(**{"job_name": JOB, "workgroup": "wg", **required, **keys})
    return {"parameters": ENTRY["parameters"], "constants": ENTRY["constants"], "spec": as_raw(spec)}


def test_the_jobs_settings_come_from_the_catalog_and_the_environment_overrides_them(tmp_path: Path) -> None:
    # GIVEN the deployed shape: the environment wires the function, the catalog carries the job's spec
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry(lease_duration_s=50, window_s=7200)}})
    settings = Settings.from_env(ENV_WIRING, catalog_path=path)
    assert (settings.lease_duration_s, settings.window_s) == (50.0, 7200)
    assert settings.spec is not None and settings.spec.window_s == 7200  # the same JobSpec, typed
    # a local tool shortens the lease (and its heartbeat) with environment variables of the same name
    tuned = {**ENV_WIRING, contract.ENV_LEASE_DURATION_S: "4", contract.ENV_HEARTBEAT_INTERVAL_S: "1"}
    assert Settings.from_env(tuned, catalog_path=path).lease_duration_s == 4.0


def test_a_job_setting_in_the_environment_beside_a_spec_is_refused(tmp_path: Path) -> None:
    # GIVEN a catalog with the job's spec / WHEN the environment also sets a job setting other than local tuning
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry()}})
    with pytest.raises(
        ConfigurationError, match="must not be set: the job's query and settings come from its spec"
    ) as caught:
        Settings.from_env({**ENV_WIRING, contract.ENV_WINDOW_S: "3600"}, catalog_path=path)
    # THEN it is refused naming the variable: the environment carries the wiring only
    assert caught.value.key == contract.ENV_WINDOW_S


def test_a_catalog_setting_out_of_range_is_refused_like_a_variable(tmp_path: Path) -> None:
    entry = spec_entry()
    entry["spec"]["window_s"] = 10
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))
    assert str(caught.value).endswith(
        "jobs.carrier-on-time.spec.window_s: must be an integer from 60 to 31622400, got 10"
    )


def test_a_catalog_setting_the_runtime_does_not_know_is_refused(tmp_path: Path) -> None:
    entry = spec_entry()
    entry["spec"]["lock_table_name"] = "elsewhere"  # wiring belongs in the environment
    with pytest.raises(CatalogError, match="spec.lock_table_name: unknown key"):
        Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))


def test_the_spec_in_the_catalog_runs_every_rule_again(tmp_path: Path) -> None:
    # GIVEN a spec whose heartbeat breaks the lease rule (edited after synth) / WHEN read / THEN refused, naming it
    entry = spec_entry()
    entry["spec"]["heartbeat_interval_s"] = 25
    with pytest.raises(CatalogError, match=r"spec.heartbeat_interval_s: must be below \(lease_duration_s - 5 s"):
        Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))


def test_a_catalog_written_with_settings_text_is_refused_naming_the_rebuild(tmp_path: Path) -> None:
    # GIVEN a catalog entry of format 1, its settings as environment-variable text (before the typed spec)
    entry = {**ENTRY, "settings": {contract.ENV_LEASE_DURATION_S: "50", contract.ENV_WINDOW_S: "7200"}}
    path = write(tmp_path, {"format": 1, "jobs": {JOB: entry}})

    # WHEN the function reads its settings / THEN it refuses it, saying why and what to do
    with pytest.raises(CatalogError, match="no longer read; this code reads the job's typed spec .format 2.: rebuild"):
        Settings.from_env(ENV_WIRING, catalog_path=path)


def test_the_alarm_thresholds_come_from_the_catalog(tmp_path: Path) -> None:
    # GIVEN the stack's catalog: the job's [alarms] thresholds in its spec
    alarms = {"data_scanned_bytes": 5_000_000_000, "query_duration_ms": 120_000}
    entry = spec_entry(alarms=alarms, bytes_scanned_cutoff_per_query=10_000_000_000)
    path = write(tmp_path, {"format": 2, "jobs": {JOB: entry}})

    # WHEN / THEN the runtime reads them as integers (bytes, milliseconds)
    settings = Settings.from_env(ENV_WIRING, catalog_path=path)
    assert (settings.alarm_data_scanned_bytes, settings.alarm_query_duration_ms) == (5_000_000_000, 120_000)
    # AND one out of its range is refused naming it, like any setting
    entry["spec"]["alarms"]["query_duration_ms"] = 0
    with pytest.raises(ConfigurationError, match="spec.alarms.query_duration_ms: must be an integer from 1"):
        Settings.from_env(ENV_WIRING, catalog_path=write(tmp_path, {"format": 2, "jobs": {JOB: entry}}))


ENV_WIRING = {
    contract.ENV_JOB_NAME: JOB,
    contract.ENV_LOCK_TABLE_NAME: "locks",
    contract.ENV_RESULTS_TABLE_NAME: "results",
    contract.ENV_ATHENA_WORKGROUP: "wg",
    contract.ENV_ATHENA_DATABASE: "db",
}


# ---------------------------------------------------------------------------------------------------
# load_catalog: every job, with its deployed schedule (the read side's catalog)
# ---------------------------------------------------------------------------------------------------
def test_load_catalog_reads_back_every_job_with_its_schedule(tmp_path: Path) -> None:
    # GIVEN a catalog written as the stack writes it: jobs with and without a schedule
    queries = {
        "zz-last": CatalogQuery("SELECT 1 AS a", (), schedule=CatalogSchedule("cron(0/30 * * * ? *)")),
        JOB: CatalogQuery(
            sql=SQL,
            parameters=tuple(ENTRY["parameters"]),
            constants={"delay_min": "15"},
            spec=spec_of(
                job_name=JOB,
                schedule_expression="cron(0 6 * * ? *)",
                schedule_timezone="America/New_York",
                racers=3,
                database="db",
                table="flights",
                workgroup="wg",
                sql=SQL,
                window_s=7200,
            ),
            schedule=CatalogSchedule("cron(0 6 * * ? *)", "America/New_York", 3),
        ),
        "no-schedule": CatalogQuery("SELECT 2 AS b", ()),
    }
    document = catalog_document(queries)
    assert document["jobs"][JOB]["schedule"] == {
        "expression": "cron(0 6 * * ? *)",
        "timezone": "America/New_York",
        "racers": 3,
    }
    assert "schedule" not in document["jobs"]["no-schedule"]  # as catalogs written before schedules

    # WHEN it is loaded
    loaded = load_catalog(write(tmp_path, document))

    # THEN every job comes back equal, by name, schedules included (defaults: UTC, one racer)
    assert list(loaded) == sorted(queries)
    assert loaded == queries
    assert loaded["zz-last"].schedule == CatalogSchedule("cron(0/30 * * * ? *)", "UTC", 1)
    assert loaded["no-schedule"].schedule is None
    assert loaded[JOB].schedule is not None and loaded[JOB].schedule.as_dict() == document["jobs"][JOB]["schedule"]
    # AND written again, it is the same document
    assert catalog_document(loaded) == document


def test_a_schedule_entry_takes_its_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, {"format": 1, "jobs": {JOB: {**ENTRY, "schedule": {"expression": "cron(0 * * * ? *)"}}}})
    assert load_catalog(path)[JOB].schedule == CatalogSchedule("cron(0 * * * ? *)", "UTC", 1)
    assert load_query(JOB, path).schedule == CatalogSchedule("cron(0 * * * ? *)", "UTC", 1)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("cron(0 6 * * ? *)", r"jobs.carrier-on-time.schedule: must be an object"),
        ([], r"jobs.carrier-on-time.schedule: must be an object"),
        ({}, r"jobs.carrier-on-time.schedule.expression: must be a cron\(...\) expression, got None"),
        ({"expression": 5}, r"schedule.expression: must be a cron\(...\) expression, got 5"),
        ({"expression": "rate(5 minutes)"}, r"schedule.expression: must be a cron\(...\) expression, got 'rate"),
        ({"expression": "cron(0 6 * * ? *)", "timezone": ""}, r"schedule.timezone: must be an IANA time zone name"),
        (
            {"expression": "cron(0 6 * * ? *)", "timezone": 5},
            r"schedule.timezone: must be an IANA time zone name, got 5",
        ),
        ({"expression": "cron(0 6 * * ? *)", "racers": 0}, r"schedule.racers: must be a positive integer, got 0"),
        ({"expression": "cron(0 6 * * ? *)", "racers": -1}, r"schedule.racers: must be a positive integer"),
        ({"expression": "cron(0 6 * * ? *)", "racers": True}, r"schedule.racers: must be a positive integer, got True"),
        ({"expression": "cron(0 6 * * ? *)", "racers": "3"}, r"schedule.racers: must be a positive integer, got '3'"),
        ({"expression": "cron(0 6 * * ? *)", "racers": 1.5}, r"schedule.racers: must be a positive integer, got 1.5"),
        ({"expression": "x" * 10_000}, r"got 'x{70}"),  # the value is quoted, bounded
    ],
)
def test_a_bad_schedule_entry_is_named(tmp_path: Path, schedule: Any, expected: str) -> None:
    path = write(
        tmp_path, {"format": 1, "jobs": {"a-good-one": {"sql": "SELECT 1"}, JOB: {**ENTRY, "schedule": schedule}}}
    )
    with pytest.raises(CatalogError, match=expected) as caught:
        load_catalog(path)
    assert caught.value.path == str(path) and len(str(caught.value)) < 400


def test_the_catalog_checks_a_schedules_shape_not_its_meaning(tmp_path: Path) -> None:
    # The stack validated the expression and the zone at synth; the catalog only checks the shape. A schedule that
    # cannot be evaluated loads (the read API then treats its next slot as unknown: Cache-Control no-cache).
    schedule = {"expression": "cron(not a cron)", "timezone": "Mars/Olympus", "racers": 2}
    path = write(tmp_path, {"format": 1, "jobs": {JOB: {**ENTRY, "schedule": schedule}}})
    assert load_catalog(path)[JOB].schedule == CatalogSchedule("cron(not a cron)", "Mars/Olympus", 2)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("{not json", "cannot be read as JSON"),
        ("[]", "must be an object with format 2"),
        ({"format": 1, "jobs": []}, "must hold a 'jobs' object"),
        (
            {"format": 1, "jobs": {"ok": {"sql": "SELECT 1"}, "bad name": {"sql": "SELECT 1"}}},
            "jobs.bad name: the job name",
        ),
        ({"format": 1, "jobs": {"ok": {"sql": "SELECT 1"}, "b": {"sql": ""}}}, r"jobs.b.sql: must be a non-empty"),
    ],
)
def test_load_catalog_names_what_is_wrong(tmp_path: Path, document: Any, expected: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(CatalogError, match=expected):
        load_catalog(path)


def test_load_catalog_of_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not found"):
        load_catalog(tmp_path / "absent.json")
    assert load_catalog(write(tmp_path, {"format": 1, "jobs": {}})) == {}


# ---------------------------------------------------------------------------------------------------
# the deployment's capacity budget: the catalog's ``capacity`` section, typed JSON (athena_refresh.budget)
# ---------------------------------------------------------------------------------------------------

BUDGET = CapacityBudget(permits=10, wait_in_place_s=60, manual_headroom=2, retry_delay_s=120, max_query_active_s=1800)


def test_the_capacity_budget_is_written_as_typed_json_and_read_back_as_the_same_budget(tmp_path: Path) -> None:
    # GIVEN a catalog written with the deployment's budget (as the stack writes every job's)
    query = CatalogQuery(sql=SQL, parameters=tuple(ENTRY["parameters"]), constants={"delay_min": "15"})
    path = write_catalog(tmp_path / "job_catalog.json", {JOB: query}, capacity=BUDGET)
    # THEN the section holds every number as JSON numbers (seconds as floats), and loads back into the same budget
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["capacity"] == {
        "permits": 10,
        "wait_in_place_s": 60.0,
        "manual_headroom": 2,
        "retry_delay_s": 120.0,
        "max_query_active_s": 1800.0,
    }
    loaded, budget = load_job(JOB, path)
    assert budget == BUDGET and budget.enabled and loaded.sql == SQL
    assert CapacityBudget.from_raw(BUDGET.as_raw()) == BUDGET
    # AND the read side's loader reads the same catalog (it takes no permit)
    assert set(load_catalog(path)) == {JOB}


def test_a_catalog_without_a_capacity_section_loads_with_the_budget_off(tmp_path: Path) -> None:
    # GIVEN a catalog without the section (the read side's, a fixture's, one written before the budget moved here)
    path = write(tmp_path, {"format": 2, "jobs": {JOB: spec_entry()}})
    # WHEN the job reads it / THEN the budget is off: CapacityBudget() (permits 0), as documented
    _, budget = load_job(JOB, path)
    assert budget == CapacityBudget() and not budget.enabled and budget.permits == 0
    assert not Settings.from_env(ENV_WIRING, catalog_path=path).capacity.enabled
    assert "capacity" not in catalog_document({JOB: CatalogQuery(SQL, ())})  # written without one: none


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ([10], "capacity: must be an object with keys permits, wait_in_place_s"),
        ({**BUDGET.as_raw(), "permits": 100}, "capacity.permits: must be an integer from 0 to 99 (0: off), got 100"),
        ({**BUDGET.as_raw(), "permits": "10"}, "capacity.permits: must be an integer from 0 to 99 (0: off), got '10'"),
        ({**BUDGET.as_raw(), "wait_in_place_s": True}, "capacity.wait_in_place_s: must be a number from 0 to 900"),
        ({**BUDGET.as_raw(), "retry_delay_s": 59.5}, "capacity.retry_delay_s: must be a number from 60 to 3600"),
        ({**BUDGET.as_raw(), "manual_headroom": 10}, "capacity.manual_headroom: must be below permits (10)"),
        ({**BUDGET.as_raw(), "burst": 3}, "capacity.burst: unknown key; allowed keys: permits, wait_in_place_s"),
        (
            {k: v for k, v in BUDGET.as_raw().items() if k != "max_query_active_s"},
            "capacity.max_query_active_s: missing; required",
        ),
    ],
)
def test_a_broken_capacity_section_is_refused_naming_the_key(tmp_path: Path, section: Any, expected: str) -> None:
    # GIVEN / WHEN a catalog whose capacity section breaks a rule of the budget / THEN the cold start is refused,
    # naming the catalog, the key and what is allowed (the same rules as at synth)
    path = write(tmp_path, {"format": 2, "capacity": section, "jobs": {JOB: spec_entry()}})
    for load in (lambda: load_job(JOB, path), lambda: load_catalog(path)):
        with pytest.raises(CatalogError) as info:
            load()
        assert str(info.value).startswith(f"job catalog {path}: ") and expected in str(info.value)


def test_the_budget_constructed_from_keyword_arguments_runs_the_same_rules() -> None:
    # GIVEN / WHEN a budget built in a test with a broken headroom and an absurd wait / THEN both problems are named
    with pytest.raises(ConfigError) as info:
        CapacityBudget(permits=3, manual_headroom=3, wait_in_place_s=float("nan"))
    assert [problem.split(":")[0] for problem in info.value.problems] == [
        "capacity.wait_in_place_s",
        "capacity.manual_headroom",
    ]
    assert CapacityBudget(permits=0, manual_headroom=5).manual_headroom == 5  # off: no rule between them
