"""Validated settings of the Athena refresh job, read once per execution environment: the wiring from the
environment, the job from its typed :class:`~athena_refresh.jobspec.JobSpec` in the job catalog (the only source
of a job's settings: no job setting is parsed from text).

Every problem names the environment variable (the names live in :mod:`athena_refresh.contract`, which
the CDK stack uses to set them) or the catalog's key, and what is allowed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slotlock import table as lock_table

from . import catalog, contract
from .budget import CapacitySettings
from .checks import bound_text
from .errors import ConfigurationError
from .jobspec import DEFAULT_VALUE_METRIC_MAX_SERIES, JobSpec

DEFAULT_CATALOG = "AwsDataCatalog"


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "").strip()
    if not value:
        raise ConfigurationError(key, "is required and must not be empty")
    return value


def _number(env: Mapping[str, str], key: str, default: float | None) -> float:
    """The variable ``key`` as a number within its bounds from :data:`contract.NUMERIC_BOUNDS`.

    Every refusal names the variable and the allowed range, e.g. ``LEASE_DURATION_S: must be from 1 to 55, got 100``.
    Read for a local run's tuning only: a job's own numbers come from its spec, the capacity budget's from the
    catalog.
    """
    lo, hi = contract.NUMERIC_BOUNDS[key]
    allowed = f"from {bound_text(lo)} to {bound_text(hi)}"
    raw = env.get(key, "").strip()
    if not raw:
        if default is None:
            raise ConfigurationError(key, "is required")
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(key, f"must be a number {allowed}, got {raw!r}") from exc
    if not math.isfinite(value):  # float() accepts "nan" and "inf"
        raise ConfigurationError(key, f"must be a finite number {allowed}, got {raw!r}")
    if not lo <= value <= hi:
        raise ConfigurationError(key, f"must be {allowed}, got {raw}")
    return value


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
    (settings constructed without a spec): off.

    Built by :meth:`from_env` (the deployed shape: the job catalog's spec and the wiring) or :meth:`from_spec`
    (tests, local tools); direct construction with keyword arguments is for the job's unit tests.
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
    #: The job's spec (the settings above are its values, local tuning aside); ``None``: constructed directly.
    spec: JobSpec | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, catalog_path: Path | str | None = None) -> Settings:
        """Read and validate the settings: the wiring from ``env`` (default ``os.environ``), the job from the catalog.

        The query and the job's spec come from the job catalog (:mod:`athena_refresh.catalog`): ``catalog_path``,
        else ``JOB_CATALOG_PATH``, else the catalog bundled in the asset. The spec is typed (its rules ran when the
        catalog was read: no text is parsed for it); beside it the environment carries the wiring, and a local run
        may tune ``contract.LOCAL_TUNING_ENV_VARS`` (lease, heartbeat, slot age). Tests build the catalog from a
        :class:`JobSpec` (:func:`athena_refresh.catalog.write_catalog`) or the settings with :meth:`from_spec`.

        The deployment's capacity budget: its numbers from the catalog's ``capacity`` section (none: off), its wiring
        (semaphore name, permit table, deferral) from ``env`` (:meth:`~athena_refresh.budget.CapacitySettings.of`).

        Raises
        ------
        ConfigurationError
            Naming the first invalid or missing variable, or a job setting or a capacity number in the environment;
            :class:`~athena_refresh.catalog.CatalogError` for a missing or broken catalog, or an entry without a spec.
        """
        env = os.environ if env is None else env
        job_name = _required(env, contract.ENV_JOB_NAME)
        if not lock_table.is_valid_job_name(job_name):
            raise ConfigurationError(contract.ENV_JOB_NAME, f"must be {lock_table.JOB_NAME_RULE}, got {job_name!r:.80}")
        for name in (contract.ENV_QUERY_SQL, *contract.JOB_SETTING_ENV_VARS):
            if name not in contract.LOCAL_TUNING_ENV_VARS and env.get(name, "").strip():
                raise ConfigurationError(
                    name,
                    "must not be set: the job's query and settings come from its spec in the job catalog (the "
                    f"environment carries the wiring; only {', '.join(contract.LOCAL_TUNING_ENV_VARS)} may tune a "
                    "local run)",
                )
        for name in contract.CAPACITY_SETTING_ENV_VARS:
            if env.get(name, "").strip():
                raise ConfigurationError(
                    name,
                    "must not be set: the capacity budget's numbers come from the job catalog's capacity section "
                    "(cdk.json context stack.capacity, written at synth); rebuild the catalog with them (cdk synth, "
                    "or the local tool that wrote it)",
                )
        path = catalog_path or env.get(contract.ENV_JOB_CATALOG_PATH, "").strip() or catalog.BUNDLED_CATALOG_PATH
        query, budget = catalog.load_job(job_name, path)
        if query.spec is None:
            raise catalog.CatalogError(
                path, f"jobs.{job_name}.spec: missing; the job's settings come from its spec (catalog format 2)"
            )
        spec = query.spec
        max_slot_age_s = _max_slot_age(env, float(spec.max_slot_age_s))
        settings = cls.from_spec(
            spec,
            lock_table_name=_required(env, contract.ENV_LOCK_TABLE_NAME),
            results_table_name=_required(env, contract.ENV_RESULTS_TABLE_NAME),
            results_bucket_name=env.get(contract.ENV_RESULTS_BUCKET_NAME, "").strip() or None,
            athena_workgroup=_required(env, contract.ENV_ATHENA_WORKGROUP),
            athena_database=_required(env, contract.ENV_ATHENA_DATABASE),
            athena_catalog=env.get(contract.ENV_ATHENA_CATALOG, "").strip() or DEFAULT_CATALOG,
            query_parameters=query.parameters,
            query_constants=tuple(sorted(query.constants.items())),
            capacity=CapacitySettings.of(budget, env),
            lease_duration_s=_number(env, contract.ENV_LEASE_DURATION_S, float(spec.lease_duration_s)),
            heartbeat_interval_s=_number(env, contract.ENV_HEARTBEAT_INTERVAL_S, float(spec.heartbeat_interval_s)),
            max_slot_age_s=max_slot_age_s,
        )
        # "none"/"off" turns a local run's slot age off (a spec always has one)
        return settings if max_slot_age_s is not None else dataclasses.replace(settings, max_slot_age_s=None)

    @classmethod
    def from_spec(
        cls,
        spec: JobSpec,
        *,
        lock_table_name: str,
        results_table_name: str,
        results_bucket_name: str | None = None,
        athena_workgroup: str | None = None,
        athena_database: str | None = None,
        athena_catalog: str = DEFAULT_CATALOG,
        query_parameters: tuple[str, ...] = ("window_start", "window_end"),
        query_constants: tuple[tuple[str, str], ...] = (),
        capacity: CapacitySettings | None = None,
        lease_duration_s: float | None = None,
        heartbeat_interval_s: float | None = None,
        max_slot_age_s: float | None = None,
    ) -> Settings:
        """The settings of ``spec``'s job (its SQL, bound by ``query_parameters``/``query_constants``) with the
        wiring given; workgroup and database default to the spec's. A local run's tuning (``lease_duration_s``,
        ``heartbeat_interval_s``, ``max_slot_age_s``; each left out: the spec's) need only keep the lock's own rule,
        the heartbeat strictly below half the lease.

        :raises ConfigurationError: the tuned heartbeat is not below half the tuned lease.
        """
        lease = float(spec.lease_duration_s) if lease_duration_s is None else lease_duration_s
        heartbeat = float(spec.heartbeat_interval_s) if heartbeat_interval_s is None else heartbeat_interval_s
        _heartbeat_below_half(lease, heartbeat)
        values = spec.value_metrics
        return cls(
            job_name=spec.job_name,
            lock_table_name=lock_table_name,
            results_table_name=results_table_name,
            results_bucket_name=results_bucket_name,
            athena_workgroup=athena_workgroup or spec.workgroup,
            athena_database=athena_database or spec.database,
            athena_catalog=athena_catalog,
            query_sql=spec.sql,
            query_parameters=query_parameters,
            query_constants=query_constants,
            lease_duration_s=lease,
            heartbeat_interval_s=heartbeat,
            max_slot_age_s=float(spec.max_slot_age_s) if max_slot_age_s is None else max_slot_age_s,
            history_ttl_s=spec.history_ttl_s,
            max_query_attempts=spec.max_query_attempts,
            window_s=spec.window_s,
            data_year=spec.data_year,
            value_metric_columns=values.columns if values else (),
            value_metric_dimensions=values.dimensions if values else (),
            value_metric_max_series=values.max_series if values else DEFAULT_VALUE_METRIC_MAX_SERIES,
            alarm_data_scanned_bytes=spec.alarms.data_scanned_bytes,
            alarm_query_duration_ms=spec.alarms.query_duration_ms,
            result_reuse_max_age_min=spec.result_reuse_max_age_min,
            max_slot_lead_s=float(spec.max_slot_lead_s),
            racers=spec.racers,
            capacity=capacity or CapacitySettings(),
            spec=spec,
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
    return _number(env, contract.ENV_MAX_SLOT_AGE_S, default)
