"""The capacity semaphore's choices on what one read showed (no I/O): which permits may be taken, which places in
line are dead, and what is known of the queries that expired permits name.

- :meth:`QueryStates.candidates`: free permits, those reclaimable by expiry (naming no query, past their expiry plus
  their start window: :meth:`~slotlock._semaphore_items.PermitRecord.reclaimable_by_expiry`), then, while too few,
  expired ones whose query is terminal. ``query_is_terminal`` (one ``GetQueryExecution`` in production) is asked at
  most once per read, and about one query at most once per ``recheck_ms`` while it is still active: with 100
  waiters and 20 expired permits, at most 100 questions per poll interval in all, not 2,000, well below Athena's
  API rate quotas (https://docs.aws.amazon.com/athena/latest/ug/service-limits.html#service-limits-api-calls). A
  terminal answer is kept while a permit still names the query.
- :func:`dead_places`: places that block nobody (their owner holds a permit; an older live slot of the same job).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import table
from ._semaphore_items import PermitOwner, PermitRecord, TakeKind, waiter_owner_id

QueryIsTerminal = Callable[[str], bool]


class QueryStates:
    """What ``query_is_terminal`` answered, per query id: ``(terminal, asked at ms)``."""

    def __init__(self, recheck_ms: int) -> None:
        self.recheck_ms = recheck_ms
        self.known: dict[str, tuple[bool, int]] = {}

    def candidates(
        self, permits: Sequence[PermitRecord], now_ms: int, needed: int, query_is_terminal: QueryIsTerminal | None
    ) -> list[tuple[PermitRecord, TakeKind]]:
        """Permits we may take, by index: free ones and those reclaimable by expiry, then, while fewer than
        ``needed``, expired ones whose query is terminal (:meth:`terminal`: at most one question per call). Without
        ``query_is_terminal`` a permit naming a query is never reclaimed."""
        found: list[tuple[PermitRecord, TakeKind]] = [
            (permit, "free" if permit.free else "reclaimed")
            for permit in permits
            if permit.free or permit.reclaimable_by_expiry(now_ms)
        ]
        named = {permit.query_execution_id for permit in permits if permit.query_execution_id is not None}
        self.known = {query: state for query, state in self.known.items() if query in named}
        if query_is_terminal is not None:
            asked = False
            for permit in permits:
                if len(found) >= needed:
                    break
                query = permit.query_execution_id
                if permit.free or query is None or not permit.expired(now_ms):
                    continue
                terminal, asked_now = self.terminal(query, now_ms, query_is_terminal, may_ask=not asked)
                asked = asked or asked_now
                if terminal:
                    found.append((permit, "reclaimed"))
        return sorted(found, key=lambda pair: pair[0].index)

    def terminal(
        self, query: str, now_ms: int, query_is_terminal: QueryIsTerminal, *, may_ask: bool
    ) -> tuple[bool, bool]:
        """(whether ``query`` is known terminal, whether it was asked now): a terminal answer is kept, a "still
        active" one for ``recheck_ms``; nothing is asked unless ``may_ask``."""
        known = self.known.get(query)
        if known is not None and (known[0] or now_ms - known[1] < self.recheck_ms):
            return known[0], False
        if not may_ask:
            return False, False
        terminal = bool(query_is_terminal(query))
        self.known[query] = (terminal, now_ms)
        return terminal, True


def dead_places(permits: Sequence[PermitRecord], owner: PermitOwner) -> Callable[[str], bool]:
    """Places in line that block nobody, as seen by ``owner``: their owner holds a permit (a takeover got one for
    the query while its killed predecessor's place stayed), or :func:`finished_place`."""
    holders = {permit.owner for permit in permits if permit.owner is not None}
    return lambda waiter: waiter_owner_id(waiter) in holders or finished_place(waiter, owner)


def finished_place(waiter: str, owner: PermitOwner) -> bool:
    """Seen by a live slot of ``owner``'s job: the place of an older live slot of the same job and deployment, which
    is finished (the lock's slots only move forward: acquiring ours recorded it MISSED if it was not done)."""
    if owner.generation != table.LIVE_GENERATION:
        return False
    theirs = PermitOwner.from_id(waiter_owner_id(waiter))
    return (
        theirs is not None
        and theirs.generation == table.LIVE_GENERATION
        and (theirs.job, theirs.deployment) == (owner.job, owner.deployment)
        and theirs.slot < owner.slot
    )
