"""A counting semaphore that bounds queries, not processes: N permits on the lock table, fenced, fair.

A named resource (e.g. ``<account>-<region>``, shared by every deployment that shares one Athena budget)
has N permit items ``permit#<name>#<i>`` (i in 0..N-1), so holders never all write one hot item; an
acquirer looks with one strongly consistent ``BatchGetItem`` (the N permits and the tickets item) before
one conditional write on one permit. The condition clauses and their timelines are in
:mod:`slotlock._expressions` (``PERMIT_*``, ``TAKE_*``, ``RECLAIM_*``, ``WAITER_*``); docs/protocol.md,
"Capacity semaphore", gives the semantics and limits.

- **Owner and fence.** A permit belongs to a slot's query (:class:`PermitOwner`: job, slot, generation, and the
  deployment whose lock table issued the token) and carries the fencing token of the job lease that took it;
  every holder write is conditional on owner AND token, so a stale holder's write is refused
  (:class:`~slotlock.errors.StalePermitTokenError`). Another deployment's permit is never ours.
- **Inheritance.** A new holder of the same query (a takeover: same owner, higher token) takes the
  permit over in one conditional write and keeps its query: never a second permit for one query.
- **Reclaim.** A permit naming no query is taken once its expiry (the lease's, renewed with the heartbeat by
  :meth:`Semaphore.renew`) lies ``max_query_active_s`` in the past (a take marks "a start may follow": a query
  started under it, whose start was never recorded, has ended by then); one naming a query once it expired
  (its expiry then covers the holder's invocation: :meth:`Semaphore.query_expiry_ms`) and
  ``query_is_terminal(query id)`` says so, asked at most once per poll and once per ``query_recheck_s`` per
  query. Each take restates what was read (owner, token, expiry, query), so a racing renew wins.
- **Fair waiting, live first.** An acquirer takes a free permit only if more permits are free than live
  waiters go before it (:meth:`Waiters.ahead_of`: smaller headroom first, then ticket order; places of owners
  that hold a permit, or of older live slots of the same job, are dead and skipped); otherwise it takes a
  ticket (``ADD`` on ``tickets#<name>``) and waits.
- **Release** in the caller's commit transaction (:meth:`Semaphore.release_item`) or right after it
  (:meth:`Semaphore.release`); a permit already gone is a :class:`Release` outcome, never an exception.

Transient answers (throttling, conflicts, dropped connections) are retried within a
:class:`~slotlock._transient.RetryBudget` ending at the lease's expiry (:mod:`slotlock._client`); a
failed condition is judged from ALL_OLD, which also recognises an SDK resend of our own applied write.
This module decides which permit to take and when to wait; the permit items' writes and their judgement are
:mod:`slotlock._semaphore_permits`, the line of waiters :mod:`slotlock._semaphore_tickets`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import table
from ._client import LockTableClient
from ._expressions import (
    PERMIT_OURS,
    PERMIT_RECORD_QUERY,
    PERMIT_RECORD_QUERY_EXPIRY_UPDATE,
    PERMIT_RECORD_QUERY_UPDATE,
    PERMIT_RENEW_UPDATE,
)
from ._semaphore_choice import QueryIsTerminal, QueryStates, dead_places, finished_place
from ._semaphore_items import (
    Permit,
    PermitOwner,
    PermitRecord,
    Release,
    Ticket,
    Wait,
    Waiters,
    check_deployment,
    decode_permit,
    decode_waiters,
    waiter_id,
)
from ._semaphore_permits import PermitBook
from ._semaphore_tickets import TicketBook
from ._transient import DEFAULT_MAX_TRANSIENT_ATTEMPTS, ClockMs, RetryBudget, system_clock_ms
from .errors import LockConfigurationError

if TYPE_CHECKING:  # pragma: no cover - stubs are optional
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: One BatchGetItem reads the permits and the tickets item: 100 keys at most.
MAX_PERMITS = 99
DEFAULT_WAITER_TTL_S = 60.0
#: The longest a query started under a permit can stay QUEUED or RUNNING: Athena's default DML query timeout,
#: 30 minutes (adjustable up to 240; https://docs.aws.amazon.com/athena/latest/ug/service-limits.html and
#: https://docs.aws.amazon.com/general/latest/gr/athena.html). A permit naming no query stays counted this long
#: past its expiry.
DEFAULT_MAX_QUERY_ACTIVE_S = 1800.0
#: How soon a waiter asks again about a query it was told is still active (and never more than one query per
#: poll): 100 waiters x 20 expired permits stay far below Athena's GetQueryExecution rate (API call quotas,
#: https://docs.aws.amazon.com/athena/latest/ug/service-limits.html#service-limits-api-calls).
DEFAULT_QUERY_RECHECK_S = 30.0


class Semaphore:
    """A counting semaphore of ``permits`` permits named ``name`` on the lock table ``table_name``.

    Parameters
    ----------
    table_name:
        The lock table (:func:`slotlock.table.create_lock_table`).
    name:
        The semaphore's name (:data:`slotlock.table.SEMAPHORE_NAME_PATTERN`): every user of the same name
        shares the same permits.
    permits:
        N, 1..:data:`MAX_PERMITS`. Every user of one name must use the same N (a smaller N leaves the
        permits above it unread by that user: it never takes them, but never counts them either).
    client, clock_ms, sleep_s:
        As :class:`slotlock.SlotLock`'s (a boto3 DynamoDB client; the caller's clock, epoch ms; the sleep
        between retries of transient answers).
    max_transient_attempts:
        Requests in all that one write spends on transient answers, within the lease's expiry.
    waiter_ttl_s:
        A waiter that does not poll (and so renew its place) for this long counts as gone: its ticket stops
        blocking later ones. Poll at least twice per TTL.
    deployment:
        Whose fencing tokens the leases of :meth:`try_acquire_for`/:meth:`adopt_for` carry (e.g. the lock
        table's name): it is part of every owner id (:class:`PermitOwner`), so deployments sharing the
        semaphore never take each other's permits for their own. ``None``: owner ids name no deployment.
    max_query_active_s:
        The longest a query started under a permit can stay active (default: Athena's DML query timeout,
        :data:`DEFAULT_MAX_QUERY_ACTIVE_S`); a permit naming no query stays counted this long past its expiry.
        0: reclaimed at its expiry (only when no query is ever started without being recorded first).
    query_recheck_s:
        How long an answer "still active" of ``query_is_terminal`` is reused before asking again.

    Examples
    --------
    >>> sem = Semaphore("locks", "123456789012-eu-west-1", permits=20)  # doctest: +SKIP
    >>> got = sem.try_acquire_for(lease)  # doctest: +SKIP
    >>> if got.acquired: permit = sem.record_query(got, query_id)  # doctest: +SKIP
    """

    def __init__(
        self,
        table_name: str,
        name: str,
        permits: int,
        *,
        client: DynamoDBClient | None = None,
        clock_ms: ClockMs = system_clock_ms,
        sleep_s: Callable[[float], None] = time.sleep,
        max_transient_attempts: int = DEFAULT_MAX_TRANSIENT_ATTEMPTS,
        waiter_ttl_s: float = DEFAULT_WAITER_TTL_S,
        rng: random.Random | None = None,
        deployment: str | None = None,
        max_query_active_s: float = DEFAULT_MAX_QUERY_ACTIVE_S,
        query_recheck_s: float = DEFAULT_QUERY_RECHECK_S,
    ) -> None:
        if not isinstance(name, str) or not table.SEMAPHORE_NAME_PATTERN.fullmatch(name):
            raise LockConfigurationError("name", f"must be {table.SEMAPHORE_NAME_RULE}, got {name!r:.80}")
        if isinstance(permits, bool) or not isinstance(permits, int) or not 1 <= permits <= MAX_PERMITS:
            raise LockConfigurationError("permits", f"must be an integer from 1 to {MAX_PERMITS}, got {permits!r}")
        if isinstance(max_transient_attempts, bool) or not isinstance(max_transient_attempts, int):
            raise LockConfigurationError(
                "max_transient_attempts", f"must be an integer, got {max_transient_attempts!r}"
            )
        if not 1 <= max_transient_attempts <= 20:
            raise LockConfigurationError("max_transient_attempts", f"must be 1..20, got {max_transient_attempts}")
        if not isinstance(waiter_ttl_s, (int, float)) or isinstance(waiter_ttl_s, bool) or not waiter_ttl_s > 0:
            raise LockConfigurationError("waiter_ttl_s", f"must be a positive number of seconds, got {waiter_ttl_s!r}")
        for setting, seconds in (("max_query_active_s", max_query_active_s), ("query_recheck_s", query_recheck_s)):
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds <= 86_400:
                raise LockConfigurationError(setting, f"must be a number of seconds from 0 to 86400, got {seconds!r}")
        check_deployment(deployment)
        self.deployment = deployment
        self.max_query_active_ms = int(max_query_active_s * 1000)
        self.query_recheck_ms = int(query_recheck_s * 1000)
        self.query_states = QueryStates(self.query_recheck_ms)  # the answers of query_is_terminal, per query
        self.table_name = table_name
        self.name = name
        self.permits = permits
        self.io = LockTableClient(table_name, client)
        self.clock_ms = clock_ms
        self.sleep_s = sleep_s
        self.max_transient_attempts = max_transient_attempts
        self.rng = rng or random.Random()
        self.tickets = TicketBook(self.io, table_name, name, int(waiter_ttl_s * 1000))
        self.permit_items = PermitBook(
            self.io, table_name, name, lambda: self.clock_ms(), start_may_follow_ms=self.max_query_active_ms
        )

    # --- reads ----------------------------------------------------------------------------------------
    def read(self, *, deadline_ms: int | None = None) -> tuple[list[PermitRecord], Waiters]:
        """Every permit and the waiters: one strongly consistent BatchGetItem (unprocessed keys retried)."""
        keys = [table.permit_key(self.name, index) for index in range(self.permits)]
        items = self.io.batch_get([*keys, self.tickets.key], self.budget(deadline_ms))
        permits = [decode_permit(items.get(key), key, index) for index, key in enumerate(keys)]
        return permits, decode_waiters(items.get(self.tickets.key), self.tickets.key)

    def budget(self, deadline_ms: int | None) -> RetryBudget:
        """The retry budget of one request: ends at ``deadline_ms`` (the lease's expiry)."""
        return RetryBudget(
            clock_ms=self.clock_ms,
            sleep_s=self.sleep_s,
            deadline_ms=deadline_ms,
            max_attempts=self.max_transient_attempts,
        )

    # --- acquire --------------------------------------------------------------------------------------
    def owner_of(self, lease: Any) -> PermitOwner:
        """The permit owner of ``lease``'s query (a :class:`slotlock.Lease`) in this semaphore's deployment."""
        return PermitOwner.of(lease, deployment=self.deployment)

    @staticmethod
    def query_expiry_ms(lease: Any, lease_duration_ms: int) -> int:
        """The expiry of a permit once it names its query: the holder's invocation deadline plus the takeover
        window (``lease_duration_ms``: the last renewal before the deadline expires at most that much later, and
        only then can a successor take the slot over and inherit the permit). It needs no renewal for the rest
        of the invocation, whatever the query's length. Without a deadline, the lease's expiry."""
        if lease.deadline_ms is None:
            return int(lease.expires_at_ms)
        return int(lease.deadline_ms) + int(lease_duration_ms)

    def try_acquire_for(
        self,
        lease: Any,
        *,
        ticket: Ticket | None = None,
        query_is_terminal: QueryIsTerminal | None = None,
        headroom: int = 0,
    ) -> Permit | Wait:
        """:meth:`try_acquire` for the holder of ``lease`` (a :class:`slotlock.Lease`): its owner (in this
        semaphore's ``deployment``), token, expiry."""
        return self.try_acquire(
            self.owner_of(lease),
            lease.fencing_token,
            lease.expires_at_ms,
            ticket=ticket,
            query_is_terminal=query_is_terminal,
            headroom=headroom,
        )

    def adopt_for(self, lease: Any, *, expires_at_ms: int | None = None) -> Permit | None:
        """The permit of ``lease``'s query, inherited by its new holder (a takeover, a Lambda retry adopting the
        query): one read, then one conditional write when the permit carries a lower token (its expiry set to
        ``expires_at_ms``, default the lease's). ``None`` when the query has no permit (it was reclaimed once
        the query ended, or the budget was off when it started): an adopted query is never made to wait, since
        it already runs. A place in line the query's owner left (a predecessor killed while waiting) is removed
        (one more write, only then). Raises :class:`StalePermitTokenError`."""
        owner, token = self.owner_of(lease), lease.fencing_token
        expires = lease.expires_at_ms if expires_at_ms is None else expires_at_ms
        now_ms = self.clock_ms()
        permits, waiters = self.read(deadline_ms=lease.expires_at_ms)
        self._leave_places(waiters, owner, None, now_ms, lease.expires_at_ms)
        mine = [permit for permit in permits if permit.owner == owner.id]
        if not mine:
            return None
        newest = max(mine, key=lambda permit: permit.fencing_token or 0)
        return self.permit_items.inherit(newest, owner, token, expires, now_ms, self.budget(lease.expires_at_ms))

    def try_acquire(
        self,
        owner: PermitOwner,
        fencing_token: int,
        expires_at_ms: int,
        *,
        ticket: Ticket | None = None,
        query_is_terminal: QueryIsTerminal | None = None,
        headroom: int = 0,
    ) -> Permit | Wait:
        """Take a permit for ``owner``'s query, or learn that we must wait.

        One consistent read of the permits and the waiters, then:

        - a permit of ``owner`` exists: token below ours, **inherit** it (one conditional write; its query
          is kept); ours, return it (``held``); above ours, :class:`StalePermitTokenError`;
        - else, with ``k`` live waiters going before us (:meth:`Waiters.ahead_of`: every waiter with a smaller
          ``headroom``, then those of our headroom with a smaller ticket, all of them when we have none; dead
          places skipped: an owner holding a permit, an older live slot of our job) and more than ``k +
          headroom`` permits free or reclaimable, take one with one conditional write (a waiter takes the
          ``k``-th; a newcomer a random one past the ``k`` first);
        - else :class:`Wait`, holding a ticket (taken on the first wait, one more write; kept on later polls,
          its expiry renewed when half spent). Call again with ``wait.ticket`` after a backoff.

        A newcomer that does not wait sends 2 requests (one more only when the line holds a dead place of its
        own owner, which it removes). ``query_is_terminal(query id)`` is asked only about expired permits naming
        a query, only when the free ones do not suffice, at most once per call and once per ``query_recheck_s``
        per query; without it such permits are never reclaimed. It should answer ``False`` for a query it cannot
        read (access denied, throttled: the permit stays counted, which is safe); whatever it raises propagates.
        ``expires_at_ms`` is the lease's expiry (the permit's; renew with :meth:`renew`). ``headroom``: permits to
        leave free for others (a manual run leaves them to the live schedule): we take one only if more than
        ``k + headroom`` are free or reclaimable, so ``headroom`` permits stay free for live slots, which never
        wait behind us.

        Raises
        ------
        StalePermitTokenError
            A holder of the same query with a higher token holds (or held) the permit.
        CorruptLockItemError
            A permit item or the tickets item holds wrong-typed attributes.
        TransientLockError
            Transient answers outlasted the budget (ending at ``expires_at_ms``).
        """
        now_ms = self.clock_ms()
        if isinstance(fencing_token, bool) or not isinstance(fencing_token, int) or fencing_token < 1:
            raise LockConfigurationError("fencing_token", f"must be a positive integer, got {fencing_token!r}")
        if expires_at_ms <= now_ms:
            raise LockConfigurationError("expires_at_ms", f"{expires_at_ms} is not after now ({now_ms})")
        if isinstance(headroom, bool) or not isinstance(headroom, int) or not 0 <= headroom < self.permits:
            raise LockConfigurationError(
                "headroom", f"must be an integer from 0 to {self.permits - 1}, got {headroom!r}"
            )
        budget = self.budget(expires_at_ms)
        permits, waiters = self.read(deadline_ms=expires_at_ms)
        mine = [permit for permit in permits if permit.owner == owner.id]
        if mine:
            newest = max(mine, key=lambda permit: permit.fencing_token or 0)
            taken = self.permit_items.inherit(newest, owner, fencing_token, expires_at_ms, now_ms, budget)
            if taken is not None:
                return self._leave_after(taken, ticket, waiters, now_ms)
        me = waiter_id(owner.id, headroom)
        number = ticket.number if ticket else None
        ahead = waiters.ahead_of(me, number, now_ms, headroom=headroom, skip=dead_places(permits, owner))
        candidates = self.query_states.candidates(permits, now_ms, ahead + headroom + 1, query_is_terminal)
        if len(candidates) > ahead + headroom:
            rest = candidates[ahead:]
            order = rest if ticket is not None else self.rng.sample(rest, len(rest))
            in_use = self.permits - len(candidates) + 1
            for candidate, kind in order:
                taken = self.permit_items.take(candidate, kind, owner, fencing_token, expires_at_ms, now_ms, budget)
                if taken is not None:
                    return self._leave_after(replace(taken, in_use=in_use), ticket, waiters, now_ms)
        if ticket is None:  # a first wait also clears the places of our job's older, finished live slots
            self._remove_places(self._finished_places(waiters, owner), now_ms, expires_at_ms)
        kept = self.tickets.keep(me, ticket, waiters, now_ms, budget)
        return Wait(kept, ahead, len(candidates))

    def _leave_after(self, permit: Permit, ticket: Ticket | None, waiters: Waiters, now_ms: int) -> Permit:
        """A waiter that got its permit leaves the line (one more write; if it fails, its expiry ends it), and so
        does any other place of its owner (a predecessor killed while waiting), and, for a live slot, any place of
        an older live slot of its job (finished): one more write each, only when there is one."""
        self._leave_places(waiters, permit.owner, ticket, now_ms, permit.expires_at_ms)
        return permit if ticket is None else replace(permit, ticket=ticket)

    def _leave_places(
        self, waiters: Waiters, owner: PermitOwner, ticket: Ticket | None, now_ms: int, deadline_ms: int
    ) -> None:
        places = dict(waiters.entries_of(owner.id))
        if ticket is not None:
            places[ticket.waiter_id] = ticket.number
        self._remove_places({**self._finished_places(waiters, owner), **places}, now_ms, deadline_ms)

    @staticmethod
    def _finished_places(waiters: Waiters, owner: PermitOwner) -> dict[str, int]:
        return {waiter: number for waiter, number in waiters.tickets.items() if finished_place(waiter, owner)}

    def _remove_places(self, places: dict[str, int], now_ms: int, deadline_ms: int) -> None:
        for waiter, number in places.items():
            self.tickets.leave(Ticket(self.name, waiter, number, 0), now_ms, self.budget(max(deadline_ms, now_ms + 1)))

    # --- the holder's writes --------------------------------------------------------------------------
    def renew(self, permit: Permit, expires_at_ms: int) -> Permit:
        """Set the permit's expiry to ``expires_at_ms`` (the lease's, after each heartbeat): one conditional
        write on owner and token. Raises :class:`PermitLostError` (reclaimed) or :class:`StalePermitTokenError`."""
        values = {":expires": {"N": str(expires_at_ms)}}
        params = self.permit_items.update(
            permit.index, PERMIT_RENEW_UPDATE, PERMIT_OURS, self.permit_items.ours(permit, values)
        )
        self.permit_items.holder_write(permit, params, "renew", self.budget(permit.expires_at_ms))
        return replace(permit, expires_at_ms=expires_at_ms)

    def record_query(self, permit: Permit, query_execution_id: str, *, expires_at_ms: int | None = None) -> Permit:
        """Record the query the permit stands for, once ``StartQueryExecution`` answered: one conditional write
        (owner, token, and no query or this one: a resend is ours). From then on the permit is reclaimed only
        once the query is terminal. ``expires_at_ms``: the permit's new expiry (:meth:`query_expiry_ms`, so that
        it needs no renewal; ``None``: unchanged). Raises :class:`PermitLostError` / :class:`StalePermitTokenError`."""
        if not isinstance(query_execution_id, str) or not query_execution_id:
            raise LockConfigurationError(
                "query_execution_id", f"must be a non-empty string, got {query_execution_id!r}"
            )
        params = self.record_query_item(permit, query_execution_id, expires_at_ms=expires_at_ms)["Update"]
        self.permit_items.holder_write(permit, params, "record_query", self.budget(permit.expires_at_ms))
        return self.recorded(permit, query_execution_id, expires_at_ms=expires_at_ms)

    def record_query_item(
        self,
        permit: Permit,
        query_execution_id: str,
        *,
        replacing: str | None = None,
        expires_at_ms: int | None = None,
    ) -> dict[str, Any]:
        """The ``TransactWriteItems`` entry of :meth:`record_query`, for the caller's own transaction (the job
        records its query id on the slot item and on the permit in one request; then :meth:`recorded`).
        ``replacing``: the permit's previous query, ended (a new attempt after a retryable failure keeps the
        permit). If the entry fails, the transaction is cancelled: record again without it (the permit then
        names the old query or none, and stays counted: see :data:`DEFAULT_MAX_QUERY_ACTIVE_S`)."""
        values: dict[str, Any] = {":query": {"S": query_execution_id}}
        condition = PERMIT_RECORD_QUERY
        if replacing is not None:
            values[":replacing"] = {"S": replacing}
            condition = f"{PERMIT_OURS} AND (attribute_not_exists(#query) OR #query IN (:query, :replacing))"
        update = PERMIT_RECORD_QUERY_UPDATE
        if expires_at_ms is not None:
            values[":expires"] = {"N": str(expires_at_ms)}
            update = PERMIT_RECORD_QUERY_EXPIRY_UPDATE
        params = self.permit_items.update(permit.index, update, condition, self.permit_items.ours(permit, values))
        return {"Update": params}

    @staticmethod
    def recorded(permit: Permit, query_execution_id: str, *, expires_at_ms: int | None = None) -> Permit:
        """``permit`` once :meth:`record_query_item`'s transaction went through."""
        expires = permit.expires_at_ms if expires_at_ms is None else expires_at_ms
        return replace(permit, query_execution_id=query_execution_id, expires_at_ms=expires)

    def release_item(self, permit: Permit) -> dict[str, Any]:
        """The ``TransactWriteItems`` entry (``{"Update": ...}``) that releases ``permit`` inside the caller's
        commit transaction, conditional on owner and token (ALL_OLD on failure). If it fails, the whole
        transaction is cancelled: commit again without it, and the permit is given back by :meth:`release`
        or, at worst, reclaimed after its expiry."""
        return {"Update": self.permit_items.release_params(permit)}

    def release(self, permit: Permit) -> Release:
        """Give ``permit`` back (right after the commit): one conditional write on owner and token.

        Returns a :class:`Release`: ``released``; ``already_released`` (our own earlier release, found by the
        last owner and token it left); ``gone`` (another owner took it, or it is free). Raises only
        :class:`StalePermitTokenError` (a newer holder of our query holds or released it) and transient errors.
        """
        return self.permit_items.release(permit, self.budget(None))

    def leave(self, ticket: Ticket) -> None:
        """Give up waiting: remove ``ticket`` from the line (a waiter that gives a slot back)."""
        self.tickets.leave(ticket, self.clock_ms(), self.budget(None))


__all__ = [
    "MAX_PERMITS",
    "Permit",
    "PermitOwner",
    "PermitRecord",
    "QueryIsTerminal",
    "Release",
    "Semaphore",
    "Ticket",
    "Wait",
    "Waiters",
]
