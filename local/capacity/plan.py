"""The capacity scenario's options and seeded plan: which jobs, their query durations, which permit holders are
killed or stopped, which slots the backfill runs.

:func:`make_plan` is pure (options, the job template and a clock in; :class:`CapacityPlan` out);
:mod:`local.capacity.harness` carries it out.

Time is scaled: Athena queries of a few seconds to a minute run here for a fraction of that
(``query_ms``, ``long_query_ms``), and what the runtime or Lambda would do a minute or more later (Lambda's async
retries, about 1 and 2 minutes; the capacity deferral's ``CAPACITY_RETRY_DELAY_S``, at least 60 s) happens after
that delay times ``time_scale``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from dataclasses import dataclass, field
from pathlib import Path

from slotlock.schedule import latest_firings
from stacks.jobs import JobDefinition

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB_PREFIX = "cap-"
PROBE_JOB = "cap-probe"
#: A probe query is short enough for its invocation to need no lease renewal (so no permit renewal either).
PROBE_QUERY_MS = 200
KILL, PAUSE = "kill", "pause"
#: Lambda's asynchronous retries of a failed invocation: about 1 minute, then 2 (docs: invocation-async).
LAMBDA_RETRY_DELAYS_S = (60.0, 120.0)
#: A stopped holder's slot is delivered again this long after its lease ran out (the takeover).
TAKEOVER_MARGIN_S = 0.5


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
    backfill_slots: int = 10
    wait_in_place_s: float = 4.0
    manual_headroom: int = 2
    time_scale: float = 0.2
    timeout_s: int = 60
    max_slot_age_s: int = 7200
    memory_mb: int = 256
    control_jobs: int = 40  # the negative control (CAPACITY_PERMITS=0); 0: none
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
            found.append("budget must be 1..99 (CAPACITY_PERMITS)")
        if self.quota < 1:
            found.append("quota must be at least 1")
        if not 0 <= self.manual_headroom < self.budget:
            found.append("manual headroom must be below the budget")
        if self.environments < 2:
            found.append("environments must be at least 2")
        if self.kills + self.pauses > self.jobs - (1 if self.backfill_slots else 0):
            found.append("more faults than jobs")
        if not 0 < self.time_scale <= 1:
            found.append("time scale must be in (0, 1]")
        return found


@dataclass(frozen=True)
class Fault:
    """A checkpoint fault riding on every delivery of ``job``'s live slot until it fired once."""

    job: str
    action: str  # kill or pause
    checkpoint: str  # query_started or query_finished

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


def job_definitions(template: JobDefinition, names: list[str]) -> list[JobDefinition]:
    """Copies of ``template`` (its query, source and schedule) under the given job names."""
    return [dataclasses.replace(template, config=dataclasses.replace(template.config, job_name=name)) for name in names]


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    # expired, before Lambda's retry comes back).
    finished_kills = 1 if options.kills >= 2 else 0
    wanted = [(PAUSE, "query_started")] * options.pauses + [(KILL, "query_started")] * (options.kills - finished_kills)
    takeover_s = max(options.lease_s + TAKEOVER_MARGIN_S, LAMBDA_RETRY_DELAYS_S[0] * options.time_scale)
    outlasting_ms = int(takeover_s * 1000) + 3_000
    for action, checkpoint in wanted:
        name = candidates.pop()
        durations[name] = max(outlasting_ms, rng.randint(*options.long_query_ms))
        chosen[name] = Fault(name, action, checkpoint)
    if finished_kills:
        name = candidates.pop()
        durations[name] = rng.randint(*options.query_ms)
        chosen[name] = Fault(name, KILL, "query_finished")
    backfill = tuple(iso(firing) for firing in firings[:-1]) if backfill_job else ()
    return CapacityPlan(slot, names, durations, chosen, backfill_job, backfill)
