"""The job catalog: every job's definition (query and typed spec) as the stack prepared it at synth, bundled in
the function's asset.

The stack (``stacks/jobs.py``) reads ``jobs/<job>/query.sql``, translates its named parameters to Athena's
positional ``?`` and writes ``job_catalog.json`` at the root of the Lambda asset. An environment variable
could not carry it (Lambda's environment is at most 4 KB in all:
https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html). Shape, format 2::

    {"format": 2,
     "capacity": {"permits": 10, "wait_in_place_s": 60.0, "manual_headroom": 2, ...},
     "jobs": {"<job>": {"spec": {"job_name": "<job>", "sql": "SELECT ... WHERE t >= CAST(? AS timestamp) ...",
                                 "lease_duration_s": 45, "window_s": 86400, "data_year": null,
                                 "alarms": {"data_scanned_bytes": 800000000, ...}, ...},
                        "parameters": ["window_start", "window_end", "carrier"],
                        "constants": {"carrier": "'AA'"},
                        "schedule": {"expression": "cron(0/30 * * * ? *)", "timezone": "UTC", "racers": 3}}}}

``spec`` is the job's :class:`~athena_refresh.jobspec.JobSpec` as typed JSON (:func:`~athena_refresh.jobspec.as_raw`;
its ``sql`` is the prepared query), loaded back into the same class at cold start: the same rules run as at synth,
a problem named ``job catalog <path>: jobs.<job>.spec.<key>: ...``. The stack-wide alarm email is left out
(``null``: the runtime never mails, and changing it does not change every job's asset). An entry without a spec
(the read side's, which runs no query) holds ``sql`` instead. The function's environment carries only the
deployment's wiring (job name, table, bucket, workgroup and database names).

Format 1 carried a job's settings as environment-variable text (``settings``); a format-1 catalog is still read
when it holds none (test and local fixtures, the read side's empty ones), and one with ``settings`` (every catalog the stack wrote before) is
refused naming the rebuild: the catalog is always written at synth together with the code that reads it, so a
deployment never meets one.

``parameters`` names the value bound to each ``?`` in order (a name may repeat); a name is a built-in
(:data:`BUILTIN_PARAMETERS`, bound per slot by :meth:`athena_refresh.settings.Settings.execution_parameters`)
or one of the job's ``constants`` (SQL literal text, bound as written). The file is read and validated once,
at cold start; a broken catalog fails the cold start with :class:`CatalogError` naming what is wrong.

``schedule`` (optional) is the job's EventBridge Scheduler schedule as deployed: the read API reports it.

``capacity`` (top level, beside ``jobs``: the same for every job of the deployment) is the deployment's Athena
capacity budget, :class:`~athena_refresh.budget.CapacityBudget` as typed JSON (``{"permits": 10, "wait_in_place_s":
60.0, "manual_headroom": 2, "retry_delay_s": 120.0, "max_query_active_s": 1800.0}``, every key required), loaded at
cold start into the same class (a problem named ``job catalog <path>: capacity.<key>: ...``). The stack writes it
into every job's catalog, the budget off too (``permits`` 0); the read side's catalog has none (it takes no permit).
A catalog without it (the read side's, test and local fixtures, one written before the budget moved here) loads
with the budget off: ``CapacityBudget()``, permits 0. A deployment whose environment still carries the budget's
numbers (``CAPACITY_PERMITS`` and the others, as the stack set them before) is refused at cold start naming the
variable (``athena_refresh.settings``), so a budget never silently turns off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from slotlock import table as lock_table

from .budget import CAPACITY_KEY, CapacityBudget
from .checks import ConfigError, Labels
from .errors import ConfigurationError
from .jobspec import JobSpec, as_raw

CATALOG_FORMAT: Final = 2
#: Formats this code reads: format 1 only without job settings (see the module docstring).
READABLE_FORMATS: Final = (1, 2)
CATALOG_FILE: Final = "job_catalog.json"
#: The bundled catalog: at the root of the asset (``lambdas/`` in the repository, where none is committed).
BUNDLED_CATALOG_PATH: Final = Path(__file__).resolve().parent.parent / CATALOG_FILE
#: Bound per slot: the window ``[window_start, window_end)``, the slot's own scheduled time, and the UTC dates of
#: the window's first and last instant (for a partition filter); the same names as ``stacks.query_sql``'s.
BUILTIN_PARAMETERS: Final = ("window_start", "window_end", "slot_time", "window_first_date", "window_last_date")
MAX_PARAMETERS: Final = 25  # Athena: at most 25 ExecutionParameters per query


class CatalogError(ConfigurationError):
    """The job catalog is missing, malformed, or does not hold this function's job."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"job catalog {path}", problem)
        self.path = str(path)
        self.problem = problem


