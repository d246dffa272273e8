"""Validated settings of the Athena refresh job, read once per execution environment: the wiring from the
environment, the job from its typed :class:`~athena_refresh.jobspec.JobSpec` in the job catalog.

Every problem names the environment variable (the names live in :mod:`athena_refresh.contract`, which
the CDK stack uses to set them) or the catalog's key, and what is allowed.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotlock import table as lock_table

from . import catalog, contract
from .errors import ConfigurationError
from .jobspec import JobSpec
from .permits import CapacitySettings

DEFAULT_CATALOG = "AwsDataCatalog"
#: ResultReuseByAgeConfiguration.MaxAgeInMinutes maximum (the bound lives in :mod:`athena_refresh.contract`):
#: https://docs.aws.amazon.com/athena/latest/APIReference/API_ResultReuseByAgeConfiguration.html
MAX_RESULT_REUSE_AGE_MIN = contract.MAX_RESULT_REUSE_MAX_AGE_MIN
DEFAULT_VALUE_METRIC_MAX_SERIES = 10
MAX_VALUE_METRIC_MAX_SERIES = contract.MAX_VALUE_METRIC_MAX_SERIES
#: EMF carries at most 100 metrics per blob and Powertools at most 29 dimensions (``job`` is one).
MAX_VALUE_METRIC_COLUMNS = 100
MAX_VALUE_METRIC_DIMENSIONS = 28


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "").strip()
    if not value:
        raise ConfigurationError(key, "is required and must not be empty")
    return value


def _text(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _number(env: Mapping[str, str], key: str, default: float | None, *, integer: bool, note: str = "") -> float:
    """The variable ``key`` as a number within its bounds from :data:`contract.NUMERIC_BOUNDS`.

    Every refusal names the variable and the allowed range, e.g.
    ``WINDOW_S: must be from 60 to 31622400, got 1000000000000`` (``note`` adds why, in parentheses).
    """
    lo, hi = contract.NUMERIC_BOUNDS[key]
    allowed = f"from {_text(lo)} to {_text(hi)}" + (f" ({note})" if note else "")
    raw = env.get(key, "").strip()
    if not raw:
        if default is None:
            raise ConfigurationError(key, "is required")
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError as exc:
        kind = "an integer" if integer else "a number"
        raise ConfigurationError(key, f"must be {kind} {allowed}, got {raw!r}") from exc
    if isinstance(value, float) and not math.isfinite(value):  # float() accepts "nan" and "inf" (an int is finite)
        raise ConfigurationError(key, f"must be a finite number {allowed}, got {raw!r}")
    if not lo <= value <= hi:
        raise ConfigurationError(key, f"must be {allowed}, got {raw}")
    return value


def _optional_integer(env: Mapping[str, str], key: str) -> int | None:
    """The variable ``key`` as an integer within its bounds, or ``None`` (off) when it is unset or empty."""
    if not env.get(key, "").strip():
        return None
    return int(_number(env, key, None, integer=True, note="unset: off"))


def _column_names(env: Mapping[str, str], key: str) -> tuple[str, ...]:
    """A comma-separated list of result column names (empty when unset).

    Each name becomes a CloudWatch metric or dimension name: 1..255 printable ASCII characters, not
    starting with ``:`` (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Dimension.html).
    """
    raw = env.get(key, "").strip()
    if not raw:
        return ()
    names = tuple(part.strip() for part in raw.split(","))
    for name in names:
        if not name:
            raise ConfigurationError(key, f"has an empty column name in {raw!r}; expected e.g. 'flights,avg_delay'")
        if len(name) > 255 or name.startswith(":") or not all(32 <= ord(ch) < 127 for ch in name):
            raise ConfigurationError(
                key, f"column name {name!r} must be 1..255 printable ASCII characters, not starting with ':'"
            )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigurationError(key, f"names {', '.join(duplicates)} more than once")
    return names


@dataclass(frozen=True)
class Settings:
    """The job's configuration.

    Attributes (units in the names): ``lease_duration_s``, ``heartbeat_interval_s`` (below half the
    lease), ``max_slot_age_s`` (deliveries older than this are skipped as missed; one period is
    typical), ``history_ttl_s`` (lifetime of slot history items), ``window_s`` (the query's trailing
    window ending at the slot's scheduled time), ``data_year`` (``None``: query the slot's own time;
    else map the slot onto that year of the data's timeline, same month, day and time of day),
    ``max_slot_lead_s`` (a delivery whose slot is further ahead of the clock than this is refused before
    any request: a clock-skew allowance). Every number is within its bounds in
    :data:`athena_refresh.contract.NUMERIC_BOUNDS`.

    Result values as metrics (:mod:`athena_refresh.values`): ``value_metric_columns`` (numeric result
    columns, one metric each; empty: off, and the dimensions are then unused), ``value_metric_dimensions``
    (columns whose values become dimensions), ``value_metric_max_series`` (1..50 distinct dimension combinations per run, default
    10: each combination is a billed CloudWatch custom metric per value column).

    Thresholds (the job's ``[alarms]``, issue 23): ``alarm_data_scanned_bytes`` and ``alarm_query_duration_ms``; a
    committed slot whose query scanned more, or ran longer, is counted as ``ThresholdExceeded`` and logged. ``None``
    (the variable unset or empty, as in a catalog written before them): off.
    """

    job_name: str
    lock_table_name: str
    results_table_name: str
    athena_workgroup: str
    athena_database: str
    query_sql: str
    results_bucket_name: str | None = None
    athena_catalog: str = DEFAULT_CATALOG
    lease_duration_s: float = 45.0
    heartbeat_interval_s: float = 15.0
    max_slot_age_s: float | None = 1800.0
    history_ttl_s: int = 30 * 24 * 3600
    max_query_attempts: int = 3
    window_s: int = 86400
    data_year: int | None = None
    value_metric_columns: tuple[str, ...] = ()
    value_metric_dimensions: tuple[str, ...] = ()
    value_metric_max_series: int = DEFAULT_VALUE_METRIC_MAX_SERIES
    alarm_data_scanned_bytes: int | None = None  # ThresholdExceeded above this (None: off)
    alarm_query_duration_ms: int | None = None  # ThresholdExceeded above this (None: off)
    result_reuse_max_age_min: int = 0  # Athena query result reuse (0: off), at most MAX_RESULT_REUSE_AGE_MIN
    max_slot_lead_s: float = float(contract.DEFAULT_MAX_SLOT_LEAD_S)
    query_parameters: tuple[str, ...] = ("window_start", "window_end")  # the name bound to each ``?``
    query_constants: tuple[tuple[str, str], ...] = ()  # (name, SQL literal text): the job's own constants
    capacity: CapacitySettings = field(
        default_factory=CapacitySettings
    )  # the deployment's Athena capacity budget (off by default)
    racers: int = 1  # invocations fanned out per slot (the catalog's schedule): the cost estimate's losers
    #: The job's spec from the catalog (the settings above are its values, local tuning aside); ``None``: inline.
    spec: JobSpec | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, catalog_path: Path | str | None = None) -> Settings:
        """Read and validate the settings: the wiring from ``env`` (default ``os.environ``), the job from the catalog.

        The query and the job's spec come from the job catalog (:mod:`athena_refresh.catalog`): ``catalog_path``,
        else ``JOB_CATALOG_PATH``, else the catalog bundled in the asset when there is one. The spec is typed (its
        rules ran when the catalog was read: no text is parsed for it); beside it the environment carries the
        wiring, and a local run may tune ``contract.LOCAL_TUNING_ENV_VARS`` (lease, heartbeat, slot age). Without
        a catalog, or for an entry without a spec (tests, the bench), every setting comes from ``env`` and the
        query from ``QUERY_SQL``, its two ``?`` bound to the window's start and end; setting both is refused.

        Raises
        ------
        ConfigurationError
            Naming the first invalid or missing variable; :class:`~athena_refresh.catalog.CatalogError`
            for a broken catalog.
        """
        env = os.environ if env is None else env
        job_name = _required(env, contract.ENV_JOB_NAME)
        if not lock_table.is_valid_job_name(job_name):
            raise ConfigurationError(contract.ENV_JOB_NAME, f"must be {lock_table.JOB_NAME_RULE}, got {job_name!r:.80}")
        query = _query(env, job_name, catalog_path)
        job = _from_spec(query.spec, env) if query.spec is not None else _from_env(env)
        return cls(
            job_name=job_name,
            lock_table_name=_required(env, contract.ENV_LOCK_TABLE_NAME),
            results_table_name=_required(env, contract.ENV_RESULTS_TABLE_NAME),
            results_bucket_name=env.get(contract.ENV_RESULTS_BUCKET_NAME, "").strip() or None,
            athena_workgroup=_required(env, contract.ENV_ATHENA_WORKGROUP),
            athena_database=_required(env, contract.ENV_ATHENA_DATABASE),
            athena_catalog=env.get(contract.ENV_ATHENA_CATALOG, "").strip() or DEFAULT_CATALOG,
            query_sql=query.sql,
            query_parameters=query.parameters,
            query_constants=tuple(sorted(query.constants.items())),
            racers=query.spec.racers if query.spec else query.schedule.racers if query.schedule is not None else 1,
            capacity=CapacitySettings.from_env(env, _number),
            spec=query.spec,
            **job,
        )

    def window(self, scheduled: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """The query window ``[end - window_s, end)`` ending at the slot's scheduled time (naive UTC).

        With ``data_year`` the end is mapped onto that year (same month, day, time of day; 29 February
        becomes 28 February when that year has none).
        """
        end = scheduled.astimezone(dt.UTC).replace(tzinfo=None, microsecond=0)
        if self.data_year is not None:
            try:
                end = end.replace(year=self.data_year)
            except ValueError:  # 29 February in a non-leap year
                end = end.replace(year=self.data_year, day=28)
        return end - dt.timedelta(seconds=self.window_s), end

    def execution_parameters(self, scheduled: dt.datetime) -> list[str]:
        """Athena ExecutionParameters: the value of each name of ``query_parameters``, in order.

        ``window_start`` and ``window_end`` are the window's bounds (:meth:`window`), ``slot_time`` the
        slot's time (the window's end), as SQL timestamp literal text ``'YYYY-MM-DD HH:MM:SS'``;
        ``window_first_date`` and ``window_last_date`` the UTC dates ``'YYYY-MM-DD'`` of the window's first
        instant and of its last (``window_end`` - 1 s: the window is ``[start, end)`` at second precision, so a
        window ending at midnight does not touch the next day), both inclusive, for
        ``dt BETWEEN :window_first_date AND :window_last_date``; all on the data's timeline (``data_year``).
        A constant is its text as written. Athena substitutes each value as SQL literal text, so strings carry
        their quotes:
        https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements-querying-using-execution-parameters.html
        """
        start, end = self.window(scheduled)
        last = end - dt.timedelta(seconds=1)
        values = {
            "window_start": f"'{start:%Y-%m-%d %H:%M:%S}'",
            "window_end": f"'{end:%Y-%m-%d %H:%M:%S}'",
            "slot_time": f"'{end:%Y-%m-%d %H:%M:%S}'",
            "window_first_date": f"'{start:%Y-%m-%d}'",
            "window_last_date": f"'{last:%Y-%m-%d}'",
            **dict(self.query_constants),
        }
        return [values[name] for name in self.query_parameters]


def _query(env: Mapping[str, str], job_name: str, catalog_path: Path | str | None) -> catalog.CatalogQuery:
    """The job's query: from the catalog when there is one, else ``QUERY_SQL`` (window start, end)."""
    inline = env.get(contract.ENV_QUERY_SQL, "").strip()
    path = catalog_path or env.get(contract.ENV_JOB_CATALOG_PATH, "").strip() or None
    if path is None and catalog.BUNDLED_CATALOG_PATH.is_file():
        path = catalog.BUNDLED_CATALOG_PATH
    if path is not None:
        if inline:
            raise ConfigurationError(
                contract.ENV_QUERY_SQL, f"must not be set: the query comes from the job catalog {path}"
            )
        return catalog.load_query(job_name, path)
    sql = _required(env, contract.ENV_QUERY_SQL)
    if sql.count("?") != 2:
        raise ConfigurationError(
            contract.ENV_QUERY_SQL,
            f"must contain exactly two ? placeholders (window start, window end); found {sql.count('?')}",
        )
    return catalog.CatalogQuery(sql=sql, parameters=("window_start", "window_end"))


def _value_metrics(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    columns = _column_names(env, contract.ENV_VALUE_METRIC_COLUMNS)
    dimensions = _column_names(env, contract.ENV_VALUE_METRIC_DIMENSIONS)
    max_series = int(
        _number(
            env,
            contract.ENV_VALUE_METRIC_MAX_SERIES,
            DEFAULT_VALUE_METRIC_MAX_SERIES,
            integer=True,
            note="each dimension combination is a billed custom metric per value column",
        )
    )
    if len(columns) > MAX_VALUE_METRIC_COLUMNS:
        raise ConfigurationError(
            contract.ENV_VALUE_METRIC_COLUMNS, f"names {len(columns)} columns; at most {MAX_VALUE_METRIC_COLUMNS}"
        )
    if len(dimensions) > MAX_VALUE_METRIC_DIMENSIONS:
        raise ConfigurationError(
            contract.ENV_VALUE_METRIC_DIMENSIONS,
            f"names {len(dimensions)} columns; at most {MAX_VALUE_METRIC_DIMENSIONS} (plus the job dimension)",
        )
    if contract.DIMENSION_JOB in dimensions:
        raise ConfigurationError(
            contract.ENV_VALUE_METRIC_DIMENSIONS,
            f"must not name a column {contract.DIMENSION_JOB!r}: every value metric already has the job dimension",
        )
    both = [name for name in dimensions if name in columns]
    if both:
        raise ConfigurationError(
            contract.ENV_VALUE_METRIC_DIMENSIONS,
            f"column(s) {', '.join(both)} also listed in {contract.ENV_VALUE_METRIC_COLUMNS}: a column is either"
            " a value or a dimension",
        )
    return columns, dimensions, max_series


def _heartbeat_below_half(lease: float, heartbeat: float) -> None:
    """The lock's own rule (``slotlock.SlotLock``): a renewal every ``heartbeat`` keeps a ``lease`` only while the
    heartbeat is strictly below half of it. A deployed job's spec holds the stricter rule with the clock-skew
    allowance (:func:`athena_refresh.job_rules.heartbeat_bound_s`); a local run's tuning (a 2 s lease renewed every
    0.5 s) only this one."""
    if heartbeat * 2 >= lease:
        raise ConfigurationError(
            contract.ENV_HEARTBEAT_INTERVAL_S,
            f"{heartbeat} s must be below half of {contract.ENV_LEASE_DURATION_S} ({lease} s)",
        )


def _max_slot_age(env: Mapping[str, str], default: float) -> float | None:
    raw = env.get(contract.ENV_MAX_SLOT_AGE_S, "").strip()
    if raw.lower() in ("none", "off"):
        return None
    return _number(env, contract.ENV_MAX_SLOT_AGE_S, default, integer=False)


def _from_spec(spec: JobSpec, env: Mapping[str, str]) -> dict[str, Any]:
    """The job's settings from its catalog spec, typed (its rules ran when the catalog was read): no text parsed
    but a local run's tuning (``contract.LOCAL_TUNING_ENV_VARS``), checked against the runtime's bounds.

    :raises ConfigurationError: another job setting is in the environment (wiring only beside a catalog).
    """
    for name in contract.JOB_SETTING_ENV_VARS:
        if name not in contract.LOCAL_TUNING_ENV_VARS and env.get(name, "").strip():
            raise ConfigurationError(
                name,
                "must not be set: the job's settings come from its spec in the job catalog (the environment carries "
                f"the wiring; only {', '.join(contract.LOCAL_TUNING_ENV_VARS)} may tune a local run)",
            )
    lease = _number(env, contract.ENV_LEASE_DURATION_S, float(spec.lease_duration_s), integer=False)
    heartbeat = _number(env, contract.ENV_HEARTBEAT_INTERVAL_S, float(spec.heartbeat_interval_s), integer=False)
    _heartbeat_below_half(lease, heartbeat)
    values = spec.value_metrics
    return {
        "lease_duration_s": lease,
        "heartbeat_interval_s": heartbeat,
        "max_slot_age_s": _max_slot_age(env, float(spec.max_slot_age_s)),
        "history_ttl_s": spec.history_ttl_s,
        "max_query_attempts": spec.max_query_attempts,
        "window_s": spec.window_s,
        "data_year": spec.data_year,
        "value_metric_columns": values.columns if values else (),
        "value_metric_dimensions": values.dimensions if values else (),
        "value_metric_max_series": values.max_series if values else DEFAULT_VALUE_METRIC_MAX_SERIES,
        "alarm_data_scanned_bytes": spec.alarms.data_scanned_bytes,
        "alarm_query_duration_ms": spec.alarms.query_duration_ms,
        "result_reuse_max_age_min": spec.result_reuse_max_age_min,
        "max_slot_lead_s": float(spec.max_slot_lead_s),
    }


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The inline form's settings (no catalog spec: tests, the bench), each variable parsed and checked."""
    lease = _number(env, contract.ENV_LEASE_DURATION_S, 45.0, integer=False)
    heartbeat = _number(env, contract.ENV_HEARTBEAT_INTERVAL_S, lease / 3, integer=False)
    _heartbeat_below_half(lease, heartbeat)
    data_year_raw = env.get(contract.ENV_DATA_YEAR, "").strip()
    value_columns, value_dimensions, max_series = _value_metrics(env)
    return {
        "lease_duration_s": lease,
        "heartbeat_interval_s": heartbeat,
        "max_slot_age_s": _max_slot_age(env, 1800.0),
        "history_ttl_s": int(_number(env, contract.ENV_HISTORY_TTL_S, 30 * 24 * 3600, integer=True)),
        "max_query_attempts": int(_number(env, contract.ENV_MAX_QUERY_ATTEMPTS, 3, integer=True)),
        "window_s": int(_number(env, contract.ENV_WINDOW_S, 86400, integer=True)),
        "data_year": int(_number(env, contract.ENV_DATA_YEAR, None, integer=True)) if data_year_raw else None,
        "value_metric_columns": value_columns,
        "value_metric_dimensions": value_dimensions,
        "value_metric_max_series": max_series,
        "alarm_data_scanned_bytes": _optional_integer(env, contract.ENV_ALARM_DATA_SCANNED_BYTES),
        "alarm_query_duration_ms": _optional_integer(env, contract.ENV_ALARM_QUERY_DURATION_MS),
        "result_reuse_max_age_min": int(
            _number(
                env,
                contract.ENV_RESULT_REUSE_MAX_AGE_MIN,
                0,
                integer=True,
                note="minutes, 0: off; Athena's maximum is 7 days",
            )
        ),
        "max_slot_lead_s": _number(
            env,
            contract.ENV_MAX_SLOT_LEAD_S,
            float(contract.DEFAULT_MAX_SLOT_LEAD_S),
            integer=False,
            note="seconds a slot may be ahead of the clock",
        ),
    }
