"""The stored state against the plan and the query: ``slot_unaccounted``, ``results_mismatch`` (the results, their
rows, the LATEST pointer) and ``tokens_increase`` over the stored results.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from local.scenario.checker.model import FinalState, slot_epoch_s, violation


def check_final_state(
    final: FinalState,
    *,
    planned_slots: Iterable[str],
    dead_lettered: Iterable[str],
    expected_rows: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Violations visible in the stored state (the last two checks, and the stored half of the token order).

    ``expected_rows``: slot iso -> the rows (JSON-shaped, as stored) the query returns for that slot.
    """
    violations: list[dict[str, Any]] = []
    dlq = set(dead_lettered)
    for slot in sorted(set(planned_slots), key=slot_epoch_s):
        item = final.slot_items.get(slot)
        status = (item or {}).get("status")
        if status in ("SUCCEEDED", "FAILED"):
            continue
        if status == "MISSED" and (item or {}).get("reason"):
            continue
        if slot in dlq:
            continue
        violations.append(
            violation(
                "slot_unaccounted",
                slot,
                f"no outcome recorded (slot item: {status or 'absent'}, not in the on-failure destination)",
            )
        )
    succeeded = {slot: item for slot, item in final.slot_items.items() if item.get("status") == "SUCCEEDED"}
    for slot, item in sorted(succeeded.items(), key=lambda kv: slot_epoch_s(kv[0])):
        stored = final.results.get(slot)
        if stored is None:
            violations.append(violation("results_mismatch", slot, "SUCCEEDED but no result item is stored"))
            continue
        if stored.get("fencing_token") != item.get("fencing_token"):
            violations.append(
                violation(
                    "results_mismatch",
                    slot,
                    f"result stored under token {stored.get('fencing_token')}, slot committed under"
                    f" {item.get('fencing_token')}",
                )
            )
        rows = stored.get("rows")
        if slot in expected_rows and rows != expected_rows[slot]:  # same rows, same order, nothing extra
            got, want = len(rows or []), len(expected_rows[slot] or [])
            violations.append(
                violation(
                    "results_mismatch",
                    slot,
                    f"stored rows differ from the query's rows ({got} stored, {want} expected)",
                )
            )
        if stored.get("row_count") is not None and rows is not None and stored["row_count"] != len(rows):
            violations.append(
                violation("results_mismatch", slot, f"row_count {stored['row_count']} but {len(rows)} rows stored")
            )
    for slot in sorted(set(final.results) - set(succeeded), key=slot_epoch_s):
        violations.append(violation("results_mismatch", slot, "a result is stored for a slot that did not succeed"))
    ordered = sorted(final.results.items(), key=lambda kv: slot_epoch_s(kv[0]))
    for (prev_slot, prev), (slot, current) in itertools.pairwise(ordered):
        if int(current.get("fencing_token", 0)) <= int(prev.get("fencing_token", 0)):
            violations.append(
                violation(
                    "tokens_increase",
                    slot,
                    f"stored token {current.get('fencing_token')} is not above {prev.get('fencing_token')} of {prev_slot}",
                )
            )
    # LATEST: the newest (slot, generation) stored, whichever generation (a re-run of the newest slot moves it)
    stored_results = [((slot, 1), item) for slot, item in final.results.items()]
    stored_results += list(final.generation_results.items())
    if stored_results:
        (newest_slot, newest_generation), newest = max(
            stored_results, key=lambda kv: (slot_epoch_s(kv[0][0]), kv[0][1])
        )
        latest = final.latest or {}
        at = (latest.get("latest_slot"), int(latest.get("latest_generation") or 1), latest.get("fencing_token"))
        if at != (newest_slot, newest_generation, newest.get("fencing_token")):
            violations.append(
                violation(
                    "results_mismatch",
                    newest_slot,
                    f"LATEST points at {at[0]} generation {at[1]} (token {at[2]}), the newest stored result is"
                    f" {newest_slot} generation {newest_generation} (token {newest.get('fencing_token')})",
                )
            )
    return violations