@dataclass(frozen=True)
class CatalogSchedule:
    """A job's deployed schedule: ``expression`` (``cron(...)``) in ``timezone`` (IANA), fanned out to ``racers``;
    the watchdog's grace ``freshness_s`` and the job's ``max_slot_age_s`` (seconds; ``None`` in a catalog written
    before the watchdog: the watchdog then derives them as :attr:`JobSpec.grace_s` does from a period)."""

    expression: str
    timezone: str = "UTC"
    racers: int = 1
    freshness_s: int | None = None
    max_slot_age_s: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"expression", "timezone", "racers"}``: the schedule as the read API and the tools report it."""
        return {"expression": self.expression, "timezone": self.timezone, "racers": self.racers}

    def catalog_dict(self) -> dict[str, Any]:
        """:meth:`as_dict` plus ``freshness_s`` and ``max_slot_age_s`` when known: the catalog file's entry."""
        document = self.as_dict()
        for key in ("freshness_s", "max_slot_age_s"):
            if getattr(self, key) is not None:
                document[key] = getattr(self, key)
        return document


@dataclass(frozen=True)
class CatalogQuery:
    """One job's definition: ``sql`` with ``?`` placeholders, the name bound to each, the job's constants, and
    its :class:`JobSpec` (``None``: an entry that runs no query, the read side's)."""

    sql: str
    parameters: tuple[str, ...] = ("window_start", "window_end")  # the name bound to each ?, in order
    constants: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    spec: JobSpec | None = None
    schedule: CatalogSchedule | None = None


def load_catalog(path: Path | str = BUNDLED_CATALOG_PATH) -> dict[str, CatalogQuery]:
    """Every job of the catalog at ``path``, validated, by name (sorted).

    :raises CatalogError: as :func:`load_query`, naming the first bad entry.
    """
    jobs, _ = _read(path)
    return {str(name): parse_entry(str(name), jobs[name], path) for name in sorted(jobs)}


