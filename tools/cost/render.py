"""How ``python -m tools.cost`` prints its :class:`Report`: a rich table per job by service (per slot, per month, the
basis of each figure, the job's fixed monthly cost), the deployment's lines, each job's fixed cost and the grand
total, the read API's price per 1,000 reads, what moves each job's cost, and every assumption; or the same as one
JSON document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from athena_refresh import contract
from athena_refresh.cost import Prices, athena_billed_bytes, format_usd
from stacks.jobs import JobDefinition
from tools.cli.render import table as render_table
from tools.cost import monthly, usage
from tools.cost.capacity import CapacityEstimate
from tools.cost.inputs import REPRESENTATIVE_DAY, SampleRun
from tools.cost.monthly import DeploymentEstimate, JobEstimate
from tools.cost.render_capacity import capacity_assumptions, render_capacity, semaphore_assumption
from tools.cost.usage import Durations

SERVICE_LABELS = {
    "athena": "Athena",
    "lambda": "Lambda",
    "dynamodb": "DynamoDB",
    "scheduler": "EventBridge Scheduler",
    "s3": "S3 (offloaded rows)",
    "cloudwatch_metrics": "CloudWatch metrics",
    "cloudwatch_alarms": "CloudWatch alarms",
    "cloudwatch_logs": "CloudWatch logs",
}


@dataclass(frozen=True)
class Report:
    prices: Prices
    durations: Durations
    jobs: tuple[JobEstimate, ...]
    runs: Mapping[str, SampleRun]
    definitions: Mapping[str, JobDefinition]
    deployment: DeploymentEstimate
    #: job -> (value series its sample rows give, below max_series; the value metrics' cost at that count)
    observed_values: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    #: The capacity budget's section (``None``: not estimated).
    capacity: CapacityEstimate | None = None

    @property
    def total_usd(self) -> float:
        return monthly.grand_total(self.jobs, self.deployment)

    def fixed_monthly_usd(self, job: JobEstimate) -> float:
        return monthly.fixed_monthly_usd(job, self.deployment)


def assumptions(report: Report) -> list[str]:
    p, d = report.prices, report.durations
    where = f"{p.region}" + (f" (no prices for {p.requested_region}: {p.region}'s stand in)" if p.fallback else "")
    year = report.jobs[0].inputs.schedule.year if report.jobs else usage.REFERENCE_YEAR
    lines: list[str] = []
    lines.append(
        f"ESTIMATE at AWS list prices of {where}, read {p.retrieved} (lambdas/athena_refresh/prices.toml):"
        " on-demand, no free tier; not counted: data transfer, table and bucket storage, KMS, X-Ray, SNS."
    )
    lines.append(
        f"A month is 30.4375 days; slots are the schedule's firings in {year} (UTC, EventBridge Scheduler's"
        " daylight-saving rules) scaled to 365.25 days / 12."
    )
    lines.append(
        f"Winner {d.winner_s:g} s (--winner-duration-s: an Athena query of a few seconds, seen done by the poll"
        f" loop's 200/400/800/1600 ms backoff, and its DynamoDB requests); each loser {d.loser_ms:g} ms"
        " (--loser-duration-ms: one conditional write and the handler's own work)."
    )
    lines.append(
        f"Cold start: +{d.cold_start_ms:g} ms INIT (--cold-start-ms) on every invocation whose previous firing is"
        f" over {usage.COLD_AFTER_IDLE_S // 60} min earlier (idle environments are reclaimed), none otherwise."
    )
    lines.append(
        "Athena: a sample job's query is measured on the sample (local engine, bytes as Athena bills them) for its"
        f" first slot on {REPRESENTATIVE_DAY}; other sources assume Athena's {p.athena_min_mb_per_query} MB"
        " minimum unless --scan-bytes; billed per query rounded up to the MB, at least the minimum."
    )
    lines.append(
        "DynamoDB (on-demand): the winner's acquisition (1 conditional UpdateItem), record_state (a transaction"
        " of 2 items), one renewal per heartbeat interval of its duration and the commit (lock, slot, result and"
        " LATEST items, as the runtime models it); each loser's failed conditional write: 1 WRU."
        + semaphore_assumption(report.capacity)
    )
    lines.append(
        f"CloudWatch metrics per job: {', '.join(usage.JOB_METRICS)} (dimensions service + job;"
        " LastSuccessAgeS from every invocation, the other two from the winner once per committed slot), prorated by"
        " the hours in which the job fires (custom metrics are metered only in hours they are sent); value series at"
        " max_series, on their own line. Deployment-wide counts"
        f" ({', '.join(usage.DEPLOYMENT_METRICS)}: no job dimension) are sent only when one happens: counted as"
        f" {usage.DEPLOYMENT_METRIC_HOURS_PER_MONTH:g} hours a month ($0 when all is well; about"
        f" {format_usd(p.cloudwatch_usd_per_metric_month / usage.HOURS_PER_MONTH)} per metric per hour with one)."
    )
    lines += capacity_assumptions(report.capacity, report.deployment)
    lines.append(
        "CloudWatch alarms: standard resolution, per alarm metric (a metric math alarm counts each metric); a job's"
        " are the alarms of its construct in its job stack, the deployment's every other alarm (the shared stack's"
        f" deployment-wide alarms); dashboards: {p.cloudwatch_usd_per_dashboard_month:g} USD each (the account's"
        " first 3 free: not deducted)."
    )
    dep = report.deployment
    lines.append(
        f"Dashboard views: {dep.views_per_month:g} a month (--dashboard-views; each refresh counts: auto-refresh every"
        f" minute is 1,440 a day). Each runs the overview widget once (one {usage.WIDGET_DURATION_MS:g} ms invocation"
        f" at the read side's memory, reading per job its lock item, LATEST item and its 4 newest slots' items (its freshness) with"
        f" consistent BatchGetItem: {dep.overview_read_units_per_view} RRU per view) and the 'Latest runs' Logs"
        f" Insights query over the one job log group for the dashboard's default {usage.DASHBOARD_RANGE_H} hours: the"
        f" log bytes every job writes in {usage.DASHBOARD_RANGE_H} hours"
        f" ({dep.logs_insights_gb_per_view * 1024:,.3f} MB per view), at"
        f" {p.cloudwatch_usd_per_gb_logs_insights_scanned:g} USD per GB scanned. Graphs and the job variable's drop-down are read by the console: not counted."
    )
    lines.append(
        f"Fixed monthly cost of a job: every line but Athena (its query's scan) for the job without its value metrics,"
        f" plus its equal share of what the deployment spends for all {dep.jobs} jobs deployed (dashboard,"
        " deployment-wide alarms and metrics, the capacity budget's two metrics, the widget's Lambda and reads, the"
        " Logs Insights scans) divided by the number of jobs."
    )
    lines.append(
        f"CloudWatch logs per invocation (measured in make demo's logs): winner {usage.WINNER_LOG_BYTES} B +"
        f" {usage.VALUE_BLOB_BYTES} B + {usage.VALUE_COLUMN_BYTES} B per value column per series, loser"
        f" {usage.LOSER_LOG_BYTES} B, + {usage.PLATFORM_LOG_BYTES} B of Lambda's own records (assumed),"
        f" + {usage.COLD_START_LOG_BYTES} B when cold; measured before issue 23 moved most metrics into the one log"
        " line (an upper bound); ingested, and stored for the one-month retention uncompressed (an upper bound)."
    )
    lines.append(
        f"Read API: per 1,000 reads, one warm {monthly.READ_API_DURATION_MS:g} ms invocation and a"
        f" {monthly.READ_API_READ_UNITS:g} RRU read each; usage unknown, so not in the totals."
    )
    return lines


def report_json(report: Report) -> dict[str, Any]:
    jobs = []
    for job in report.jobs:
        i, run = job.inputs, report.runs.get(job.inputs.name)
        config = report.definitions[i.name].config
        jobs.append(
            {
                "job": i.name,
                "schedule": {"expression": config.schedule_expression, "timezone": config.schedule_timezone},
                "racers": i.racers,
                "slots_per_month": round(i.schedule.slots_per_month, 4),
                "firings_in_reference_year": i.schedule.firings,
                "cold_share": round(i.schedule.cold_fraction, 6),
                "metric_month_share": round(i.schedule.metric_month_fraction, 6),
                "scan": {
                    "bytes": i.scan.bytes,
                    "billed_bytes": athena_billed_bytes(i.scan.bytes, min_mb=report.prices.athena_min_mb_per_query),
                    "origin": i.scan.origin,
                    "detail": i.scan.detail,
                },
                "sample": None
                if run is None
                else {
                    "slot": run.slot.isoformat().replace("+00:00", "Z"),
                    "parameters": list(run.parameters),
                    "rows": run.commit.rows,
                    "value_series_observed": run.series_observed,
                },
                "per_slot": job.per_slot.as_dict(),
                "dynamodb_winner_write_units": {
                    "acquire": job.writes.acquire,
                    "record_state": job.writes.record_state,
                    "heartbeats": job.writes.heartbeats,
                    "commit": job.writes.commit,
                    "semaphore": job.writes.semaphore,
                    "total": job.writes.total,
                },
                "dynamodb_winner_read_units": job.usage.read_units,
                "metrics": {
                    "job": job.metrics.job,
                    "value_series": job.metrics.value_series,
                    "total": job.metrics.total,
                },
                "alarms": {
                    "alarms": i.alarms.alarms,
                    "alarm_metrics": i.alarms.alarm_metrics,
                    "high_resolution": i.alarms.high_resolution,
                },
                "log_bytes": {"winner": round(job.logs.winner), "loser": round(job.logs.loser)},
                "monthly_usd": dict(job.monthly),
                "total_usd": job.total_usd,
                "fixed_monthly_usd": report.fixed_monthly_usd(job),
                "watch_monthly_usd": monthly.watch_monthly_usd(job, report.deployment),
                "watch_monthly_opt_in_usd": monthly.watch_monthly_usd(job, report.deployment, opt_in=True),
                "watch_monthly_parts_usd": {
                    "own_metrics_and_alarms": job.watch_own_usd,
                    "own_metrics_and_alarms_opt_in": job.watch_own_opt_in_usd,
                    "deployment_share": report.deployment.watch_share_usd,
                },
                "per_job_metrics": i.per_job_metrics,
                "fixed_monthly_parts_usd": {
                    **job.fixed_own,
                    "deployment_share": report.deployment.share_usd,
                },
                "what_moves_it": {
                    "one_more_racer_usd": job.one_more_racer_usd,
                    "value_metrics_usd": job.value_metrics_usd,
                    "value_metrics_at_sample_series_usd": report.observed_values[i.name][1]
                    if i.name in report.observed_values
                    else None,
                },
            }
        )
    dep = report.deployment
    return {
        "estimate": True,
        "currency": "USD",
        "prices": report.prices.label(),
        "days_per_month": usage.DAYS_PER_MONTH,
        "reference_year": usage.REFERENCE_YEAR,
        "durations": {
            "winner_s": report.durations.winner_s,
            "loser_ms": report.durations.loser_ms,
            "cold_start_ms": report.durations.cold_start_ms,
        },
        "jobs": jobs,
        "deployment": {
            "jobs": dep.jobs,
            "dashboards": dep.dashboards,
            "alarms": dep.alarms.alarms,
            "alarm_metrics": dep.alarms.alarm_metrics,
            "dashboard_views_per_month": dep.views_per_month,
            "logs_insights_gb_per_view": round(dep.logs_insights_gb_per_view, 9),
            "overview_read_units_per_view": dep.overview_read_units_per_view,
            "monthly_usd": dict(dep.parts),
            "total_usd": dep.total_usd,
            "share_per_job_usd": dep.share_usd,
            "watch_usd": dep.watch_usd,
            "watch_share_per_job_usd": dep.watch_share_usd,
            "watchdog_period_s": dep.watchdog.period_s,
        },
        "capacity": report.capacity.as_dict() if report.capacity is not None else None,
        "read_api_per_1000_reads_usd": dict(dep.read_api_per_thousand),
        "total_usd": report.total_usd,
        "assumptions": assumptions(report),
    }


# --- the table ---------------------------------------------------------------------------------------------------
def _bytes(n: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def _basis(job: JobEstimate, durations: Durations) -> dict[str, str]:
    i, e, u = job.inputs, job.per_slot, job.usage
    losers = i.racers - 1
    cold = i.schedule.cold_fraction
    cold_text = f", +{durations.cold_start_ms:g} ms INIT on {cold:.0%} of slots" if cold else ", warm"
    scan_flag = " (ASSUMED)" if i.scan.origin == "assumed" else ""
    return {
        "athena": f"{_bytes(e.athena_billed_bytes)} billed per slot; scans {_bytes(i.scan.bytes)}{scan_flag}:"
        f" {i.scan.detail}",
        "lambda": f"winner {durations.winner_s * 1000:,.0f} ms + {losers} loser(s) x {durations.loser_ms:g} ms"
        f"{cold_text}; {u.memory_mb} MB {u.architecture}: {e.lambda_gb_s:.4f} GB-s, {e.lambda_requests} requests",
        "dynamodb": f"winner {job.writes.total} WRU (acquire {job.writes.acquire}, state {job.writes.record_state},"
        f" {job.writes.heartbeats} heartbeat(s), commit {job.writes.commit}"
        + (f", permit {job.writes.semaphore}) + {u.read_units:g} RRU" if job.writes.semaphore else ")")
        + f" + {losers} loser(s) x {u.loser_write_units:g} WRU",
        "scheduler": f"{i.racers} invocations per slot",
        "s3": "1 PUT of offloaded rows per slot",
        "cloudwatch_metrics": f"{job.metrics.total} metrics ({job.metrics.job} per job,"
        f" {job.metrics.value_metrics} value metrics) x {i.schedule.metric_month_fraction:.1%} of the month's hours",
        "cloudwatch_alarms": f"{i.alarms.alarms} alarms, {i.alarms.alarm_metrics} alarm metrics"
        + (
            f" ({i.alarms.high_resolution} high-resolution, priced as standard: the price table has no other price)"
            if i.alarms.high_resolution
            else ""
        ),
        "cloudwatch_logs": f"{_bytes(job.logs.winner)} winner + {losers} x {_bytes(job.logs.loser)} per slot:"
        f" {_bytes(job.log_gb_per_month * 2**30)}/month ingested and stored",
    }


#: With more jobs than this and no selection, each job is one line (its detail: ``athena-once cost -s JOB``).
SUMMARY_AFTER_JOBS = 5


def render_summary(report: Report, console: Console) -> None:
    """One line per job: schedule, slots a month, the month by service and in total, the fixed monthly cost."""
    table = render_table(
        ("job", "schedule", "slots/month", "Athena", "Lambda", "DynamoDB", "CloudWatch", "other", "total", "fixed"),
        right=("slots/month", "Athena", "Lambda", "DynamoDB", "CloudWatch", "other", "total", "fixed"),
        title=f"{len(report.jobs)} jobs, per month (ESTIMATE; a job's detail: athena-once cost -s JOB)",
        title_justify="left",
    )
    cloudwatch = ("cloudwatch_metrics", "cloudwatch_alarms", "cloudwatch_logs")
    for job in report.jobs:
        config = report.definitions[job.inputs.name].config
        month = job.monthly
        listed = ("athena", "lambda", "dynamodb", *cloudwatch)
        table.add_row(
            job.inputs.name,
            f"{config.schedule_expression} {config.schedule_timezone}",
            f"{job.inputs.schedule.slots_per_month:,.1f}",
            format_usd(month["athena"]),
            format_usd(month["lambda"]),
            format_usd(month["dynamodb"]),
            format_usd(sum(month[name] for name in cloudwatch)),
            format_usd(sum(value for name, value in month.items() if name not in listed)),
            format_usd(job.total_usd),
            format_usd(report.fixed_monthly_usd(job)),
        )
    console.print(table)
    console.print()


def render(report: Report, console: Console, *, detail: Sequence[str] | None = None) -> None:
    """The report as tables. ``detail``: the jobs whose tables are shown (``None``: every job when there are at most
    :data:`SUMMARY_AFTER_JOBS`, else one line each); the deployment's lines always count every job."""
    summary = detail is None and len(report.jobs) > SUMMARY_AFTER_JOBS
    shown = {job.inputs.name for job in report.jobs} if detail is None else set(detail)
    if summary:
        render_summary(report, console)
    for job in report.jobs:
        if summary or job.inputs.name not in shown:
            continue
        i = job.inputs
        config = report.definitions[i.name].config
        per_slot = job.per_slot.as_dict()["by_service_usd"]
        table = render_table(
            ("service", "per slot", "per month", "basis"),
            right=("per slot", "per month"),
            fold=("basis",),
            title=f"{i.name}: `{config.schedule_expression}` in {config.schedule_timezone}, {i.racers} racers,"
            f" {i.schedule.slots_per_month:,.2f} slots/month (ESTIMATE)",
            title_justify="left",
        )
        basis = _basis(job, report.durations)
        for service in monthly.SERVICES:
            if service == "s3" and not job.monthly[service]:
                continue
            slot_usd = per_slot.get(service)
            table.add_row(
                SERVICE_LABELS[service],
                "-" if slot_usd is None else format_usd(slot_usd),
                format_usd(job.monthly[service]),
                basis[service],
            )
        table.add_row("total", format_usd(job.per_slot.total_usd), format_usd(job.total_usd), "", style="bold")
        table.add_row(
            "fixed monthly",
            "-",
            format_usd(report.fixed_monthly_usd(job)),
            f"all but Athena and value metrics ({format_usd(job.fixed_own_usd)}) + its share of the deployment"
            f" ({format_usd(report.deployment.share_usd)} = 1/{report.deployment.jobs})",
            style="bold",
        )
        table.add_row(
            "watch monthly",
            "-",
            format_usd(monthly.watch_monthly_usd(job, report.deployment)),
            f"its own metrics and alarm ({format_usd(job.watch_own_usd)}; with per_job_metrics ="
            f" true {format_usd(job.watch_own_opt_in_usd)}) + its share of the dashboard, alarms and watchdog"
            f" ({format_usd(report.deployment.watch_share_usd)})",
        )
        console.print(table)
        console.print()
    dep = report.deployment
    table = render_table(
        ("line", "per month", "basis"),
        right=("per month",),
        fold=("basis",),
        title=f"deployment (shared by its {dep.jobs} jobs)",
        title_justify="left",
    )
    basis = {
        "dashboard": f"{dep.dashboards} dashboard(s): an overview of every job, one job's graphs by a variable",
        "alarms": f"{dep.alarms.alarms} deployment-wide alarms, {dep.alarms.alarm_metrics} alarm metrics",
        "deployment_metrics": f"{len(usage.DEPLOYMENT_METRICS)} counts without a job dimension, sent only when one"
        " happens (none assumed)",
        "capacity_metrics": f"{dep.capacity_metrics} capacity metrics ({', '.join(usage.CAPACITY_METRICS)}), sent by"
        f" every winner: {dep.capacity_metric_hours_share:.1%} of the month's hours"
        if dep.capacity_metrics
        else "capacity budget off (permits 0)",
        "widget_lambda": f"{dep.views_per_month:g} views x one {usage.WIDGET_DURATION_MS:g} ms overview render",
        "widget_dynamodb": f"{dep.views_per_month:g} views x {dep.overview_read_units_per_view} RRU",
        "logs_insights": f"{dep.views_per_month:g} views x {_bytes(dep.logs_insights_gb_per_view * 2**30)}"
        f" ({contract.DASHBOARD_LOG_QUERIES_PER_VIEW} queries over {usage.DASHBOARD_RANGE_H} h of every job's logs)"
        f" at {report.prices.cloudwatch_usd_per_gb_logs_insights_scanned:g} USD/GB",
        "watchdog": f"one function every {dep.watchdog.period_s // 60} min (half the shortest job period, 5 to 15),"
        f" {dep.watchdog.racers} racers, reading {dep.jobs} jobs' lock and slot items, {dep.watchdog.metrics} metrics"
        " every run, OldestLatenessS only while a job is late or failing (its 2 alarms: in the alarms line)"
        " (athena_refresh.cost.WatchdogModel)",
    }
    labels = {
        "dashboard": "CloudWatch dashboard",
        "alarms": "CloudWatch alarms (deployment-wide)",
        "deployment_metrics": "CloudWatch metrics (deployment-wide)",
        "capacity_metrics": "CloudWatch metrics (capacity budget)",
        "widget_lambda": "Overview widget: Lambda",
        "widget_dynamodb": "Overview widget: DynamoDB reads",
        "logs_insights": "Logs Insights (Latest runs) and the job's runs",
        "watchdog": "Freshness watchdog",
    }
    for line in monthly.DEPLOYMENT_LINES:
        table.add_row(labels[line], format_usd(dep.parts[line]), basis[line])
    table.add_row("deployment total", format_usd(dep.total_usd), "", style="bold")
    table.add_row("share per job", format_usd(dep.share_usd), f"the total / {dep.jobs} jobs", style="bold")
    for job in report.jobs:
        if summary:
            break  # one line each above
        table.add_row(
            f"job {job.inputs.name}",
            format_usd(job.total_usd),
            f"fixed monthly {format_usd(report.fixed_monthly_usd(job))}",
        )
    table.add_row("grand total", format_usd(report.total_usd), "per month, ESTIMATE", style="bold")
    console.print(table)
    api = dep.read_api_per_thousand
    console.print(
        f"Read API, per 1,000 reads (not in the total, usage unknown): {format_usd(api['total'])}"
        f" (HTTP API {format_usd(api['apigateway'])}, Lambda {format_usd(api['lambda'])},"
        f" DynamoDB {format_usd(api['dynamodb'])})",
        soft_wrap=True,
    )
    console.print()
    if report.capacity is not None:
        render_capacity(report.capacity, console)
    console.print("What moves it", style="bold")
    if summary:
        console.print("  per job (one more racer, value metrics): athena-once cost -s JOB", soft_wrap=True)
    for job in report.jobs:
        if summary or job.inputs.name not in shown:
            continue
        i = job.inputs
        values = (
            f"value metrics (opt-in, not in the fixed cost): {job.metrics.value_metrics} metrics at"
            f" max_series={i.value_max_series} and their log lines, {format_usd(job.value_metrics_usd)}/month"
            if i.value_columns
            else "no value metrics"
        )
        if i.name in report.observed_values:
            seen, seen_usd = report.observed_values[i.name]
            values += f" ({format_usd(seen_usd)} at the {seen} series the sample's rows give)"
        console.print(
            f"  {i.name}: one more racer {format_usd(job.one_more_racer_usd)}/month; {values};"
            f" of {format_usd(job.total_usd)}",
            soft_wrap=True,
        )
    console.print()
    console.print("Assumptions", style="bold")
    for line in assumptions(report):
        console.print(f"  - {line}", soft_wrap=True)
