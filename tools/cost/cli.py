"""``python -m tools.cost`` (``make cost``): each job's estimated monthly cost by service, before deploying.

    python -m tools.cost [--jobs-dir jobs] [--region R] [--scan-bytes JOB=BYTES ...] [--winner-duration-s 3.0]
                         [--loser-duration-ms 100] [--cold-start-ms 700] [--dashboard-views 600]
                         [--capacity-report capacity-report.json] [--format table|json]

Per job: slots per month from its schedule; one slot's Athena scan (a sample job's query measured on the sample
data with the local engine; a job on its own Glue table measured on its sample files under ``.cache/data/<table>/``
or ``--data DIR`` when present, at the last slot inside the newest day partition; else ``--scan-bytes`` or Athena's
10 MB minimum, the line saying why), Lambda, DynamoDB and Scheduler
usage priced by :mod:`athena_refresh.cost`; CloudWatch metrics, alarms (counted in the synthesized job stacks)
and logs per month. Then what the deployment spends for all jobs (the dashboard, the deployment-wide alarms of the
shared stack, the overview widget and the "Latest runs" Logs Insights scans at ``--dashboard-views`` a month),
each job's fixed monthly cost (everything but its query's scan and its value metrics, plus its equal share of the
deployment's), the grand total, the read API's price per 1,000 reads, what the capacity budget costs (its metrics,
the semaphore's requests per slot, waiting in place against giving the slot back), every assumption, and what moves
each job's cost. The model: :mod:`tools.cost.usage` (a slot), :mod:`tools.cost.monthly` (a month) and
:mod:`tools.cost.capacity` (the capacity budget); docs/cost.md.

Exit status: 0 estimated; 1 the machine lacks something (no ``node`` for the synth, sample data that cannot be
built); 2 bad input (a malformed flag, an unknown job, a broken job folder, a query failing on the sample);
130 interrupted. Each failure is one ``error:`` line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from athena_refresh.cost import MB, Prices, PriceTableError, load_prices
from slotlock.schedule import CronError
from stacks.jobs import GlueSource, JobDefinition
from tools.aws_errors import error_line
from tools.cli.exit_status import ExitStatus
from tools.cli.params import OneLineParser, non_negative_float
from tools.cli.program import prog
from tools.cli.render import console_for, print_json
from tools.cli.selection import SelectionError, add_select_argument, patterns, select
from tools.cost import capacity, inputs, monthly, usage
from tools.cost.inputs import CostEnvironmentError, CostInputError, SampleRun, Synthesis
from tools.cost.render import SUMMARY_AFTER_JOBS, Report, render, report_json
from tools.cost.usage import AlarmCount, Durations, JobInputs, Scan
from tools.jobs import common as jobs_common

FORMATS = ("table", "json")
DEFAULT_JOBS_DIR = inputs.REPO_ROOT / "jobs"
EXIT_ENVIRONMENT = ExitStatus.FAILED
EXIT_USAGE = ExitStatus.USAGE
EXIT_INTERRUPTED = ExitStatus.INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog("python -m tools.cost"),
        description=__doc__.split("\n\n")[0],
        epilog="Every figure is an ESTIMATE (docs/cost.md). Exit status: 0 estimated; 1 the machine lacks"
        " something (node, the sample data); 2 bad input.",
    )
    parser.add_argument("--jobs-dir", type=Path, default=DEFAULT_JOBS_DIR, help="the job folders (default jobs/)")
    parser.add_argument(
        "--region",
        default=None,
        help="whose prices (default: AWS_REGION, AWS_DEFAULT_REGION, else the price table's default region)",
    )
    parser.add_argument(
        "--scan-bytes",
        action="append",
        default=[],
        metavar="JOB=BYTES",
        help="bytes one slot's query scans (repeatable; default: measured on the sample for a sample job, on your"
        " own table's files when present (--data), else Athena's 10 MB minimum, flagged as assumed)",
    )
    parser.add_argument(
        "--winner-duration-s",
        type=non_negative_float,
        default=usage.DEFAULT_WINNER_DURATION_S,
        help=f"the winner's duration (default {usage.DEFAULT_WINNER_DURATION_S:g}: a query of a few seconds"
        " and its polling)",
    )
    parser.add_argument(
        "--loser-duration-ms",
        type=non_negative_float,
        default=usage.DEFAULT_LOSER_DURATION_MS,
        help=f"a loser's duration (default {usage.DEFAULT_LOSER_DURATION_MS:g}: one DynamoDB request and the"
        " handler's own work)",
    )
    parser.add_argument(
        "--cold-start-ms",
        type=non_negative_float,
        default=usage.DEFAULT_COLD_START_MS,
        help=f"INIT added to every invocation that follows an idle gap over"
        f" {usage.COLD_AFTER_IDLE_S // 60} min (default {usage.DEFAULT_COLD_START_MS:g})",
    )
    parser.add_argument(
        "--dashboard-views",
        type=non_negative_float,
        default=usage.DEFAULT_DASHBOARD_VIEWS_PER_MONTH,
        help=f"views (and refreshes) of the dashboard per month (default {usage.DEFAULT_DASHBOARD_VIEWS_PER_MONTH}:"
        " about 20 a day); each runs the overview widget and the Logs Insights query",
    )
    parser.add_argument(
        "--capacity-report",
        type=Path,
        default=inputs.CAPACITY_REPORT,
        help="a capacity report whose wait_s.p95 (seconds) is priced too, when the file exists (default"
        " capacity-report.json at the repository's root)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="where your own tables' sample files are, DIR/<table>/**/*.parquet (default .cache/data): a job on its"
        " own Glue table is measured on them",
    )
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    add_select_argument(
        parser,
        help="show these jobs' detail (names or globs, a union); the deployment's figures still count every job."
        f" Without it, more than {SUMMARY_AFTER_JOBS} jobs are one line each",
    )
    return parser


def parse_scan_bytes(specs: Sequence[str], job_names: Sequence[str]) -> dict[str, int]:
    """``JOB=BYTES`` flags -> {job: bytes}. :raises CostInputError: malformed, unknown job, or a job twice."""
    scans: dict[str, int] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name, text = name.strip(), text.strip().replace("_", "")
        if not sep or not name or not text.isdigit():
            raise CostInputError(f"--scan-bytes {spec!r}: expected JOB=BYTES, BYTES a whole number >= 0")
        if name not in job_names:
            raise CostInputError(f"--scan-bytes {spec!r}: no job {name!r}; jobs: {', '.join(job_names) or 'none'}")
        if name in scans:
            raise CostInputError(f"--scan-bytes {spec!r}: job {name!r} given twice")
        scans[name] = int(text)
    return scans


def default_region(env: Mapping[str, str]) -> str | None:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


# --- the report -------------------------------------------------------------------------------------------------
def job_inputs(
    job: JobDefinition,
    alarms: AlarmCount,
    prices: Prices,
    *,
    scan_flag: int | None,
    run: SampleRun | None,
    capacity_permits: int = 0,
    no_files: str | None = None,
) -> JobInputs:
    """One job's inputs; ``no_files``: why its scan could not be measured locally (one line), when it could not."""
    config = job.config
    try:
        rate = usage.schedule_rate(config.schedule_expression, config.schedule_timezone)
    except CronError as exc:
        raise CostInputError(
            f"{job.folder.parent.name}/{job.folder.name}/job.toml: schedule_expression: {exc}"
        ) from exc
    if run is not None:
        commit = run.commit
    else:
        commit = inputs.assumed_commit(job, inputs.representative_slot(job), scan_flag or 0)
    if scan_flag is not None:
        scan = Scan(scan_flag, "flag", "--scan-bytes")
    elif run is not None:
        slot = run.slot.strftime("%Y-%m-%dT%H:%MZ")
        on = run.measured_on or f"sample:{job.source.table}"
        scan = Scan(run.data_scanned_bytes, "measured", f"{on} on DuckDB, slot {slot}")
    else:
        missing = "" if no_files is None else f": {no_files}"
        scan = Scan(
            prices.athena_min_mb_per_query * MB, "assumed", f"Athena's minimum{missing}; give --scan-bytes JOB=BYTES"
        )
    values = config.value_metrics
    return JobInputs(
        name=job.job_name,
        racers=config.racers,
        memory_mb=config.lambda_memory_mb,
        heartbeat_interval_s=float(config.heartbeat_interval_s),
        schedule=rate,
        period_s=config.period.shortest_s,
        scan=scan,
        result_writes=commit.writes,
        summary_bytes=commit.summary_bytes,
        alarms=alarms,
        value_columns=len(values.columns) if values else 0,
        value_max_series=values.max_series if values else 0,
        rows_offloaded=commit.rows_offloaded,
        capacity_permits=capacity_permits,
        per_job_metrics=config.per_job_metrics,
    )