def _read(path: Path | str) -> tuple[Mapping[str, Any], CapacityBudget]:
    """The catalog's ``jobs`` (raw) and its capacity budget (validated; none: off)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CatalogError(path, "not found (the stack bundles it in the function's asset at synth)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CatalogError(path, f"cannot be read as JSON: {exc}") from exc
    if not isinstance(document, Mapping) or document.get("format") not in READABLE_FORMATS:
        raise CatalogError(
            path, f"must be an object with format {CATALOG_FORMAT} (format 1 is read too, without job settings)"
        )
    jobs = document.get("jobs")
    if not isinstance(jobs, Mapping):
        raise CatalogError(path, "must hold a 'jobs' object")
    return jobs, _parse_capacity(document.get(CAPACITY_KEY), path)


def _parse_capacity(raw: Any, path: Path | str) -> CapacityBudget:
    """The ``capacity`` section as a :class:`CapacityBudget` (the same rules as at synth); absent: the budget off.

    :raises CatalogError: naming each problem ``capacity.<key>: ...``."""
    if raw is None:
        return CapacityBudget()
    try:
        return CapacityBudget.from_raw(raw)
    except ConfigError as exc:
        raise CatalogError(path, "; ".join(exc.problems)) from exc


def load_query(job_name: str, path: Path | str = BUNDLED_CATALOG_PATH) -> CatalogQuery:
    """Read the catalog at ``path`` and return ``job_name``'s query, validated.

    Raises
    ------
    CatalogError
        The file is missing or not JSON, its format is unknown, the job is absent, or an entry is malformed
        (empty SQL, a parameter that is neither built in nor a constant, more than 25 parameters), or its capacity
        section is.
    """
    return load_job(job_name, path)[0]


def load_job(job_name: str, path: Path | str = BUNDLED_CATALOG_PATH) -> tuple[CatalogQuery, CapacityBudget]:
    """``job_name``'s query and the deployment's capacity budget, from one read of the catalog at ``path`` (the cold
    start's). :raises CatalogError: as :func:`load_query`."""
    jobs, budget = _read(path)
    if job_name not in jobs:
        known = ", ".join(sorted(str(name) for name in jobs)) or "none"
        raise CatalogError(path, f"holds no job {job_name!r} (jobs: {known})")
    return parse_entry(job_name, jobs[job_name], path), budget


def parse_entry(job_name: str, entry: Any, path: Path | str = "<catalog>") -> CatalogQuery:
    """Validate one catalog entry (see the module docstring). :raises CatalogError: naming the field."""
    where = f"jobs.{job_name}"
    if not lock_table.is_valid_job_name(job_name):
        raise CatalogError(path, f"{where}: the job name must be {lock_table.JOB_NAME_RULE}")
    if not isinstance(entry, Mapping):
        raise CatalogError(path, f"{where}: must be an object with sql, parameters and constants")
    if entry.get("settings"):  # an empty one (the read side's, format 1) carries nothing
        raise CatalogError(
            path,
            f"{where}.settings: job settings as environment-variable text (catalog format 1) are no longer read; "
            f"this code reads the job's typed spec (format {CATALOG_FORMAT}): rebuild the catalog with it (cdk synth, "
            "or the local tool that wrote it)",
        )
    spec = _parse_spec(job_name, entry.get("spec"), where, path)
    sql = spec.sql if spec is not None else entry.get("sql")
    names, constants = entry.get("parameters", []), entry.get("constants", {})
    if not isinstance(sql, str) or not sql.strip():
        raise CatalogError(path, f"{where}.sql: must be a non-empty SQL statement")
    if not isinstance(constants, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in constants.items()
    ):
        raise CatalogError(path, f"{where}.constants: must map names to non-empty SQL literal text")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CatalogError(path, f"{where}.parameters: must be a list of parameter names")
    if len(names) > MAX_PARAMETERS:
        raise CatalogError(path, f"{where}.parameters: {len(names)} parameters; Athena binds at most {MAX_PARAMETERS}")
    unknown = sorted({n for n in names if n not in BUILTIN_PARAMETERS and n not in constants})
    if unknown:
        raise CatalogError(path, f"{where}.parameters: {', '.join(unknown)} neither built in nor among the constants")
    return CatalogQuery(
        sql=sql,
        parameters=tuple(names),
        constants=MappingProxyType(dict(constants)),
        spec=spec,
        schedule=_parse_schedule(entry.get("schedule"), f"{where}.schedule", path),
    )


def _parse_spec(job_name: str, raw: Any, where: str, path: Path | str) -> JobSpec | None:
    """The entry's ``spec`` loaded into a :class:`JobSpec` (every rule runs, as at synth); ``None`` when absent.

    :raises CatalogError: naming each problem ``jobs.<job>.spec.<key>: ...``, or a spec of another job."""
    if raw is None:
        return None
    labels = Labels(f"{where}.spec.")
    try:
        spec = JobSpec.from_context(raw, labels=labels)
    except ConfigError as exc:
        raise CatalogError(path, "; ".join(exc.problems)) from exc
    if spec.job_name != job_name:
        raise CatalogError(path, f"{where}.spec.job_name: must be the entry's job {job_name!r}, got {spec.job_name!r}")
    return spec


def _parse_schedule(raw: Any, where: str, path: Path | str) -> CatalogSchedule | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise CatalogError(path, f"{where}: must be an object with expression, timezone and racers")
    expression, timezone, racers = raw.get("expression"), raw.get("timezone", "UTC"), raw.get("racers", 1)
    if not isinstance(expression, str) or not expression.startswith("cron("):
        raise CatalogError(path, f"{where}.expression: must be a cron(...) expression, got {expression!r:.80}")
    if not isinstance(timezone, str) or not timezone:
        raise CatalogError(path, f"{where}.timezone: must be an IANA time zone name, got {timezone!r:.80}")
    if isinstance(racers, bool) or not isinstance(racers, int) or racers < 1:
        raise CatalogError(path, f"{where}.racers: must be a positive integer, got {racers!r:.40}")
    seconds: dict[str, int | None] = {}
    for key in ("freshness_s", "max_slot_age_s"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise CatalogError(path, f"{where}.{key}: must be a positive integer of seconds, got {value!r:.40}")
        seconds[key] = value
    return CatalogSchedule(expression, timezone, racers, **seconds)


def catalog_document(queries: Mapping[str, CatalogQuery], *, capacity: CapacityBudget | None = None) -> dict[str, Any]:
    """The catalog file's JSON document for ``queries`` (job name -> query) and the deployment's ``capacity``
    budget (``None``: no section, read as the budget off), as the stack writes it."""
    return {
        "format": CATALOG_FORMAT,
        **({CAPACITY_KEY: capacity.as_raw()} if capacity is not None else {}),
        "jobs": {
            name: {
                **({"spec": _spec_document(q.spec)} if q.spec is not None else {"sql": q.sql}),
                "parameters": list(q.parameters),
                "constants": dict(q.constants),
                **({"schedule": q.schedule.catalog_dict()} if q.schedule is not None else {}),
            }
            for name, q in sorted(queries.items())
        },
    }


def write_catalog(
    path: Path | str, queries: Mapping[str, CatalogQuery], *, capacity: CapacityBudget | None = None
) -> Path:
    """Write :func:`catalog_document` of ``queries`` and ``capacity`` to ``path`` (the stack's asset, local tools,
    tests), and return the path."""
    path = Path(path)
    document = catalog_document(queries, capacity=capacity)
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _spec_document(spec: JobSpec) -> dict[str, Any]:
    """The spec as the catalog holds it: typed JSON, without the stack-wide alarm email."""
    raw = as_raw(spec)
    raw["alarms"] = {**raw["alarms"], "email": None}
    return raw
