"""What the Athena capacity budget costs (issue 24), the model behind ``make cost``'s capacity section.

Three parts (cdk.json ``context.stack.capacity``; all zero with ``permits`` 0):

- **Its two metrics**, ``PermitsInUse`` and ``PermitWaitMs`` (dimension service only), the deployment's: in its
  ``capacity_metrics`` line (:func:`tools.cost.monthly.estimate_deployment`), so in every job's share of it.
- **The semaphore's requests per slot when no one waits** (:class:`tools.cost.usage.SemaphoreRequests`): in each
  job's DynamoDB line (:func:`tools.cost.usage.slot_usage`).
- **Waiting**: what a slot pays to wait ``W`` seconds in place (:func:`in_place`: the Lambda's GB-seconds at the
  job's memory, its polls and renewals meanwhile), against giving the slot back and coming back later
  (:func:`give_back`: one EventBridge Scheduler invocation, one more Lambda request and its billed time to
  re-acquire, and the DynamoDB requests the give-back and the return add), and the wait at which both cost the
  same (:func:`break_even_s`). Shown for the budget's ``wait_in_place_s`` and, when a ``capacity-report.json``
  gives one, the measured p95 wait. Neither is in the monthly totals: how often slots wait is not known here.

Prices: :mod:`athena_refresh.cost` (``prices.toml``); EventBridge Scheduler bills $1.00 per million invocations
after its free tier (https://aws.amazon.com/eventbridge/pricing/; creating a schedule is not billed).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from athena_refresh.cost import LOCK_ITEM_BYTES, SLOT_ITEM_BYTES, Prices, Usage, estimate
from athena_refresh.permits import CapacityGate
from slotlock.semaphore import DEFAULT_WAITER_TTL_S
from stacks.stack_settings import CapacitySettings
from stacks.value_metrics_cost import COLD_AFTER_IDLE_S
from tools.cost.usage import (
    CAPACITY_METRICS,
    READ_UNIT_BYTES,
    STATE_BYTES,
    Durations,
    JobInputs,
    SemaphoreRequests,
    semaphore_requests,
    single_write_units,
    winner_writes,
)

_GATE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CapacityGate)}
#: A waiter's polls (``CapacityGate``): the first sleep, doubling up to the cap, each jittered to 50-100% (75% on
#: average): 0.375, 0.75, 1.5, 3.0, then 3.75 s.
POLL_INITIAL_S: Final[float] = float(_GATE_DEFAULTS["poll_initial_s"])
POLL_MAX_S: Final[float] = float(_GATE_DEFAULTS["poll_max_s"])
POLL_JITTER_MEAN: Final = 0.75
#: A waiter's ticket is renewed once half its TTL is spent (``slotlock._semaphore_tickets``): one write per 30 s.
TICKET_RENEWAL_S: Final = DEFAULT_WAITER_TTL_S / 2
#: Lambda's longest invocation: no wait in place lasts longer.
MAX_WAIT_IN_PLACE_S: Final = 900.0


def _usd(value: float) -> float:
    return round(value, 9)


def polls_within(wait_s: float) -> int:
    """Semaphore reads after the first one while a slot waits ``wait_s`` seconds in place (mean jitter)."""
    polls, elapsed, delay = 0, 0.0, POLL_INITIAL_S
    while True:
        elapsed += delay * POLL_JITTER_MEAN
        if elapsed > wait_s:
            return polls
        polls += 1
        delay = min(POLL_MAX_S, delay * 2)


@dataclass(frozen=True)
class Cost:
    """One way of spending a wait: its ``usage`` (Lambda GB-seconds and requests, Scheduler invocations, DynamoDB
    units) at ``prices``; USD."""

    usage: Usage
    prices: Prices

    @property
    def parts_usd(self) -> dict[str, float]:
        cost = estimate(self.usage, self.prices)
        return {"lambda": _usd(cost.lambda_), "scheduler": _usd(cost.scheduler), "dynamodb": _usd(cost.dynamodb)}

    @property
    def usd(self) -> float:
        return _usd(sum(self.parts_usd.values()))

    def as_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "usd": self.usd,
            "by_service_usd": self.parts_usd,
            "lambda_gb_s": round(u.lambda_gb_s, 6),
            "lambda_requests": u.lambda_requests,
            "scheduler_invocations": u.scheduler_invocations,
            "read_units": u.read_units,
            "write_units": u.write_units,
        }


def in_place(wait_s: float, job: JobInputs, semaphore: SemaphoreRequests, prices: Prices) -> Cost:
    """Waiting ``wait_s`` seconds inside the invocation: the job's memory for that long, one semaphore read of
    N + 1 items per poll after the first, the lease renewed every heartbeat interval and the ticket every 30 s."""
    renewals = math.floor(wait_s / job.heartbeat_interval_s) if job.heartbeat_interval_s > 0 else 0
    usage = Usage(
        lambda_gb_s=job.memory_mb / 1024 * wait_s,
        lambda_requests=0,
        architecture=job.architecture,
        scheduler_invocations=0,
        read_units=polls_within(wait_s) * semaphore.read_units,
        write_units=renewals * single_write_units(LOCK_ITEM_BYTES) + math.floor(wait_s / TICKET_RENEWAL_S),
    )
    return Cost(usage, prices)


def give_back(job: JobInputs, durations: Durations, prices: Prices, *, retry_delay_s: float) -> Cost:
    """Giving the slot back and coming back ``retry_delay_s`` later, over what waiting in place also pays.

    The waiter records its wait on the slot item (the ``record_state`` transaction), leaves the line (1 WRU),
    creates the one-time schedule (not billed) and releases the lease (1 WRU). The schedule invokes once ($1.00
    per million); the invocation is one more Lambda request, billed a loser's duration to re-acquire (plus INIT
    when ``retry_delay_s`` is past the idle gap after which environments are cold), and takes the lease over (one
    conditional write, 1 WRU; one consistent read of the slot item, 1 RRU). Its semaphore read stands for the
    last poll of a waiter in place: counted on neither side."""
    record_state = winner_writes(
        duration_s=0.0, heartbeat_interval_s=0.0, result_writes=(), summary_bytes=0
    ).record_state
    init_ms = durations.cold_start_ms if retry_delay_s >= COLD_AFTER_IDLE_S else 0.0
    lock = single_write_units(LOCK_ITEM_BYTES)
    usage = Usage(
        lambda_gb_s=job.memory_mb / 1024 * math.ceil(durations.loser_ms + init_ms) / 1000,
        lambda_requests=1,
        architecture=job.architecture,
        scheduler_invocations=1,
        read_units=math.ceil((SLOT_ITEM_BYTES + STATE_BYTES) / READ_UNIT_BYTES),
        write_units=record_state + 1 + lock + lock,
    )
    return Cost(usage, prices)


def break_even_s(job: JobInputs, semaphore: SemaphoreRequests, prices: Prices, give_back_usd: float) -> float | None:
    """The shortest wait in place (seconds, rounded up to 0.01 s) that costs at least what giving the slot back
    costs; ``None`` when even :data:`MAX_WAIT_IN_PLACE_S` costs less."""
    low, high = 0.0, MAX_WAIT_IN_PLACE_S
    if in_place(high, job, semaphore, prices).usd < give_back_usd:
        return None
    while high - low > 0.005:
        middle = (low + high) / 2
        if in_place(middle, job, semaphore, prices).usd < give_back_usd:
            low = middle
        else:
            high = middle
    return math.ceil(round(high * 100, 6)) / 100


@dataclass(frozen=True)
class Wait:
    """One wait ``wait_s`` (``origin``: where the figure comes from) in place, against giving the slot back."""

    wait_s: float
    origin: str
    in_place: Cost
    give_back: Cost

    @property
    def cheaper(self) -> str:
        return "in_place" if self.in_place.usd <= self.give_back.usd else "give_back"

    def as_dict(self) -> dict[str, Any]:
        return {
            "wait_s": self.wait_s,
            "origin": self.origin,
            "in_place_usd": self.in_place.usd,
            "give_back_usd": self.give_back.usd,
            "cheaper": self.cheaper,
            "in_place": self.in_place.as_dict(),
        }


@dataclass(frozen=True)
class JobWaiting:
    job: str
    memory_mb: int
    give_back: Cost
    break_even_s: float | None
    waits: tuple[Wait, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_mb": self.memory_mb,
            "give_back": self.give_back.as_dict(),
            "break_even_wait_s": self.break_even_s,
            "waits": [wait.as_dict() for wait in self.waits],
        }


@dataclass(frozen=True)
class CapacityEstimate:
    """The capacity section of the report (``enabled`` False: the budget is off, nothing below applies)."""

    settings: CapacitySettings
    semaphore: SemaphoreRequests | None
    semaphore_per_slot_usd: float
    metric_names: tuple[str, ...]
    metric_hours_share: float
    metrics_monthly_usd: float
    p95_wait_s: float | None
    p95_source: str | None
    jobs: tuple[JobWaiting, ...]

    @property
    def enabled(self) -> bool:
        return self.semaphore is not None

    def as_dict(self) -> dict[str, Any]:
        s = self.settings
        return {
            "enabled": self.enabled,
            "permits": s.permits,
            "wait_in_place_s": s.wait_in_place_s,
            "retry_delay_s": s.retry_delay_s,
            "metrics": {
                "names": list(self.metric_names),
                "hours_share": round(self.metric_hours_share, 6),
                "monthly_usd": self.metrics_monthly_usd,
                "deployment_line": "capacity_metrics",
            },
            "semaphore_per_slot": None
            if self.semaphore is None
            else {**self.semaphore.as_dict(), "usd": self.semaphore_per_slot_usd},
            "p95_wait_s": self.p95_wait_s,
            "p95_source": self.p95_source,
            "waiting": {job.job: job.as_dict() for job in self.jobs},
        }


def estimate_capacity(
    settings: CapacitySettings,
    jobs: Sequence[JobInputs],
    durations: Durations,
    prices: Prices,
    *,
    deployment_parts: Mapping[str, float],
    metric_hours_share: float,
    p95_wait_s: float | None = None,
    p95_source: str | None = None,
) -> CapacityEstimate:
    """The capacity section for ``jobs`` (``deployment_parts``: the deployment's monthly lines, which hold the
    metrics' cost). Waits: ``settings.wait_in_place_s``, and ``p95_wait_s`` when given."""
    semaphore = semaphore_requests(settings.permits)
    metrics = CAPACITY_METRICS if semaphore else ()
    waiting: list[JobWaiting] = []
    per_slot = 0.0
    if semaphore is not None:
        per_slot = _usd(
            estimate(Usage(read_units=semaphore.read_units, write_units=semaphore.write_units), prices).dynamodb
        )
        waits = [(float(settings.wait_in_place_s), "wait_in_place_s (cdk.json context.stack.capacity)")]
        if p95_wait_s is not None:
            waits.append((p95_wait_s, f"wait_s.p95 of {p95_source}"))
        for job in jobs:
            back = give_back(job, durations, prices, retry_delay_s=settings.retry_delay_s)
            waiting.append(
                JobWaiting(
                    job=job.name,
                    memory_mb=job.memory_mb,
                    give_back=back,
                    break_even_s=break_even_s(job, semaphore, prices, back.usd),
                    waits=tuple(
                        Wait(wait_s, origin, in_place(wait_s, job, semaphore, prices), back) for wait_s, origin in waits
                    ),
                )
            )
    return CapacityEstimate(
        settings=settings,
        semaphore=semaphore,
        semaphore_per_slot_usd=per_slot,
        metric_names=metrics,
        metric_hours_share=metric_hours_share,
        metrics_monthly_usd=float(deployment_parts.get("capacity_metrics", 0.0)),
        p95_wait_s=p95_wait_s,
        p95_source=p95_source,
        jobs=tuple(waiting),
    )