def build_report(
    args: argparse.Namespace,
    *,
    env: Mapping[str, str],
    synthesize: Callable[[Path], Synthesis] = inputs.synthesize,
    data_dir: Callable[[], Path] = inputs.sample_data_dir,
) -> Report:
    """Everything :func:`main` prints. :raises CostInputError: bad input, named."""
    try:
        prices = load_prices(args.region or default_region(env))
    except PriceTableError as exc:
        raise CostInputError(str(exc)) from exc
    jobs_dir = Path(args.jobs_dir)
    definitions = inputs.load_definitions(jobs_dir)
    budget = inputs.load_capacity()
    p95_wait_s = inputs.capacity_p95_wait_s(Path(args.capacity_report))
    names = [job.job_name for job in definitions]
    scans = parse_scan_bytes(args.scan_bytes, names)
    synthesis = synthesize(jobs_dir)
    try:
        alarms = inputs.count_alarms(synthesis)
    except ValueError as exc:
        raise CostInputError(f"the synthesized deployment: {exc}") from exc
    durations = Durations(args.winner_duration_s, args.loser_duration_ms, args.cold_start_ms)
    runs: dict[str, SampleRun] = {}
    observed: dict[str, tuple[int, float]] = {}
    estimates = []
    sample_dir: Path | None = None
    for job in definitions:
        own = jobs_common.own_table_dir(job, args.data)
        no_files = None
        if inputs.is_measurable(job):
            sample_dir = sample_dir or data_dir()
            runs[job.job_name] = inputs.measure_sample(job, data_dir=sample_dir, slot=inputs.representative_slot(job))
        elif own is not None:  # your own table's files: measured on them
            slot = inputs.own_data_slot(job, own)
            runs[job.job_name] = inputs.measure_sample(job, data_dir=own.parent, slot=slot, own=True)
        elif isinstance(job.source, GlueSource):
            no_files = jobs_common.no_own_files(job, args.data)
        job_alarms = alarms.per_job.get(job.job_name, AlarmCount())
        made = job_inputs(
            job,
            job_alarms,
            prices,
            scan_flag=scans.get(job.job_name),
            run=runs.get(job.job_name),
            capacity_permits=budget.permits,
            no_files=no_files,
        )
        estimates.append(monthly.estimate_job(made, durations, prices))
        run = runs.get(job.job_name)
        if run is not None and made.value_columns:  # the series the sample's rows give, below the cap
            seen = min(run.series_observed, made.value_max_series)
            observed[job.job_name] = (
                seen,
                monthly.estimate_job(replace(made, value_max_series=seen), durations, prices).value_metrics_usd,
            )
    deployment = monthly.estimate_deployment(
        estimates,
        dashboards=alarms.dashboards,
        alarms=alarms.deployment,
        prices=prices,
        read_api_memory_mb=synthesis.read_api_memory_mb,
        views_per_month=args.dashboard_views,
        capacity_metrics=len(usage.CAPACITY_METRICS) if budget.enabled else 0,
    )
    budget_cost = capacity.estimate_capacity(
        budget,
        [estimate.inputs for estimate in estimates],
        durations,
        prices,
        deployment_parts=deployment.parts,
        metric_hours_share=deployment.capacity_metric_hours_share,
        p95_wait_s=p95_wait_s,
        p95_source=str(args.capacity_report) if p95_wait_s is not None else None,
    )
    definitions_by_name = {j.job_name: j for j in definitions}
    return Report(
        prices, durations, tuple(estimates), runs, definitions_by_name, deployment, observed, capacity=budget_cost
    )


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    env: Mapping[str, str] | None = None,
    synthesize: Callable[[Path], Synthesis] = inputs.synthesize,
    data_dir: Callable[[], Path] = inputs.sample_data_dir,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        report = build_report(args, env=os.environ if env is None else env, synthesize=synthesize, data_dir=data_dir)
    except CostEnvironmentError as exc:
        error_line(err, exc)
        return EXIT_ENVIRONMENT
    except CostInputError as exc:
        error_line(err, exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    try:
        shown = select(args.select, [job.inputs.name for job in report.jobs]) if patterns(args.select) else None
    except SelectionError as exc:
        error_line(err, "; ".join(str(exc).splitlines()))
        return EXIT_USAGE
    if args.format == "json":
        print_json(out, report_json(report), ensure_ascii=True)
    else:
        render(report, console_for(out), detail=shown)
    return 0
