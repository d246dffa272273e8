"""Result values as metrics: settings, the exact EMF shape, the cap, and "only after a successful commit".

EMF blobs are read from stdout (capsys): Powertools prints one JSON line per blob, which is what
CloudWatch Logs turns into metrics in Lambda.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.checks import ConfigError
from athena_refresh.engine import Column, QueryResult
from athena_refresh.job_defaults import spec_of
from athena_refresh.settings import Settings
from athena_refresh.values import MAX_TIMESTAMP_AGE_MS, ValuePublisher
from slotlock import Lease, Slot

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

JOB = "flights-dashboard"
SLOT_MS = 1_795_307_400_000  # 2026-11-22T00:30:00Z
#: The spec's required keys (every other key defaults: ``spec_of``).
REQUIRED_KEYS: dict[str, Any] = {
    "job_name": JOB,
    "schedule_expression": "cron(0/30 * * * ? *)",
    "database": "db",
    "table": "t",
    "workgroup": "wg",
    "sql": "SELECT 1 FROM t WHERE a >= ? AND a < ?",
}
COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("avg_dep_delay_min", "double"))


def settings_from(**keys: Any) -> Settings:
    """The settings of the job's spec with ``keys`` (``value_metrics``: a mapping of its keys, as a job file's)."""
    spec = spec_of(**{**REQUIRED_KEYS, **keys})
    return Settings.from_spec(spec, lock_table_name="locks", results_table_name="results")


def config_error(**keys: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        settings_from(**keys)
    return info.value


def blobs(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """Every EMF blob printed so far."""
    lines = capsys.readouterr().out.splitlines()
    return [blob for blob in (json.loads(line) for line in lines if line.startswith("{")) if "_aws" in blob]


def shape(blob: dict[str, Any]) -> tuple[str, list[list[str]], dict[str, str], dict[str, Any]]:
    """(namespace, dimension arrays, dimension values, metric values) of one EMF blob."""
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    names = [m["Name"] for m in directive["Metrics"]]
    dims = [d for array in directive["Dimensions"] for d in array]
    return directive["Namespace"], directive["Dimensions"], {d: blob[d] for d in dims}, {n: blob[n] for n in names}


@pytest.fixture
def publisher() -> Callable[..., ValuePublisher]:
    def make(**overrides: Any) -> ValuePublisher:
        params: dict[str, Any] = {
            "job_name": JOB,
            "value_columns": ("flights", "avg_dep_delay_min"),
            "dimension_columns": ("origin",),
            "max_series": 10,
        }
        params.update(overrides)
        return ValuePublisher(**params)

    return make


# ---------------------------------------------------------------------------------------------------
# settings
# ---------------------------------------------------------------------------------------------------


def test_value_metrics_are_off_by_default() -> None:
    settings = settings_from()
    assert (settings.value_metric_columns, settings.value_metric_dimensions, settings.value_metric_max_series) == (
        (),
        (),
        10,
    )
    assert ValuePublisher.from_settings(settings) is None


def test_value_metric_keys_become_the_column_lists() -> None:
    settings = settings_from(
        value_metrics={
            "columns": ["flights", "avg_dep_delay_min"],
            "dimensions": ["origin", "carrier"],
            "max_series": 50,
        }
    )
    assert settings.value_metric_columns == ("flights", "avg_dep_delay_min")
    assert settings.value_metric_dimensions == ("origin", "carrier")
    assert settings.value_metric_max_series == 50
    publisher = ValuePublisher.from_settings(settings)
    assert publisher is not None and (publisher.job_name, publisher.max_series) == (JOB, 50)
    hash(settings)  # the service caches dependencies per settings


MAX_SERIES, COLUMNS_KEY, DIMENSIONS = "value_metrics.max_series", "value_metrics.columns", "value_metrics.dimensions"


@pytest.mark.parametrize(
    ("values", "key", "fragment"),
    [
        ({"columns": ["flights"], "max_series": 0}, MAX_SERIES, "from 1 to 50"),
        ({"columns": ["flights"], "max_series": 51}, MAX_SERIES, "from 1 to 50"),
        ({"columns": ["flights"], "max_series": "ten"}, MAX_SERIES, "integer"),
        ({"columns": ["flights"], "max_series": 2.5}, MAX_SERIES, "integer"),
        ({"columns": ["flights", "", "delay"]}, COLUMNS_KEY, "lowercase column names"),
        ({"columns": ["flights", "flights"]}, COLUMNS_KEY, "distinct"),
        ({"columns": ["vols_réels"]}, COLUMNS_KEY, "(letters, digits, '_')"),
        ({"columns": [":flights"]}, COLUMNS_KEY, "(letters, digits, '_')"),
        ({"columns": ["f" * 256]}, COLUMNS_KEY, "lowercase column names"),
        ({"columns": ["flights"], "dimensions": ["origin", "flights"]}, DIMENSIONS, "must not repeat a value column"),
        ({"columns": ["flights"], "dimensions": ["job"]}, DIMENSIONS, "job dimension"),
        ({"columns": ["flights"], "dimensions": [f"d{i}" for i in range(29)]}, DIMENSIONS, "0 to 28"),
    ],
    ids=[
        "max-0",
        "max-51",
        "max-word",
        "max-float",
        "empty-name",
        "duplicate",
        "non-ascii",
        "colon",
        "too-long",
        "value-and-dimension",
        "job-as-dimension",
        "too-many-dimensions",
    ],
)
def test_bad_value_metric_configuration_names_the_key(values: dict[str, Any], key: str, fragment: str) -> None:
    error = config_error(value_metrics=values)
    [problem] = error.problems
    assert problem.startswith(f"{key}: ")
    assert fragment in problem


# ---------------------------------------------------------------------------------------------------
# the EMF shape
# ---------------------------------------------------------------------------------------------------


def test_each_row_is_one_blob_in_the_values_namespace_with_job_and_dimension_columns(
    publisher: Callable[..., ValuePublisher],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the Lambda environment's Powertools service name (which would add a "service" dimension)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", contract.SERVICE_NAME)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", contract.METRICS_NAMESPACE)
    result = QueryResult(
        COLUMNS,
        [
            {"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25},
            {"origin": "JFK", "flights": 301, "avg_dep_delay_min": 11.5},
        ],
    )

    # WHEN the result is published
    report = publisher().publish(result, slot_epoch_ms=SLOT_MS, now_ms=SLOT_MS + 60_000)

    # THEN one blob per row: values namespace, dimensions exactly [job, origin], one metric per value column
    printed = blobs(capsys)
    assert [shape(b) for b in printed] == [
        (
            contract.VALUES_NAMESPACE,
            [["job", "origin"]],
            {"job": JOB, "origin": "EWR"},
            {"flights": [320.0], "avg_dep_delay_min": [14.25]},
        ),
        (
            contract.VALUES_NAMESPACE,
            [["job", "origin"]],
            {"job": JOB, "origin": "JFK"},
            {"flights": [301.0], "avg_dep_delay_min": [11.5]},
        ),
    ]
    assert all("service" not in b for b in printed)
    assert all(m["Unit"] == "None" for b in printed for m in b["_aws"]["CloudWatchMetrics"][0]["Metrics"])
    # AND the datapoints are stamped with the slot's scheduled time
    assert [b["_aws"]["Timestamp"] for b in printed] == [SLOT_MS, SLOT_MS]
    assert (report.series_published, report.series_dropped, report.datapoints) == (2, 0, 4)
    # AND nothing in the operational namespace: the drop count is a log field of the invocation (issue 23)
    assert all(shape(b)[0] == contract.VALUES_NAMESPACE for b in printed)


def test_an_emit_of_its_own_gets_each_rows_blob_alone(publisher: Callable[..., ValuePublisher]) -> None:
    # GIVEN an emit that keeps each blob and does not flush (Powertools' own flush empties the provider)
    emitted: list[dict[str, Any]] = []
    result = QueryResult(
        COLUMNS,
        [
            {"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25},
            {"origin": "JFK", "flights": 301, "avg_dep_delay_min": None},
        ],
    )

    # WHEN the result is published
    publisher(emit=lambda provider: emitted.append(provider.serialize_metric_set())).publish(
        result, slot_epoch_ms=SLOT_MS, now_ms=SLOT_MS
    )

    # THEN each blob holds its own row only: nothing of the row before it (the second has no delay value)
    assert [shape(b)[2:] for b in emitted] == [
        ({"job": JOB, "origin": "EWR"}, {"flights": [320.0], "avg_dep_delay_min": [14.25]}),
        ({"job": JOB, "origin": "JFK"}, {"flights": [301.0]}),
    ]
    assert [b["_aws"]["Timestamp"] for b in emitted] == [SLOT_MS, SLOT_MS]


def test_without_dimension_columns_each_value_is_one_series_per_job(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str]
) -> None:
    result = QueryResult((Column("total_flights", "bigint"),), [{"total_flights": 898}])
    publisher(value_columns=("total_flights",), dimension_columns=()).publish(result)
    [blob] = blobs(capsys)
    assert shape(blob) == (contract.VALUES_NAMESPACE, [["job"]], {"job": JOB}, {"total_flights": [898.0]})


def test_decimal_text_and_decimal_objects_are_numbers_and_dimension_values_are_strings(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str]
) -> None:
    import decimal

    # GIVEN a decimal column (the engine returns its exact text), a Decimal value and an integer dimension
    columns = (Column("hour", "integer"), Column("revenue", "decimal(12,2)"), Column("share", "double"))
    result = QueryResult(columns, [{"hour": 7, "revenue": "1234.50", "share": decimal.Decimal("0.25")}])

    publisher(value_columns=("revenue", "share"), dimension_columns=("hour",)).publish(result)

    [blob] = blobs(capsys)
    assert shape(blob)[2:] == ({"job": JOB, "hour": "7"}, {"revenue": [1234.5], "share": [0.25]})


def test_nulls_are_skipped_and_non_numbers_are_skipped_with_a_warning(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN rows with a NULL, a string, a boolean, Athena's "NaN" spelling, and a NULL dimension value
    columns = (Column("origin", "varchar"), Column("flights", "bigint"), Column("avg_dep_delay_min", "varchar"))
    result = QueryResult(
        columns,
        [
            {"origin": "EWR", "flights": 320, "avg_dep_delay_min": None},
            {"origin": "JFK", "flights": True, "avg_dep_delay_min": "eleven"},
            {"origin": "LGA", "flights": 277, "avg_dep_delay_min": "NaN"},
            {"origin": None, "flights": 5, "avg_dep_delay_min": 1.5},
        ],
    )

    with caplog.at_level(logging.WARNING, logger="athena_refresh.values"):
        report = publisher().publish(result)

    # THEN NULL is silently absent, JFK (no numeric value left) prints nothing, a NULL dimension is "null"
    assert [shape(b)[2:] for b in blobs(capsys)] == [
        ({"job": JOB, "origin": "EWR"}, {"flights": [320.0]}),
        ({"job": JOB, "origin": "LGA"}, {"flights": [277.0]}),
        ({"job": JOB, "origin": "null"}, {"flights": [5.0], "avg_dep_delay_min": [1.5]}),
    ]
    assert report.values_skipped == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'flights' row 1" in w and "True" in w for w in warnings), warnings
    assert any("'avg_dep_delay_min' row 1" in w and "'eleven'" in w for w in warnings), warnings
    assert any("'avg_dep_delay_min' row 2" in w and "'NaN'" in w for w in warnings), warnings


def test_a_missing_value_column_is_named_in_a_warning_and_the_others_are_published(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    result = QueryResult(COLUMNS[:2], [{"origin": "EWR", "flights": 320}])
    with caplog.at_level(logging.WARNING, logger="athena_refresh.values"):
        report = publisher().publish(result)
    assert report.missing_columns == ("avg_dep_delay_min",)
    assert any("'avg_dep_delay_min' is not in the query result" in r.getMessage() for r in caplog.records)
    [blob] = blobs(capsys)
    assert shape(blob)[3] == {"flights": [320.0]}


def test_a_missing_dimension_column_publishes_nothing_rather_than_a_wrong_series(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    result = QueryResult(COLUMNS[1:], [{"flights": 320, "avg_dep_delay_min": 1.0}])
    with caplog.at_level(logging.WARNING, logger="athena_refresh.values"):
        report = publisher().publish(result)
    assert report.missing_columns == ("origin",) and report.datapoints == 0
    assert blobs(capsys) == []
    assert any("dimension column 'origin' is not in the query result" in r.getMessage() for r in caplog.records)


def test_rows_beyond_the_series_cap_are_not_published_and_the_drop_is_counted(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN five origins (one repeated) and a cap of two dimension combinations
    rows = [
        {"origin": o, "flights": n, "avg_dep_delay_min": 1.0}
        for o, n in [("EWR", 1), ("JFK", 2), ("EWR", 3), ("LGA", 4), ("BOS", 5), ("LGA", 6)]
    ]

    report = publisher(max_series=2).publish(QueryResult(COLUMNS, rows))

    # THEN only EWR and JFK are published (the repeated EWR row too: same series), LGA and BOS are dropped
    assert [(shape(b)[2]["origin"], shape(b)[3]["flights"]) for b in blobs(capsys)] == [
        ("EWR", [1.0]),
        ("JFK", [2.0]),
        ("EWR", [3.0]),
    ]
    assert (report.series_published, report.series_dropped) == (2, 2)
    # AND a warning names the cap and the first combination left out (the count is the invocation's log field)
    [warning] = [r for r in caplog.records if "not published" in r.getMessage()]
    assert "2 dimension combination(s) beyond VALUE_METRIC_MAX_SERIES=2" in warning.getMessage()


def test_a_slot_older_than_cloudwatch_accepts_is_stamped_now(
    publisher: Callable[..., ValuePublisher], capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)  # Powertools checks the timestamp against the real clock
    publisher().publish(
        QueryResult(COLUMNS, [{"origin": "EWR", "flights": 1, "avg_dep_delay_min": 2.0}]),
        slot_epoch_ms=now - MAX_TIMESTAMP_AGE_MS - 1,
        now_ms=now,
    )
    assert [b["_aws"]["Timestamp"] for b in blobs(capsys)] == [now]


def test_publisher_rejects_a_column_that_is_both_value_and_dimension(publisher: Callable[..., ValuePublisher]) -> None:
    with pytest.raises(ValueError, match="both value and dimension"):
        publisher(value_columns=("origin",), dimension_columns=("origin",))


# ---------------------------------------------------------------------------------------------------
# only after a successful commit
# ---------------------------------------------------------------------------------------------------

#: The job tests run on the fake clock at the fixed slot 2026-11-22T00:30Z; Powertools checks EMF
#: timestamps against the real clock and warns once that date is more than 14 days away.
fixed_slot_time = pytest.mark.filterwarnings("ignore:This metric doesn't meet the requirements:UserWarning")


@pytest.fixture
def values_job(make_job: Callable[..., Any], settings: Settings) -> Callable[..., Any]:
    """``values_job(engine)``: the job with a value publisher (flights and delay by origin)."""

    def make(engine: Any, **overrides: Any) -> Any:
        values = ValuePublisher(
            job_name=settings.job_name,
            value_columns=("flights", "avg_dep_delay_min"),
            dimension_columns=("origin",),
            max_series=2,
        )
        return make_job(engine, values=values, **overrides)

    return make


@fixed_slot_time
def test_winner_publishes_its_values_after_the_commit(
    values_job: Any,
    make_engine: Any,
    make_runner: Any,
    slot: Slot,
    clock: Any,
    store: Any,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a listener that records when the commit happened relative to the printed blobs
    seen_at_commit: list[int] = []

    def listener(checkpoint: str, lease: Lease) -> None:
        if checkpoint == "committed":
            seen_at_commit.append(len(blobs(capsys)))

    # WHEN the winner runs the slot (3 origins, cap 2)
    job = values_job(make_engine())
    outcome = make_runner(listener=listener).run(job, slot=slot, owner_id="req-A", deadline_ms=clock.now + 300_000)

    # THEN the values were printed after the commit, stamped with the slot time, capped at two origins
    assert outcome.status == "succeeded" and seen_at_commit == [0]
    printed = blobs(capsys)
    assert [shape(b)[2:] for b in printed] == [
        ({"job": settings.job_name, "origin": "EWR"}, {"flights": [320.0], "avg_dep_delay_min": [14.25]}),
        ({"job": settings.job_name, "origin": "JFK"}, {"flights": [301.0], "avg_dep_delay_min": [11.5]}),
    ]
    assert {b["_aws"]["Timestamp"] for b in printed} == {slot.epoch_ms}
    # AND the one origin over the cap is reported (the invocation's log line: value_series_dropped), as no metric
    assert job.report.value_series_dropped == 1
    assert all(shape(b)[0] == contract.VALUES_NAMESPACE for b in printed)
    assert store.get_result(settings.job_name, slot.iso) is not None


def test_a_stale_holder_publishes_no_values(
    values_job: Any,
    make_engine: Any,
    make_runner: Any,
    make_job: Any,
    slot: Slot,
    clock: Any,
    settings: Settings,
    lock: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN holder A pauses before its commit until B took the slot over (B has no value publisher)
    engine = make_engine([["RUNNING", "SUCCEEDED"]])

    def pause_before_commit(checkpoint: str, lease: Lease) -> None:
        if checkpoint == "before_commit" and lease.owner_id == "req-A":
            clock.advance(s=settings.lease_duration_s + 1)
            assert lock.try_acquire(slot, "req-B", deadline_ms=clock.now + 300_000).acquired

    # WHEN A resumes and commits
    job = values_job(engine)
    outcome = make_runner(listener=pause_before_commit).run(
        job, slot=slot, owner_id="req-A", deadline_ms=clock.now + 300_000
    )

    # THEN its commit was rejected and it published no value (and no drop count)
    assert outcome.status == "stale_rejected"
    assert blobs(capsys) == []
    assert (job.report.committed, job.report.value_series_dropped) == (False, None)


def test_a_failed_query_publishes_no_values(
    values_job: Any, make_engine: Any, make_runner: Any, slot: Slot, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = make_engine([[{"state": "FAILED", "retryable": False, "error_message": "bad column"}]])
    outcome = make_runner().run(values_job(engine), slot=slot, owner_id="req-A", deadline_ms=clock.now + 300_000)
    assert outcome.status == "failed"
    assert blobs(capsys) == []


@fixed_slot_time
def test_a_publishing_error_never_fails_the_committed_slot(
    make_job: Any,
    make_engine: Any,
    make_runner: Any,
    slot: Slot,
    clock: Any,
    store: Any,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN a publisher whose output is broken
    def broken(provider: Any) -> None:
        raise OSError("stdout closed")

    values = ValuePublisher(job_name=settings.job_name, value_columns=("flights",), emit=broken)

    # WHEN the winner commits
    with caplog.at_level(logging.ERROR, logger="athena_refresh.job"):
        outcome = make_runner().run(
            make_job(make_engine(), values=values), slot=slot, owner_id="req-A", deadline_ms=clock.now + 300_000
        )

    # THEN the slot succeeded and stays committed; the error is logged with its traceback
    assert outcome.status == "succeeded" and not outcome.already_applied
    assert store.get_result(settings.job_name, slot.iso) is not None
    [record] = [r for r in caplog.records if "could not publish the result values" in r.getMessage()]
    assert record.exc_info is not None and "stdout closed" in str(record.exc_info[1])
