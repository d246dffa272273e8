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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from local.emulators.deployment import LocalDeployment
from slotlock import GenerationRequest, OperatorAction, Slot, SlotLock, pause, release, request_generation, resume

OPERATOR_IDENTITY = "arn:aws:iam::123456789012:user/chaos-operator"
PAUSE_BEFORE_S = 60  # the operator pauses a minute before the paused slot (replay clock)
RESUME_AFTER_S = 60  # ... and resumes a minute after it: the next slot (30 minutes later) runs
RERUN_KIND = "rerun"


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
