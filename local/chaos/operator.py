"""The operator in a chaos run.

:class:`ChaosOperator` acts from the harness process with ``slotlock``'s operator API, as ``tools.ops`` does:
it pauses and resumes the live schedule (:func:`slotlock.pause`, :func:`slotlock.resume`), releases a live
holder's lease with ``force`` (:func:`slotlock.release`) and requests a re-run of a slot as a new generation
(:func:`slotlock.request_generation`), whose invocation (the event with the manual marker) the harness then
sends through the same fake Lambda service as the live racers'.

Time: the suite replays the last ``--slots`` half-hours within minutes, so the pause and the resume act in the
slots' time (a replay clock): paused a minute before the paused slot, resumed :data:`RESUME_AFTER_S` after
it. The resume leaves the slots up to its minute paused (the paused slot's late deliveries stay refused) and
the next slot, half an hour later, runs. The release acts on the real clock (it ends a live lease now, the
racers' clocks are real), and so does the generation request (its audit time).

The final state, every generation included, is read back by
:meth:`local.emulators.deployment.LocalDeployment.final_state`.

The driver's side of each action (:func:`pause_before`, :func:`resume_after`, :func:`force_release`,
:func:`rerun`, :func:`invoke_manual`): act through ``Chaos.ops``, count it in ``Chaos.operator_actions``,
record an ``operator`` event in the service's history (what :mod:`local.scenario.checker` checks the operator
against) and, for a re-run, send the manual invocation; a refused action becomes a harness error.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from local.emulators.deployment import LocalDeployment
from local.emulators.lambda_service import Delivery
from slotlock import (
    GenerationRequest,
    OperatorAction,
    Slot,
    SlotLock,
    SlotLockError,
    pause,
    release,
    request_generation,
    resume,
)

OPERATOR_IDENTITY = "arn:aws:iam::123456789012:user/chaos-operator"
PAUSE_BEFORE_S = 60  # the operator pauses a minute before the paused slot (replay clock)
RESUME_AFTER_S = 60  # ... and resumes a minute after it: the next slot (30 minutes later) runs
RERUN_KIND = "rerun"

if TYPE_CHECKING:
    from local.chaos.harness import Chaos
    from local.chaos.plan import SlotPlan


@dataclass(frozen=True)
class Rerun:
    """A requested generation and the event that runs it (the manual marker of ``tools.ops rerun``)."""

    request: GenerationRequest
    event: dict[str, Any]

    @property
    def generation(self) -> int:
        return self.request.generation


class ChaosOperator:
    """The operator's actions on one chaos run's lock table (see the module docstring for the clocks)."""

    def __init__(self, deployment: LocalDeployment, job_name: str, *, lease_s: float, run_id: str) -> None:
        client = deployment.client("dynamodb")
        self.job_name = job_name
        self.run_id = run_id
        self.replay_ms = 0
        self.lock = SlotLock(deployment.lock_table, job_name, client=client, lease_duration_s=lease_s)
        self.replay_lock = SlotLock(
            deployment.lock_table, job_name, client=client, lease_duration_s=lease_s, clock_ms=lambda: self.replay_ms
        )
        self._seq = itertools.count(1)

    def pause(self, slot_iso: str) -> OperatorAction:
        """Pause the live schedule before ``slot_iso`` is delivered."""
        self.replay_ms = (Slot.parse(slot_iso).epoch_s - PAUSE_BEFORE_S) * 1000
        return pause(self.replay_lock, reason=f"chaos: maintenance over {slot_iso}", requested_by=OPERATOR_IDENTITY)

    def resume(self, slot_iso: str) -> OperatorAction:
        """Resume after ``slot_iso`` settled: slots up to :data:`RESUME_AFTER_S` after it stay paused."""
        self.replay_ms = (Slot.parse(slot_iso).epoch_s + RESUME_AFTER_S) * 1000
        return resume(self.replay_lock, requested_by=OPERATOR_IDENTITY)

    def force_release(self, slot_iso: str) -> OperatorAction:
        """Release the live holder's lease now (``force``): its token is fenced out, its query id stays."""
        return release(
            self.lock, reason=f"chaos: holder of {slot_iso} looks stuck", requested_by=OPERATOR_IDENTITY, force=True
        )

    def request_rerun(self, slot_iso: str) -> Rerun:
        """Request the next generation of ``slot_iso`` and build the event of its invocation."""
        run_id = f"chaos-{self.run_id}-{next(self._seq)}"
        reason = f"chaos: re-run of {slot_iso}"
        request = request_generation(
            self.lock.context,
            Slot.parse(slot_iso),
            run_id=run_id,
            kind=RERUN_KIND,
            requested_by=OPERATOR_IDENTITY,
            reason=reason,
        )
        marker = {
            "generation": request.generation,
            "run_id": run_id,
            "kind": RERUN_KIND,
            "requested_by": OPERATOR_IDENTITY,
            "reason": reason,
        }
        return Rerun(request, {"job": self.job_name, "scheduled_time": slot_iso, "manual": marker})

    def live_record(self, slot_iso: str) -> tuple[str | None, int | None]:
        """(status, fencing token) of the slot's generation-1 item now (``(None, None)`` when absent)."""
        item = self.lock.get_slot(Slot.parse(slot_iso)) or {}
        token = item.get("fencing_token")
        return item.get("status"), token if isinstance(token, int) else None


