"""The chaos suite's seeded plan: per slot, which holder is killed or stopped where, duplicate, late,
ancient and near-future deliveries, throttling storms, the faults aimed at the lock's writes and the
operator's actions (pause and resume, a forced release of a live holder, re-runs as new generations).

:func:`make_plan` is pure (a seed and a clock in, :class:`SlotPlan` list out); :mod:`local.chaos.harness`
carries it out on the fake Lambda service. The module docstring of :mod:`local.chaos.harness` says what each
fault stands for; the rules that make even a short plan cover every kind are in :func:`_ensure_coverage`,
:func:`_plan_operator_actions` and :func:`_plan_writes_and_future`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.chaos.faults import (
    ACQUIRE,
    ATHENA_MAX_ATTEMPTS,
    ATHENA_THROTTLE,
    COMMIT,
    DYNAMODB_FAULT_KINDS,
    DYNAMODB_STANDARD_MAX_ATTEMPTS,
    HEARTBEAT,
    OPERATOR_RELEASE,
    PERMANENT_CANCELLATION_KIND,
    RECORD_MISSED,
    RECORD_STATE,
    RESPONSE_LOST,
    TRANSACTION_CONFLICT,
    TRANSIENT_CANCELLATION_KINDS,
)
from local.emulators.lambda_model import KILL, PAUSE
from local.scenario.driver import REPO_ROOT, iso

SLOT_PERIOD_S = 1800  # jobs/flights-dashboard/job.toml: cron(0/30 * * * ? *)
KILL_POINTS = ("acquired", "query_started", "query_finished", "committed")
PAUSE_POINTS = ("query_started", "query_finished", "before_commit")
# A holder stopped here resumes straight into its commit. Not "query_finished": the job renews the lease (when
# a heartbeat is due, as it is after a stop past the lease) while reading the results and again right before
# its commit, so a holder resumed there learns it lost the lease (lease_lost) before it could commit stale.
STALE_COMMIT_POINTS = ("before_commit",)
# When a stopped holder is resumed (SIGCONT): ...
RESUME_ON_TAKEOVER_ACQUIRED = "takeover_acquired"  # ... as soon as a late delivery has taken the lease over
RESUME_ON_TAKEOVER_DONE = "takeover_done"  # ... once that delivery has finished (committed)
RESUME_AFTER_NEXT_SLOT = "next_slot"  # ... after the next slot ran (and superseded it); no late delivery
RESUME_POLICIES = (RESUME_ON_TAKEOVER_ACQUIRED, RESUME_ON_TAKEOVER_DONE, RESUME_AFTER_NEXT_SLOT)
MIN_STALE_COMMIT_SCENARIOS = 2  # every plan has at least this many stopped-before-commit holders
#: Near-future deliveries: scheduled at least this far ahead of now (seconds), rounded up to the minute as slots
#: are: 30 to 599 s ahead, far beyond the runtime's lead allowance (MAX_SLOT_LEAD_S, 5 s by default).
FUTURE_LEAD_S = (30, 540)
#: Faults aimed at the lock's writes that every plan forces once (on fault-free, storm-free slots), so
#: that a short run covers each kind whatever the random draws: (write, kind, racers) where racers ``all``
#: means every racer of the slot carries it (only the holder reaches the write) and ``one`` one racer.
#: The MISSED record's lost answer is forced on the ancient deliveries (too_old) and on the slot after a
#: holder stopped until the next slot (its winner records the stopped slot superseded).
FORCED_WRITE_FAULTS: tuple[tuple[str, str, str], ...] = (
    *((RECORD_STATE, kind, "all") for kind in TRANSIENT_CANCELLATION_KINDS),
    *((COMMIT, kind, "all") for kind in TRANSIENT_CANCELLATION_KINDS),
    (COMMIT, PERMANENT_CANCELLATION_KIND, "all"),
    (ACQUIRE, TRANSACTION_CONFLICT, "one"),
)
FORCED_MISSED_RESEND = {"write": RECORD_MISSED, "kind": RESPONSE_LOST}
#: Heartbeat-shaped writes are rare (a 100 ms query needs no renewal): the sure one is the release of a holder
#: whose query engine stayed throttled (an Athena storm), so each plan has one and its release meets a conflict.
FORCED_RELEASE_CONFLICT = {"write": HEARTBEAT, "kind": TRANSACTION_CONFLICT}
#: The operator's forced release of a live holder rides on a stop fault (``"operator": "release"``): the holder
#: stops at one of these checkpoints, the operator releases its live lease (``slotlock.ops.admin.release(force=True)``)
#: and a late delivery takes the slot over at once, adopting the recorded query. Resumed at ``before_commit`` the
#: old holder sends its commit (rejected: stale); at ``query_started`` it learns at its next renewal that it lost
#: the lease. Once resumed it carries no aimed write fault (:mod:`local.chaos.worker`), so that stale write always
#: reaches the fence. Every plan with operator actions has one at ``before_commit``. (``OPERATOR_RELEASE``, the
#: fault's marker, is defined in the worker, which reads it.)
RELEASE_POINTS = ("query_started", "before_commit")
RELEASE_POLICIES = (RESUME_ON_TAKEOVER_ACQUIRED, RESUME_ON_TAKEOVER_DONE)
#: How far back (slots) a re-run beside the live racers reaches for the slot it runs again.
RERUN_WINDOW = 10


@dataclass(frozen=True)
class ChaosOptions:
    """One chaos run. Durations in seconds; fractions are per slot; ``transient_rate`` is per AWS call."""

    racers: int = 16
    slots: int = 200
    backend: str = "dynamodb-local"
    seed: int = 20261122
    lease_s: float = 2.0
    query_ms: int = 100
    timeout_s: int = 30
    fault_fraction: float = 0.25  # slots whose holder is killed or stopped
    duplicate_fraction: float = 0.1
    late_fraction: float = 0.1
    storm_fraction: float = 0.05
    transient_rate: float = 0.01
    future_fraction: float = 0.1  # slots that also get a near-future delivery (at least one per run)
    write_fault_scale: float = 1.0  # multiplies local.chaos.worker.WRITE_FAULTS (0: no aimed write faults)
    operator_fraction: float = 0.03  # slots paused / force-released / re-run beside (each); 0: no operator actions
    fencing: bool = True
    workdir: Path = REPO_ROOT / ".chaos"
    max_run_s: float = 3600.0
    dynamodb_endpoint: str | None = None  # reuse a running DynamoDB Local (tests); else one is started

    @property
    def heartbeat_s(self) -> float:
        return round(self.lease_s / 4, 3)

    @property
    def max_skew_ms(self) -> int:
        return int(self.lease_s * 1000 / 4)

    @property
    def max_slot_age_s(self) -> int:
        return self.slots * SLOT_PERIOD_S + 3600


# --------------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------------
@dataclass
class SlotPlan:
    index: int
    scheduled: dt.datetime
    fault: dict[str, str] | None = None  # {"action": KILL|"pause", "checkpoint": ..., "policy": ...}
    duplicates: int = 0
    late: str | None = None  # iso of an older slot delivered again with this one
    storm: dict[str, Any] | None = None  # {"target", "kind", "calls", "racer"}
    future_lead_s: int | None = None  # one more delivery scheduled this far ahead of now
    forced: list[dict[str, Any]] = field(default_factory=list)  # [{"write", "kind", "racer"?}]
    pause: bool = False  # the operator pauses the job before this slot's deliveries and resumes once it settled
    rerun: str | None = None  # iso of an earlier slot re-run (a new generation) beside this slot's racers
    rerun_after: bool = False  # this very slot is re-run (a new generation) once it has settled

    @property
    def iso(self) -> str:
        return iso(self.scheduled)

    def forced_for(self, racer: int) -> list[dict[str, Any]]:
        """The aimed write faults this racer's delivery carries (those for any racer, or for this one)."""
        return [f for f in self.forced if f.get("racer", racer) == racer]


