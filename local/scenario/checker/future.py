"""Deliveries ahead of the clock: ``future_slot_refused`` (refused before any DynamoDB request, never acquired
nor recorded).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from local.scenario.checker.model import FinalState, slot_epoch_s, violation


def check_future_refused(
    history: Sequence[Mapping[str, Any]], final: FinalState, *, future_slots: Iterable[str], max_attempts: int = 3
) -> list[dict[str, Any]]:
    """``future_slot_refused``: near-future deliveries were refused, and nothing happened for their slots.

    For each near-future slot: every invocation of it ended in ``InvalidEventError`` (none returned an
    outcome, none crashed), having sent no DynamoDB request; no request id was invoked more than
    ``max_attempts`` times (Lambda's two async retries, then the on-failure destination); no racer acquired
    or recorded the slot; and the tables hold no slot item and no result for it.
    """
    violations: list[dict[str, Any]] = []
    future = set(future_slots)
    attempts: Counter[str] = Counter()
    for event in history:
        slot = str(event.get("slot"))
        what = event.get("what")
        if what == "deliver" and event.get("kind") == "future":
            attempts[str(event.get("request_id"))] += 1
        if slot not in future:
            continue
        if what == "checkpoint":
            violations.append(
                violation(
                    "future_slot_refused",
                    slot,
                    f"checkpoint {event.get('checkpoint')} (token {event.get('token')}) reached",
                )
            )
        elif what == "result":
            violations.append(
                violation(
                    "future_slot_refused", slot, f"an invocation returned {event.get('status')}/{event.get('reason')}"
                )
            )
        elif what == "error" and event.get("error_type") != "InvalidEventError":
            violations.append(
                violation(
                    "future_slot_refused",
                    slot,
                    f"an invocation failed with {event.get('error_type')}, not InvalidEventError",
                )
            )
        elif what == "crash":
            violations.append(violation("future_slot_refused", slot, f"an invocation crashed ({event.get('cause')})"))
        elif what == "dynamodb_requests" and event.get("count"):
            violations.append(
                violation("future_slot_refused", slot, f"an invocation sent {event.get('count')} DynamoDB request(s)")
            )
        elif what == "superseded":
            violations.append(violation("future_slot_refused", slot, "recorded MISSED by an acquisition"))
    for event in history:
        if event.get("what") == "superseded" and str(event.get("by_slot")) in future:
            violations.append(
                violation(
                    "future_slot_refused", str(event["by_slot"]), f"its acquisition superseded {event.get('slot')}"
                )
            )
    for request_id, n in sorted(attempts.items()):
        if n > max_attempts:
            violations.append(
                violation(
                    "future_slot_refused", None, f"request {request_id} was invoked {n} times (at most {max_attempts})"
                )
            )
    for slot in sorted(future, key=slot_epoch_s):
        if slot in final.slot_items:
            violations.append(
                violation(
                    "future_slot_refused", slot, f"a slot item is stored ({final.slot_items[slot].get('status')})"
                )
            )
        if slot in final.results:
            violations.append(violation("future_slot_refused", slot, "a result is stored"))
    return violations
