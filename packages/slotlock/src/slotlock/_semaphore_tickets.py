"""The capacity semaphore's line of waiters: the tickets item ``tickets#<name>`` (first come, first served).

One item holds the ticket counter (``ADD``) and, per waiter (its permit owner id), its ticket and its
expiry. Only waiters write it: an acquirer that does not wait only reads it (in the same BatchGetItem as
the permits), so it is the one hot item of the semaphore, and only while some wait. Its timeline is in
:mod:`slotlock._expressions` (``WAITER_*``). A waiter's entry expires ``waiter_ttl_ms`` after its last
renewal; an expired entry blocks nobody, and a registration prunes entries dead for longer than a TTL
(conditioned on their expiry as read, so a waiter renewing meanwhile is never pruned). Every write sets the table
layout and is conditioned on it (:func:`~slotlock._expressions.write`); a tickets item of a newer layout raises
:class:`~slotlock.errors.UnsupportedSchemaVersionError` (from the failed condition's ALL_OLD, or from the read).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from . import _wire as wire
from . import table
from ._client import LockTableClient
from ._expressions import (
    NEXT_TICKET,
    PERMIT_SEMAPHORE,
    PK,
    TICKET_NAMES,
    TICKETS_READY,
    WAITER_ABSENT,
    WAITER_EXPIRES,
    WAITER_PRESENT,
    WAITER_REGISTER_ADD,
    WAITER_REGISTER_SET,
    WAITER_TICKETS,
)
from ._semaphore_items import Ticket, Waiters, decode_waiters
from ._transient import RetryBudget
from ._wire import Condition, UpdateExpression, checked, update, write
from .errors import LockBackendError, UnsupportedSchemaVersionError

logger = logging.getLogger(__name__)

#: Dead entries one registration removes at most (keeps the item far below 400 KB).
MAX_PRUNED = 20


class TicketBook:
    """The waiters of one semaphore on its tickets item (used by :class:`slotlock.semaphore.Semaphore`)."""

    def __init__(self, io: LockTableClient, table_name: str, name: str, waiter_ttl_ms: int) -> None:
        self.io = io
        self.table_name = table_name
        self.name = name
        self.key = table.tickets_key(name)
        self.waiter_ttl_ms = waiter_ttl_ms

    def keep(self, waiter_id: str, ticket: Ticket | None, waiters: Waiters, now_ms: int, budget: RetryBudget) -> Ticket:
        """The waiter's ticket after this poll: kept (its expiry renewed once half spent); adopted when the
        line already holds a live entry of ``waiter_id`` (a retry, a takeover of the same query); else a new
        ticket (a first wait, or an entry that expired or was pruned: the waiter was gone)."""
        live = waiters.live(now_ms)
        number = live.get(waiter_id)
        if number is not None and (ticket is None or ticket.number == number):
            current = Ticket(self.name, waiter_id, number, waiters.expires_at_ms[waiter_id])
            if current.expires_at_ms - now_ms > self.waiter_ttl_ms // 2:
                return current
            touched = self.touch(current, now_ms, budget)
            if touched is not None:
                return touched
        return self.register(waiter_id, waiters, now_ms, budget)

    def register(self, waiter_id: str, waiters: Waiters, now_ms: int, budget: RetryBudget) -> Ticket:
        """Take a ticket: one conditional UpdateItem (``ADD`` on the counter, the entry set if absent, ALL_NEW),
        pruning dead entries; the item is created first if absent (one conditional PutItem, once ever)."""
        ready = waiters.ready
        prune = self._dead(waiters, waiter_id, now_ms)
        for _ in range(4):
            if not ready:
                self._create(budget)
                ready = True
            values = {":zero": {"N": "0"}, ":one": {"N": "1"}, ":expires": {"N": str(now_ms + self.waiter_ttl_ms)}}
            names: dict[str, str] = {}
            removals, conditions = [], []
            for dead, (waiter, expires) in enumerate(prune.items()):  # dead entries, removed as read
                names[f"#d{dead}"] = waiter
                values[f":d{dead}"] = {"N": str(expires)}
                removals.append(f"#waiters.#d{dead}, #waiter_expires.#d{dead}")
                conditions.append(f"#waiter_expires.#d{dead} = :d{dead}")
            expression = update(("SET", WAITER_REGISTER_SET), ("REMOVE", removals), ("ADD", [WAITER_REGISTER_ADD]))
            condition = checked(TICKETS_READY, WAITER_ABSENT, *conditions)
            params = self._update(waiter_id, expression, condition, values, names, return_values="ALL_NEW")
            try:
                response = self.io.send("UpdateItem", params, budget)
            except ClientError as exc:
                item = wire.old_item(exc)
                current = decode_waiters(item if item is not None else self.io.get(self.key), self.key)
                prune = {}
                if not current.ready:
                    ready = False
                    continue
                number = current.tickets.get(waiter_id)
                if number is None:
                    continue  # a pruned entry was renewed meanwhile: register again without pruning
                mine = Ticket(self.name, waiter_id, number, current.expires_at_ms.get(waiter_id, 0))
                touched = self.touch(mine, now_ms, budget)  # our own entry (a resend of our registration)
                if touched is not None:
                    return touched
                self._remove(waiter_id, number, budget)  # ours, but expired: we were gone; a new ticket
                continue
            attributes = decode_waiters(response.get("Attributes"), self.key)
            return Ticket(self.name, waiter_id, attributes.tickets[waiter_id], now_ms + self.waiter_ttl_ms)
        raise LockBackendError("UpdateItem", f"registration of waiter {waiter_id!r} on {self.key!r} kept failing")

    def touch(self, ticket: Ticket, now_ms: int, budget: RetryBudget) -> Ticket | None:
        """Renew a live entry's expiry (ticket unchanged); ``None`` when it is gone or expired."""
        expires_ms = now_ms + self.waiter_ttl_ms
        values = {
            ":ticket": {"N": str(ticket.number)},
            ":expires": {"N": str(expires_ms)},
            ":now": {"N": str(now_ms)},
        }
        params = self._update(
            ticket.waiter_id,
            update(("SET", ["#waiter_expires.#me = :expires"])),
            checked(WAITER_PRESENT, "#waiter_expires.#me > :now"),
            values,
        )
        try:
            self.io.send("UpdateItem", params, budget)
        except ClientError:
            return None
        return Ticket(self.name, ticket.waiter_id, ticket.number, expires_ms)

    def leave(self, ticket: Ticket, now_ms: int, budget: RetryBudget) -> None:
        """Remove the waiter's entry (it took a permit, or gives up). Never raises: an entry left behind
        stops blocking at its expiry (a tickets item of a newer table layout is logged as an error)."""
        del now_ms
        try:
            self._remove(ticket.waiter_id, ticket.number, budget)
        except LockBackendError as exc:
            logger.warning("waiter %s could not leave %s (%s): its entry ends at its expiry", ticket, self.key, exc)
        except UnsupportedSchemaVersionError as exc:
            logger.error("waiter %s could not leave %s: %s", ticket, self.key, exc)

    # --- plumbing -------------------------------------------------------------------------------------
    def _remove(self, waiter_id: str, number: int, budget: RetryBudget) -> None:
        params = self._update(
            waiter_id,
            update(("REMOVE", ["#waiters.#me", "#waiter_expires.#me"])),
            checked(WAITER_PRESENT),
            {":ticket": {"N": str(number)}},
        )
        try:
            self.io.send("UpdateItem", params, budget)
        except ClientError:
            pass  # not there any more (pruned, or our own resent removal)

    def _create(self, budget: RetryBudget) -> None:
        try:
            self.io.send(
                "PutItem",
                write(
                    self.table_name,
                    item={
                        PK: {"S": self.key},
                        PERMIT_SEMAPHORE: {"S": self.name},
                        NEXT_TICKET: {"N": "0"},
                        WAITER_TICKETS: {"M": {}},
                        WAITER_EXPIRES: {"M": {}},
                    },
                    condition=checked("attribute_not_exists(#pk)"),
                    names=TICKET_NAMES,
                ),
                budget,
            )
        except ClientError:
            pass  # another waiter created it first (of our layout: the client refuses a newer one from ALL_OLD)

    def _dead(self, waiters: Waiters, waiter_id: str, now_ms: int) -> dict[str, int]:
        """Entries expired for longer than a TTL (at most :data:`MAX_PRUNED`): waiter id -> expiry as read."""
        dead = sorted(
            (expires, waiter)
            for waiter, expires in waiters.expires_at_ms.items()
            if waiter != waiter_id and expires + self.waiter_ttl_ms <= now_ms
        )
        return {waiter: expires for expires, waiter in dead[:MAX_PRUNED]}

    def _update(
        self,
        waiter_id: str,
        expression: UpdateExpression,
        condition: Condition,
        values: dict[str, Any],
        names: Mapping[str, str] | None = None,
        *,
        return_values: str | None = None,
    ) -> dict[str, Any]:
        """Every write of the tickets item: sets the table layout and is conditioned on it (:func:`write`)."""
        return write(
            self.table_name,
            key=self.key,
            expression=expression,
            condition=condition,
            names={**TICKET_NAMES, "#me": waiter_id, **(names or {})},
            values=values,
            return_values=return_values,
        )