def make_plan(o: ChaosOptions, now: dt.datetime | None = None) -> tuple[list[SlotPlan], list[str]]:
    """The seeded plan: slots (the last ``o.slots`` half-hours, oldest first) and the ancient slots.

    Ancient slots are older than the maximum slot age: they are only ever delivered late, and must end as
    missed (``too_old``).
    """
    rng = random.Random(o.seed)
    now = now or dt.datetime.now(dt.UTC)
    last = int(now.timestamp()) // SLOT_PERIOD_S * SLOT_PERIOD_S
    first = last - (o.slots - 1) * SLOT_PERIOD_S
    plans = [SlotPlan(i, dt.datetime.fromtimestamp(first + i * SLOT_PERIOD_S, dt.UTC)) for i in range(o.slots)]
    ancient: list[str] = []
    for plan in plans:
        if rng.random() < o.fault_fraction:
            if rng.random() < 0.6:
                plan.fault = {"action": KILL, "checkpoint": rng.choice(KILL_POINTS)}
            else:
                plan.fault = {
                    "action": PAUSE,
                    "checkpoint": rng.choice(PAUSE_POINTS),
                    "policy": rng.choice(RESUME_POLICIES),
                }
        if rng.random() < o.duplicate_fraction:
            plan.duplicates = rng.randint(1, 3)
        if plan.index > 0 and rng.random() < o.late_fraction:
            if rng.random() < 0.25:
                moment = first - o.max_slot_age_s - (len(ancient) + 1) * SLOT_PERIOD_S
                plan.late = iso(dt.datetime.fromtimestamp(moment, dt.UTC))
                ancient.append(plan.late)
            else:
                plan.late = plans[rng.randint(max(0, plan.index - 10), plan.index - 1)].iso
        if rng.random() < o.storm_fraction:
            target = rng.choice(("dynamodb", "athena"))
            kind = rng.choice(DYNAMODB_FAULT_KINDS) if target == "dynamodb" else ATHENA_THROTTLE
            calls = DYNAMODB_STANDARD_MAX_ATTEMPTS if target == "dynamodb" else ATHENA_MAX_ATTEMPTS
            plan.storm = {"target": target, "kind": kind, "calls": calls, "racer": rng.randrange(o.racers)}
    _ensure_coverage(plans, rng)
    _plan_operator_actions(o, plans)
    _plan_writes_and_future(o, plans, ancient)
    return plans, ancient


