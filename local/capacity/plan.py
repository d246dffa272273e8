"""The capacity scenario's options and seeded plan: which jobs, their query durations, which permit holders are
killed, stopped or lose their StartQueryExecution answer, which slots the backfill runs, and the jobs of a second
deployment sharing the budget.

:func:`make_plan` is pure (options, the job template and a clock in; :class:`CapacityPlan` out);
:mod:`local.capacity.harness` carries it out.

Time is scaled: Athena queries of a few seconds to a minute run here for a fraction of that
(``query_ms``, ``long_query_ms``), and what the runtime or Lambda would do a minute or more later (Lambda's async
retries, about 1 and 2 minutes; the capacity deferral's ``capacity.retry_delay_s``, at least 60 s) happens after
that delay times ``time_scale``. What is not scaled: the lease, and ``max_query_active_s``
(``capacity.max_query_active_s``, at least 60 s), a true upper bound of every simulated query's duration: the
Athena stand-in's query timeout is set to it (:mod:`local.capacity.worker`), and :meth:`CapacityOptions.problems`
refuses a plan whose queries could run longer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from dataclasses import dataclass, field
from pathlib import Path

from athena_refresh import contract
from local.capacity.worker import LOSE_START_ANSWER
from local.emulators.lambda_model import KILL, PAUSE
from local.scenario.driver import REPO_ROOT, iso
from slotlock import PermitOwner, Slot
from slotlock.schedule import latest_firings
from stacks.jobs import JobDefinition

JOB_PREFIX = "cap-"
PROBE_JOB = "cap-probe"
#: A probe query is short enough for its invocation to need no lease renewal (so no permit renewal either).
PROBE_QUERY_MS = 200
#: The worker's engine applies StartQueryExecution, then the call fails retryably (its answer lost), once per
#: slot attempt (LOSE_START_ANSWER, :mod:`local.capacity.worker`); not a job checkpoint (the runtime's checkpoint
#: listener ignores it).
START_QUERY = "start_query"
#: Lambda's asynchronous retries of a failed invocation: about 1 minute, then 2 (docs: invocation-async).
LAMBDA_RETRY_DELAYS_S = (60.0, 120.0)
#: A stopped holder's slot is delivered again this long after its lease ran out (the takeover).
TAKEOVER_MARGIN_S = 0.5
#: The job's default lease (s): Lambda's first retry (about 60 s) comes 4/3 of it after a failed invocation.
DEFAULT_LEASE_S = 45.0


@dataclass(frozen=True)
class CapacityOptions:
    """One capacity run (``python -m local.capacity --help`` describes each). Durations in seconds unless ``_ms``."""

    jobs: int = 200
    racers: int = 3
    budget: int = 20
    quota: int = 25
    start_rate_per_s: float = 20.0  # Athena: StartQueryExecution 20/s per account and Region, burst 80
    start_burst: int = 80
    environments: int = 40  # the pool of execution environments shared by the job functions
    lease_s: float = 10.0  # short (the job's default is 45 s), yet longer than this machine's stalls under load
    heartbeat_s: float = 2.5
    query_ms: tuple[int, int] = (600, 1800)  # most queries (scaled)
    long_query_ms: tuple[int, int] = (11000, 15000)  # longer than the lease
    long_fraction: float = 0.15
    kills: int = 3  # SIGKILLed permit holders (Lambda retries them with the same request id)
    pauses: int = 2  # SIGSTOPped permit holders, taken over, then resumed (SIGCONT)
    lost_answers: int = 3  # permit holders whose StartQueryExecution applies but whose answer is lost (once)
    second_jobs: int = 40  # a second deployment's jobs on the same budget, named like some of the first's; 0: none
    max_query_active_s: float = 60.0  # capacity.max_query_active_s and the stand-in's query timeout (>= 60 s)
    backfill_slots: int = 10
    wait_in_place_s: float = 4.0
    manual_headroom: int = 2
    time_scale: float = 0.2
    timeout_s: int = 60
    max_slot_age_s: int = 7200
    memory_mb: int = 256
    control_jobs: int = 40  # the negative control (capacity.permits 0); 0: none
    seed: int = 20261124
    workdir: Path = REPO_ROOT / ".capacity"
    max_run_s: float = 1200.0
    dynamodb_endpoint: str | None = None  # reuse a running DynamoDB Local (tests); else one is started

    def problems(self) -> list[str]:
        """What makes these options unusable (empty when they are fine)."""
        found = []
        if self.jobs < 1 or self.racers < 1:
            found.append("jobs and racers must be at least 1")
        if not 1 <= self.budget <= 99:
            found.append("budget must be 1..99 (capacity.permits)")
        if self.quota < 1:
            found.append("quota must be at least 1")
        if not 0 <= self.manual_headroom < self.budget:
            found.append("manual headroom must be below the budget")
        if self.environments < 2:
            found.append("environments must be at least 2")
        if min(self.kills, self.pauses, self.lost_answers) < 0:
            found.append("kills, pauses and lost answers must be at least 0")
        if self.kills + self.pauses + self.lost_answers > self.jobs - (1 if self.backfill_slots else 0):
            found.append("more faults than jobs")
        if not 0 <= self.second_jobs <= self.jobs:
            found.append("the second deployment's jobs must be 0..jobs (they are named like the first's)")
        low, high = contract.NUMERIC_BOUNDS[contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S]
        if not low <= self.max_query_active_s <= high:
            found.append(f"max query active must be {low:g}..{high:g} s (capacity.max_query_active_s)")
        elif self.max_query_active_s * 1000 < longest_query_ms(self):
            found.append(
                f"max query active ({self.max_query_active_s:g} s) is below the longest planned query"
                f" ({longest_query_ms(self)} ms): it must bound every query's active time"
            )
        if not 0 < self.time_scale <= 1:
            found.append("time scale must be in (0, 1]")
        return found


@dataclass(frozen=True)
class Fault:
    """A fault riding on every delivery of ``job``'s live slot until it fired once: a checkpoint fault (``kill`` or
    ``pause`` at ``query_started`` or ``query_finished``), or :data:`LOSE_START_ANSWER` at :data:`START_QUERY`."""

    job: str
    action: str  # kill, pause or lose_start_answer
    checkpoint: str  # query_started, query_finished or start_query

    def instruction(self) -> dict[str, str]:
        return {"action": self.action, "checkpoint": self.checkpoint}


@dataclass(frozen=True)
class CapacityPlan:
    """What one run does: the live slot every job fires on, each job's query duration, faults, the backfill."""

    slot: str
    jobs: tuple[str, ...]
    durations_ms: dict[str, int]
    faults: dict[str, Fault] = field(default_factory=dict)
    backfill_job: str | None = None
    backfill_slots: tuple[str, ...] = ()
    second_jobs: tuple[str, ...] = ()  # the second deployment's jobs (names of this plan's), on the same slot


