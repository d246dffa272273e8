"""The capacity budget's part of ``athena-once cost``'s tables: its section (metrics, the semaphore per slot, per job
waiting in place against giving the slot back) and its assumptions' lines (:mod:`tools.cost.capacity` computes
them)."""

from __future__ import annotations

from rich.console import Console

from athena_refresh.cost import format_usd
from tools.cli.render import table as render_table
from tools.cost import usage
from tools.cost.capacity import CapacityEstimate
from tools.cost.monthly import DeploymentEstimate

__all__ = ["capacity_assumptions", "render_capacity", "semaphore_assumption"]


def semaphore_assumption(budget: CapacityEstimate | None) -> str:
    if budget is None or budget.semaphore is None:
        return " The capacity budget is off (permits 0): no semaphore request."
    sem = budget.semaphore
    return (
        f" With the capacity budget ({sem.permits} permits), a winner that does not wait also reads the semaphore"
        f" (1 strongly consistent BatchGetItem of {sem.permits} permit items and the tickets item: 1 RRU per item"
        f" of up to 4 KB, {sem.read_units} RRU), takes a permit (1 conditional UpdateItem, {sem.take_write_units}"
        f" WRU), records its query on it and releases it inside the record_state and commit transactions"
        f" ({sem.record_write_units} + {sem.release_write_units} WRU: a transaction bills twice); it is never"
        f" renewed once its query is recorded, whatever the query's length."
    )


def capacity_assumptions(budget: CapacityEstimate | None, dep: DeploymentEstimate) -> list[str]:
    if budget is None or not budget.enabled:
        return []
    metrics = (
        f"Capacity budget metrics: {', '.join(budget.metric_names)} (dimension service only, the deployment's),"
        f" sent by every winner: billed for the hours in which some job fires, the sum of the jobs' shares capped"
        f" at all of them ({dep.capacity_metric_hours_share:.1%}; an upper bound when jobs fire in the same hours);"
        " in the deployment's line, so in each job's share."
    )
    waiting = (
        "Capacity waiting (not in the totals: how often slots wait is unknown): waiting W s in place is the job's"
        " memory for W s, one semaphore read per poll (0.5 s doubling to 5 s, jittered to 75% on average), the lease"
        " renewed every heartbeat interval and the ticket every 30 s; giving the slot back is 1 Scheduler invocation"
        " ($1.00 per million after the free tier, https://aws.amazon.com/eventbridge/pricing/; creating the schedule"
        " is free), 1 more Lambda request billed a loser's duration to re-acquire (INIT only when retry_delay_s is"
        f" past {usage.COLD_AFTER_IDLE_S // 60} min), the wait recorded (record_state), the line left, the lease"
        " released and taken over again (and its slot item read). Break-even: the shortest wait in place that costs"
        " a give-back."
    )
    return [metrics, waiting]


def render_capacity(budget: CapacityEstimate, console: Console) -> None:
    """The capacity budget's section: its metrics, the semaphore per slot, and per job waiting against giving back."""
    console.print("Capacity budget", style="bold")
    if budget.semaphore is None:
        console.print("  off (permits 0): no metric, no semaphore request, no waiting", soft_wrap=True)
        console.print()
        return
    sem, s = budget.semaphore, budget.settings
    console.print(
        f"  {s.permits} permits, wait in place up to {s.wait_in_place_s} s, then back {s.retry_delay_s} s later."
        f" Metrics {' and '.join(budget.metric_names)}: {format_usd(budget.metrics_monthly_usd)}/month for the"
        f" deployment ({budget.metric_hours_share:.1%} of the hours). Semaphore per slot without waiting:"
        f" {sem.read_units} RRU + {sem.write_units} WRU = {format_usd(budget.semaphore_per_slot_usd)}"
        f" (nothing per heartbeat).",
        soft_wrap=True,
    )
    table = render_table(
        ("job", "wait", "from", "in place", "give back", "cheaper", "break-even"),
        right=("wait", "in place", "give back", "break-even"),
        title="waiting for a permit: in place against giving the slot back (per wait)",
        title_justify="left",
    )
    for job in budget.jobs:
        even = "never (900 s)" if job.break_even_s is None else f"{job.break_even_s:g} s"
        for wait in job.waits:
            table.add_row(
                f"{job.job} ({job.memory_mb} MB)",
                f"{wait.wait_s:g} s",
                wait.origin,
                format_usd(wait.in_place.usd),
                format_usd(wait.give_back.usd),
                wait.cheaper.replace("_", " "),
                even,
            )
    console.print(table)
    if budget.p95_wait_s is None:
        console.print("  (no capacity-report.json with wait_s.p95: only the configured wait is priced)", soft_wrap=True)
    console.print()