def _plan_writes_and_future(o: ChaosOptions, plans: list[SlotPlan], ancient: list[str]) -> None:
    """Near-future deliveries and forced write faults, from their own seeded RNG (the rest of the plan for a
    seed stays as it was before they existed).

    At least one slot gets a near-future delivery (when ``future_fraction`` > 0); each of
    :data:`FORCED_WRITE_FAULTS` goes to a fault-free, storm-free slot (its own one while there are enough); an
    ancient slot is ensured (a late delivery older than the maximum slot age, recorded MISSED too_old), and the
    slot after each holder stopped until the next slot carries the forced lost MISSED answer; an Athena storm
    is ensured, and the release of its holder (a heartbeat-shaped write) meets a forced conflict.
    """
    rng = random.Random(f"{o.seed}/writes-and-future")
    for plan in plans:
        if rng.random() < o.future_fraction:
            plan.future_lead_s = rng.randint(*FUTURE_LEAD_S)
    if o.future_fraction > 0 and not any(p.future_lead_s for p in plans):
        rng.choice(plans).future_lead_s = rng.randint(*FUTURE_LEAD_S)
    if o.write_fault_scale <= 0:
        return
    if not ancient and len(plans) > 1:
        plan = rng.choice([p for p in plans[1:] if p.late is None] or plans[1:])
        moment = int(plans[0].scheduled.timestamp()) - o.max_slot_age_s - SLOT_PERIOD_S
        plan.late = iso(dt.datetime.fromtimestamp(moment, dt.UTC))
        ancient.append(plan.late)
    # A holder killed or stopped at a checkpoint may never query (its retry carries no storm): a plain slot.
    # A paused slot never runs (its racers lose at once): no storm nor forced write fault would fire there.
    athena_storms = [p for p in plans if p.storm and p.storm["target"] == "athena" and p.fault is None]
    if not athena_storms:
        quiet = [p for p in plans if p.fault is None and p.storm is None and not p.pause] or [
            p for p in plans if not p.pause
        ]
        storm_plan = rng.choice(quiet)
        storm_plan.storm = {
            "target": "athena",
            "kind": ATHENA_THROTTLE,
            "calls": ATHENA_MAX_ATTEMPTS,
            "racer": rng.randrange(o.racers),
        }
        athena_storms.append(storm_plan)
    athena_storms[0].forced.append(dict(FORCED_RELEASE_CONFLICT))
    free = [p for p in plans if p.fault is None and p.storm is None and not p.pause] or [
        p for p in plans if not p.pause
    ]
    rng.shuffle(free)
    for n, (write, kind, racers) in enumerate(FORCED_WRITE_FAULTS):
        plan = free[n % len(free)]  # a short plan stacks them: each one hits its own write of the slot
        forced: dict[str, Any] = {"write": write, "kind": kind}
        if racers == "one":
            forced["racer"] = rng.randrange(o.racers)
        plan.forced.append(forced)
    for previous, plan in itertools.pairwise(plans):
        if previous.fault and previous.fault.get("policy") == RESUME_AFTER_NEXT_SLOT:
            plan.forced.append(dict(FORCED_MISSED_RESEND))