def pause_before(chaos: Chaos, plan: SlotPlan) -> None:
    try:
        action = chaos.ops.pause(plan.iso)
    except SlotLockError as exc:
        chaos.harness_errors.append(f"pause before {plan.iso}: {exc}")
        return
    chaos.operator_actions["pause"] += 1
    chaos.lambda_service.record("operator", action="pause", slot=plan.iso, changed=action.changed)
    chaos.say(f"operator: paused the job before slot {plan.iso}")


def resume_after(chaos: Chaos, plan: SlotPlan) -> None:
    try:
        action = chaos.ops.resume(plan.iso)
    except SlotLockError as exc:
        chaos.harness_errors.append(f"resume after {plan.iso}: {exc}")
        return
    through = action.after.paused_through_slot if action.after is not None else None
    chaos.operator_actions["resume"] += 1
    chaos.lambda_service.record(
        "operator", action="resume", slot=plan.iso, through=through.iso if through else None, changed=action.changed
    )


def force_release(chaos: Chaos, stopped: Delivery, message: dict[str, Any]) -> None:
    """The operator releases the stopped holder's live lease (``force``): its token is fenced out."""
    now_ms = time.time_ns() // 1_000_000
    try:
        action = chaos.ops.force_release(stopped.slot)
    except SlotLockError as exc:
        chaos.harness_errors.append(f"force release of {stopped.slot}: {exc}")
        return
    before = action.before
    if before is None or before.owner_id != stopped.request_id or not action.changed:
        chaos.harness_errors.append(f"force release of {stopped.slot} did not release its holder: {action.message}")
        return
    chaos.operator_actions["release"] += 1
    chaos.lambda_service.record(
        "operator",
        action="release",
        slot=stopped.slot,
        request_id=stopped.request_id,
        token=before.fencing_token,
        checkpoint=message.get("checkpoint"),
        lease_live=before.locked(now_ms),
    )


def rerun(chaos: Chaos, slot: str, plan: SlotPlan, *, beside: str | None) -> None:
    """The operator re-runs ``slot``: requests its next generation, then invokes it with the manual marker."""
    try:
        live = chaos.ops.live_record(slot)
        rerun = chaos.ops.request_rerun(slot)
    except SlotLockError as exc:
        chaos.harness_errors.append(f"re-run of {slot}: {exc}")
        return
    chaos.operator_actions["rerun"] += 1
    invoke_manual(chaos, slot, plan.index, rerun.generation, rerun.event, beside=beside, live=live)


def invoke_manual(
    chaos: Chaos,
    slot: str,
    round_: int,
    generation: int,
    event: dict[str, Any],
    *,
    beside: str | None = None,
    live: tuple[str | None, int | None] | None = None,
    delay_s: float = 0.0,
) -> None:
    request_id = str(uuid.uuid4())
    chaos.manual[request_id] = (slot, generation, event)
    chaos.operator_actions["manual_invoke"] += 1
    fields: dict[str, Any] = {"beside": beside}
    if live is not None:
        fields.update(live_status=live[0], live_token=live[1])
    chaos.lambda_service.record(
        "operator", action="rerun", slot=slot, generation=generation, request_id=request_id, **fields
    )
    delivery = Delivery(request_id, slot, round_, 0, dict(event), "manual", due=time.monotonic() + delay_s)
    chaos.lambda_service.invoke(delivery)
