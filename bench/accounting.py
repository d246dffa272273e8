"""Scenario 1 of :mod:`bench.scenarios`: the requests and capacity per slot of each contender (a winner, a
loser while the winner holds, a loser after it finished) and the cost of one heartbeat.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .backends import Endpoint
from .contenders import Contender, Outcome, PythonDynamoDBLock, SlotKey, SlotLockContender
from .slots import noop, slot_at


# --------------------------------------------------------------------------------------------------
# 1. Requests and capacity per slot: winner, a loser while the winner holds, a loser after it finished
# --------------------------------------------------------------------------------------------------
def accounting(
    endpoint: Endpoint, run_id: str, contenders: Sequence[type[Contender]], *, slots: int = 3
) -> dict[str, Any]:
    """Count requests per role for ``slots`` consecutive slots (counts must repeat exactly), with capacity.

    Per slot: the winner invokes; inside its job (so while it holds the lock) a second invocation races
    and loses; after the winner finished, a third, late invocation (a Lambda retry, a slow racer) tries.
    Each role has its own client, as separate Lambda invocations do.
    """
    results: dict[str, Any] = {}
    for cls in contenders:
        roles = {role: cls(endpoint, run_id, capacity=True) for role in ("winner", "loser", "late")}
        for adapter in roles.values():
            adapter.warm()
        per_slot: list[dict[str, Any]] = []
        for index in range(slots):
            key = SlotKey(f"acct-{cls.name}", slot_at(index))
            before = {role: adapter.counter.snapshot() for role, adapter in roles.items()}
            outcomes: dict[str, Outcome] = {}

            def hold(
                key: SlotKey = key, outcomes: dict[str, Outcome] = outcomes, roles: dict[str, Any] = roles
            ) -> None:
                outcomes["loser"] = roles["loser"].invoke(key, "loser", noop)

            outcomes["winner"] = roles["winner"].invoke(key, "winner", hold)
            outcomes["late"] = roles["late"].invoke(key, "late", noop)
            per_slot.append(
                {
                    role: {
                        "ran": outcomes[role].ran,
                        "detail": outcomes[role].detail,
                        **(roles[role].counter.snapshot() - before[role]).as_dict(),
                    }
                    for role in roles
                }
            )
        last = per_slot[-1]
        stable = all(
            {r: (s[r]["requests"], s[r]["by_operation"], s[r]["ran"]) for r in s}
            == {r: (last[r]["requests"], last[r]["by_operation"], last[r]["ran"]) for r in last}
            for s in per_slot
        )
        results[cls.name] = {
            "slots": slots,
            "stable": stable,
            "per_slot": per_slot,
            "last": last,
            "heartbeat": heartbeat_cost(cls, endpoint, run_id),
        }
    return results


def heartbeat_cost(cls: type[Contender], endpoint: Endpoint, run_id: str) -> dict[str, Any] | None:
    """Requests a winner sends per heartbeat: ours forces 3 renewals; python-dynamodb-lock's background
    thread renews every lease/4, so a winner holds for 4.5 heartbeat periods. Others have no heartbeat."""
    key = SlotKey(f"hb-{cls.name}", slot_at(0))
    if cls is SlotLockContender:
        adapter = SlotLockContender(endpoint, run_id)
        adapter.warm()
        lock = adapter.runner(key.job).lock
        before = adapter.counter.snapshot()
        lease = lock.try_acquire(key.slot, "hb-winner")
        assert lease.acquired
        for _ in range(3):
            time.sleep(0.002)  # a later clock reading, so the renewed expiry differs and is sent
            lease = lock.heartbeat(lease)
        lock.commit(lease)
        tally = adapter.counter.snapshot() - before
        return {
            "heartbeats": 3,
            "requests": tally.requests,
            "by_operation": dict(tally.calls),
            "requests_per_heartbeat": (tally.requests - 2) / 3,
        }
    if cls is PythonDynamoDBLock:
        lease_s = 1.0  # a binary fraction: the library stores Decimal.from_float(lease), see contenders
        adapter = PythonDynamoDBLock(endpoint, run_id, lease_s=lease_s)
        adapter.warm()
        before = adapter.counter.snapshot()
        hold_s = lease_s / 4 * 4.5
        adapter.invoke(key, "hb-winner", lambda: time.sleep(hold_s))
        tally = adapter.counter.snapshot() - before
        heartbeats = tally.calls.get("UpdateItem", 0)
        return {
            "heartbeats": heartbeats,
            "held_s": hold_s,
            "requests": tally.requests,
            "by_operation": dict(tally.calls),
            "requests_per_heartbeat": 1.0 if heartbeats else None,
        }
    return None