def _ensure_coverage(plans: list[SlotPlan], rng: random.Random) -> None:
    """Even a short run covers every kill point, every resume policy, and the scenario fencing exists for.

    That scenario: a holder stopped right before its commit and resumed after a takeover, at least
    ``MIN_STALE_COMMIT_SCENARIOS`` times (without fencing its commit is accepted: the negative control
    depends on it). Faults are moved onto fault-free slots (never the first: it has no predecessor), storm-free
    ones first: a stale-commit scenario on a slot with a storm does not count (an Athena storm fails the
    holder's query before it reaches its commit, and Lambda's retry carries no fault).
    """
    faults = [p.fault for p in plans if p.fault]
    stale = [
        p.fault
        for p in plans
        if p.fault
        and p.storm is None
        and p.fault["action"] == PAUSE
        and p.fault["checkpoint"] in STALE_COMMIT_POINTS
        and p.fault.get("policy") != RESUME_AFTER_NEXT_SLOT
    ]
    # In priority order (a very short run may not have room for all): stale commits, kill points, policies.
    wanted: list[dict[str, str]] = [
        {
            "action": PAUSE,
            "checkpoint": rng.choice(STALE_COMMIT_POINTS),
            "policy": (RESUME_ON_TAKEOVER_ACQUIRED, RESUME_ON_TAKEOVER_DONE)[n % 2],
        }
        for n in range(MIN_STALE_COMMIT_SCENARIOS - len(stale))
    ]
    for point in KILL_POINTS:
        if not any(f["action"] == KILL and f["checkpoint"] == point for f in faults):
            wanted.append({"action": KILL, "checkpoint": point})
    for policy in RESUME_POLICIES:
        if not any(f.get("policy") == policy for f in faults + wanted):
            wanted.append({"action": PAUSE, "checkpoint": rng.choice(PAUSE_POINTS), "policy": policy})
    calm = [p for p in plans[1:] if p.fault is None and p.storm is None]
    stormy = [p for p in plans[1:] if p.fault is None and p.storm is not None]
    rng.shuffle(calm)
    rng.shuffle(stormy)
    for plan, fault in zip(calm + stormy, wanted):
        plan.fault = fault