def permit_owner(job: str, slot: str, generation: int, deployment: str) -> str:
    """The permit owner id of a slot's query in ``deployment`` (its lock table's name): what the Athena function
    writes on the permits (``<job>#<slot>#g<generation>#d<deployment>``, :class:`slotlock.PermitOwner`)."""
    return PermitOwner(job, Slot.parse(slot), generation, deployment=deployment).id


def takeover_after_s(options: CapacityOptions) -> float:
    """When the retry or the takeover of a killed or stopped holder comes (at least): Lambda's first retry (scaled),
    and the late duplicate once the holder's lease ran out."""
    return max(options.lease_s + TAKEOVER_MARGIN_S, LAMBDA_RETRY_DELAYS_S[0] * options.time_scale)


def lost_answer_retry_s(options: CapacityOptions) -> float:
    """When Lambda's retry of an invocation whose start answer was lost comes: as far past the lease as in
    production, where the first retry (about 60 s) comes after the job's 45 s lease, and so after the expiry of the
    permit taken under it (the permit then names no query: only its start window keeps it counted)."""
    return max(takeover_after_s(options), options.lease_s * LAMBDA_RETRY_DELAYS_S[0] / DEFAULT_LEASE_S)


def fault_query_ms(options: CapacityOptions, action: str = KILL) -> int:
    """The query duration of a faulted job (at least): it outlasts by seconds the retry or the takeover that
    follows the fault (so either finds the query running)."""
    after_s = lost_answer_retry_s(options) if action == LOSE_START_ANSWER else takeover_after_s(options)
    return int(after_s * 1000) + 3_000


def longest_query_ms(options: CapacityOptions) -> int:
    """The longest simulated query a plan of ``options`` can have (the faults' included)."""
    longest = max(options.query_ms[1], options.long_query_ms[1], PROBE_QUERY_MS)
    if options.kills or options.pauses:
        longest = max(longest, fault_query_ms(options))
    if options.lost_answers:
        longest = max(longest, fault_query_ms(options, LOSE_START_ANSWER))
    return longest