def _plan_operator_actions(o: ChaosOptions, plans: list[SlotPlan]) -> None:
    """The operator's actions, from their own seeded RNG (the faults drawn before them stay as they were).

    About ``operator_fraction`` of the slots each get: a **pause** (the operator pauses the job before the
    slot's deliveries and resumes once they settled: every racer loses as ``paused``, one records the slot
    MISSED); a **forced release** of the holder mid-run (a stop fault at :data:`RELEASE_POINTS` marked
    ``"operator": "release"``); a **re-run** of an earlier slot (a new generation, with the manual marker) beside
    the slot's racers. At least one of each when ``operator_fraction`` > 0 and the plan has room: the release
    first (at ``before_commit``), then a pause, whose slot is re-run once resumed (generation 2), delivered late
    again with the next slot (refused: it stays paused after the resume) and re-run once more beside a later
    slot (generation 3); the newest slot that can be is re-run last, so LATEST must end at its generation 2.

    Where: a pause or a release only on a slot without a fault, a storm or another action, never the first (as
    :func:`_ensure_coverage`), whose predecessor's holder is not stopped until the next slot (that holder would
    still hold the lease the slot needs), and only while plain slots remain for the forced write faults and,
    unless the plan has one already, the Athena storm of :func:`_plan_writes_and_future`; a re-run beside any slot but a
    paused one or one whose holder stops until the next slot, of a finished earlier slot (not one whose holder
    is still stopped).
    """
    if o.operator_fraction <= 0 or len(plans) < 2:
        return
    rng = random.Random(f"{o.seed}/operator")

    def deferred(plan: SlotPlan) -> bool:  # its holder stays stopped until the next slot ran
        return bool(plan.fault and plan.fault.get("policy") == RESUME_AFTER_NEXT_SLOT)

    def plain(plan: SlotPlan) -> bool:
        return plan.fault is None and plan.storm is None and not plan.pause

    # one plain slot for the forced write faults, one more for the Athena storm unless a plain slot has one
    spare = 1 + (not any(p.storm and p.storm["target"] == "athena" and p.fault is None for p in plans))

    def open_slot(i: int) -> bool:
        plan = plans[i]
        return (
            i > 0
            and plain(plan)
            and plan.rerun is None
            and not deferred(plans[i - 1])
            and sum(plain(p) for p in plans) > spare
        )

    def release(plan: SlotPlan, checkpoint: str) -> None:
        policy = rng.choice(RELEASE_POLICIES)
        plan.fault = {"action": PAUSE, "checkpoint": checkpoint, "policy": policy, "operator": OPERATOR_RELEASE}

    def targets(i: int) -> list[SlotPlan]:
        return [p for p in plans[max(0, i - RERUN_WINDOW) : i] if not deferred(p)]

    for i, plan in enumerate(plans):
        draw = rng.random()
        if draw < o.operator_fraction and open_slot(i):
            plan.pause = True
        elif draw < 2 * o.operator_fraction and open_slot(i):
            release(plan, rng.choice(RELEASE_POINTS))
    for i, plan in enumerate(plans):
        if rng.random() < o.operator_fraction and i > 0 and not plan.pause and not deferred(plan) and targets(i):
            plan.rerun = rng.choice(targets(i)).iso
    released = [p for p in plans if p.fault and p.fault.get("operator") == OPERATOR_RELEASE]
    if not any(p.fault["checkpoint"] == "before_commit" for p in released):
        candidates = [i for i in range(len(plans)) if open_slot(i)]
        if candidates:
            release(plans[rng.choice(candidates)], "before_commit")
    if not any(p.pause for p in plans):
        # Not the last slot when there is a choice: a later slot delivers it late and re-runs it.
        candidates = [i for i in range(len(plans)) if open_slot(i)]
        if candidates:
            plans[rng.choice([i for i in candidates if i < len(plans) - 1] or candidates)].pause = True
    for i, plan in enumerate(plans):
        if not plan.pause:
            continue
        plan.rerun_after = True
        if i + 1 < len(plans) and plans[i + 1].late is None:
            plans[i + 1].late = plan.iso
    first_pause = next((i for i, p in enumerate(plans) if p.pause), None)
    if first_pause is not None and not any(p.rerun == plans[first_pause].iso for p in plans):
        later = [p for p in plans[first_pause + 1 : first_pause + 1 + RERUN_WINDOW] if not p.pause and not deferred(p)]
        if later:
            rng.choice(later).rerun = plans[first_pause].iso
    if not any(p.rerun for p in plans):
        beside = [i for i, p in enumerate(plans) if i > 0 and not p.pause and not deferred(p) and targets(i)]
        if beside:
            i = rng.choice(beside)
            plans[i].rerun = rng.choice(targets(i)).iso
    newest = next((p for p in reversed(plans) if not deferred(p)), None)
    if newest is not None:
        newest.rerun_after = True