def job_definitions(template: JobDefinition, names: list[str]) -> list[JobDefinition]:
    """Copies of ``template`` (its query, source and schedule) under the given job names."""
    return [dataclasses.replace(template, config=dataclasses.replace(template.config, job_name=name)) for name in names]


def make_plan(
    options: CapacityOptions, template: JobDefinition, now: dt.datetime, *, jobs: int | None = None, faults: bool = True
) -> CapacityPlan:
    """The plan of a run of ``jobs`` (default ``options.jobs``) copies of ``template``, all firing on its latest
    slot at or before ``now``; ``faults`` False: no kill, pause nor backfill (the negative control)."""
    rng = random.Random(options.seed)
    count = options.jobs if jobs is None else jobs
    names = tuple(f"{JOB_PREFIX}{i:03d}" for i in range(count))
    config = template.config
    firings = latest_firings(config.schedule_expression, config.schedule_timezone, now, options.backfill_slots + 1)
    slot = iso(firings[-1])
    durations: dict[str, int] = {}
    long_jobs: list[str] = []
    for name in names:
        if rng.random() < options.long_fraction:
            durations[name] = rng.randint(*options.long_query_ms)
            long_jobs.append(name)
        else:
            durations[name] = rng.randint(*options.query_ms)
    durations[PROBE_JOB] = PROBE_QUERY_MS
    if not faults:  # the negative control: long queries only, so that more than the quota overlap at once
        durations = {name: rng.randint(*options.long_query_ms) for name in names} | {PROBE_JOB: PROBE_QUERY_MS}
        return CapacityPlan(slot, names, durations)
    backfill_job = names[0] if options.backfill_slots else None
    candidates = [name for name in names if name != backfill_job]
    rng.shuffle(candidates)
    chosen: dict[str, Fault] = {}
    # Kills and pauses at query_started, on queries that outlast by seconds Lambda's first retry and the late
    # duplicate's takeover (so either finds the query running, and inherits its permit); with two kills or more, the last
    # one at query_finished, on a short query (its permit names a finished query: reclaimable once the lease
    # expired, before Lambda's retry comes back). Lost answers on queries outlasting the retry as well: it comes
    # after the permit's expiry, finds the query running (never recorded) and inherits the permit. They strike the
    # first jobs to fire (the lowest names): their permits expire while the line of waiters is longest, where a
    # reclaim by expiry (without the start window) would be likeliest.
    finished_kills = 1 if options.kills >= 2 else 0
    wanted = [(PAUSE, "query_started")] * options.pauses + [(KILL, "query_started")] * (options.kills - finished_kills)
    outlasting_ms = fault_query_ms(options)
    for action, checkpoint in wanted:
        name = candidates.pop()
        durations[name] = max(outlasting_ms, rng.randint(*options.long_query_ms))
        chosen[name] = Fault(name, action, checkpoint)
    if finished_kills:
        name = candidates.pop()
        durations[name] = rng.randint(*options.query_ms)
        chosen[name] = Fault(name, KILL, "query_finished")
    for _ in range(options.lost_answers):
        name = min(candidates)
        candidates.remove(name)
        durations[name] = max(fault_query_ms(options, LOSE_START_ANSWER), rng.randint(*options.long_query_ms))
        chosen[name] = Fault(name, LOSE_START_ANSWER, START_QUERY)
    backfill = tuple(iso(firing) for firing in firings[:-1]) if backfill_job else ()
    second = tuple(sorted(rng.sample(names, options.second_jobs)))
    return CapacityPlan(slot, names, durations, chosen, backfill_job, backfill, second)


def second_plan(options: CapacityOptions, plan: CapacityPlan) -> CapacityPlan:
    """The second deployment's plan (staging beside production): its jobs are named like some of the first
    deployment's and fire on the same slot; each query's duration drawn as the first deployment's unfaulted ones
    are (the namesake's may be a fault's long one); no fault, no backfill."""
    rng = random.Random(options.seed + 1)
    durations = {
        name: rng.randint(*(options.long_query_ms if rng.random() < options.long_fraction else options.query_ms))
        for name in plan.second_jobs
    }
    return CapacityPlan(plan.slot, plan.second_jobs, durations | {PROBE_JOB: PROBE_QUERY_MS})
