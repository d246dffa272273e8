"""The capacity semaphore's permit items ``permit#<name>#<i>``: every write of one, and its judgement.

:class:`PermitBook` sends the conditional writes of :class:`slotlock.semaphore.Semaphore` (take, inherit, renew,
record the query, release) and judges a failed one from ALL_OLD: our own applied write (an SDK resend), a stale
holder (:class:`~slotlock.errors.StalePermitTokenError`), a reclaimed permit
(:class:`~slotlock.errors.PermitLostError`). Which permit to take, and when to wait, is the semaphore's. The clauses and their timelines are in
:mod:`slotlock._expressions` (``PERMIT_*``, ``TAKE_*``, ``RECLAIM_*``); every write sets the table layout and is
conditioned on it (:func:`~slotlock._expressions.write`), and a permit item of a newer layout raises
:class:`~slotlock.errors.UnsupportedSchemaVersionError` (from the failed condition's ALL_OLD, :mod:`slotlock._client`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from . import _wire as wire
from . import table
from ._client import LockTableClient
from ._expressions import (
    PERMIT_FREE,
    PERMIT_INHERIT,
    PERMIT_INHERIT_UPDATE,
    PERMIT_NAMES,
    PERMIT_OURS,
    PERMIT_RELEASE_UPDATE,
    PERMIT_TAKE_UPDATE,
    RECLAIM_TERMINAL_QUERY,
    TAKE_EXPIRED_NO_QUERY,
)
from ._semaphore_items import Permit, PermitOwner, PermitRecord, Release, TakeKind, decode_permit
from ._transient import RetryBudget
from ._wire import UpdateExpression, checked, write
from .errors import PermitLostError, StalePermitTokenError


class PermitBook:
    """The permit items of semaphore ``name`` on the lock table (used by :class:`slotlock.semaphore.Semaphore`)."""

    def __init__(
        self,
        io: LockTableClient,
        table_name: str,
        name: str,
        clock_ms: Callable[[], int],
        *,
        start_may_follow_ms: int = 0,
    ) -> None:
        self.io = io
        self.table_name = table_name
        self.name = name
        self.clock_ms = clock_ms
        self.start_may_follow_ms = start_may_follow_ms

    # --- takes ----------------------------------------------------------------------------------------
    def take(
        self,
        seen: PermitRecord,
        kind: TakeKind,
        owner: PermitOwner,
        token: int,
        expires_at_ms: int,
        now_ms: int,
        budget: RetryBudget,
    ) -> Permit | None:
        """One conditional write taking ``seen`` as read (free, or reclaimed restating owner, token, expiry
        and query), marked "start may follow" (:data:`~slotlock._expressions.PERMIT_START_MAY_FOLLOW`); ``None``
        when another writer changed it first (a racing renew, another taker)."""
        values: dict[str, Any] = {
            ":owner": {"S": owner.id},
            ":token": {"N": str(token)},
            ":expires": {"N": str(expires_at_ms)},
            ":now": {"N": str(now_ms)},
            ":semaphore": {"S": self.name},
            ":index": {"N": str(seen.index)},
            ":null": {"NULL": True},
            ":start_may_follow": {"N": str(self.start_may_follow_ms)},
        }
        if seen.free:
            condition = PERMIT_FREE
        else:
            values |= {
                ":seen_owner": {"S": str(seen.owner)},
                ":seen_token": {"N": str(seen.fencing_token)},
                ":seen_expires": {"N": str(seen.expires_at_ms)},
            }
            if seen.query_execution_id is not None:
                values[":seen_query"] = {"S": seen.query_execution_id}
                condition = RECLAIM_TERMINAL_QUERY
            else:  # the expiry restated, and at least the start window F (as read) behind it
                values[":quiet_since"] = {"N": str(now_ms - (seen.start_may_follow_ms or 0))}
                condition = TAKE_EXPIRED_NO_QUERY
        params = self.update(seen.index, PERMIT_TAKE_UPDATE, condition, values)
        permit = Permit(
            self.name,
            seen.index,
            owner,
            token,
            expires_at_ms,
            kind,
            replaced_owner=seen.owner,
            replaced_token=seen.fencing_token,
            replaced_query=seen.query_execution_id,
        )
        # The lease ran out while we looked: a permit born expired, naming no query, is reclaimable (take nothing).
        return self.claim(params, permit, permit, budget)

    def inherit(
        self, seen: PermitRecord, owner: PermitOwner, token: int, expires_at_ms: int, now_ms: int, budget: RetryBudget
    ) -> Permit | None:
        """Take over ``owner``'s own permit ``seen``: ours already (``held``), inherited from a lower token
        in one conditional write (its query kept), or refused (stale). ``None``: it was reclaimed meanwhile."""
        held = Permit(
            self.name,
            seen.index,
            owner,
            token,
            seen.expires_at_ms or expires_at_ms,
            "held",
            query_execution_id=seen.query_execution_id,
        )
        seen_token = seen.fencing_token or 0
        if seen_token == token:
            return held
        if seen_token > token:
            raise self.lost(StalePermitTokenError, held, seen, "acquire")
        values = {
            ":owner": {"S": owner.id},
            ":token": {"N": str(token)},
            ":seen_token": {"N": str(seen_token)},
            ":expires": {"N": str(expires_at_ms)},
            ":now": {"N": str(now_ms)},
        }
        params = self.update(seen.index, PERMIT_INHERIT_UPDATE, PERMIT_INHERIT, values)
        inherited = replace(held, expires_at_ms=expires_at_ms, how="inherited", replaced_token=seen_token)
        # The lease ran out while we looked: inherit nothing with an expiry already past.
        return self.claim(params, inherited, held, budget)

    def claim(self, params: Mapping[str, Any], claimed: Permit, judged: Permit, budget: RetryBudget) -> Permit | None:
        """Send a take or an inheritance (``params``) of ``claimed``: ``claimed`` when it applied, or when ALL_OLD
        shows our own applied write (a request whose answer was lost: the SDK resent it); ``None`` when another
        writer changed the permit first, or when the lease (``claimed``'s expiry) ran out before the write.
        A newer token of our owner raises :class:`StalePermitTokenError` (about ``judged``, as the caller knew it)."""
        if claimed.expires_at_ms <= self.clock_ms():
            return None
        try:
            self.io.send("UpdateItem", params, budget)
        except ClientError as exc:  # send re-raises only a failed condition
            current = self.old(exc, claimed.index)
            if current.owner == claimed.owner.id and current.fencing_token == claimed.fencing_token:
                return claimed
            if current.owner == claimed.owner.id and (current.fencing_token or 0) > claimed.fencing_token:
                raise self.lost(StalePermitTokenError, judged, current, "acquire") from exc
            return None
        return claimed

    # --- the holder's writes and the release ------------------------------------------------------
    def holder_write(self, permit: Permit, params: Mapping[str, Any], operation: str, budget: RetryBudget) -> None:
        """A holder's write (renew, record the query), judged from ALL_OLD when its condition fails: raises
        :class:`StalePermitTokenError` (a newer holder of our query) or :class:`PermitLostError` (reclaimed)."""
        try:
            self.io.send("UpdateItem", params, budget)
        except ClientError as exc:
            current = self.old(exc, permit.index)
            stale = current.owner == permit.owner.id and (current.fencing_token or 0) > permit.fencing_token
            raise self.lost(StalePermitTokenError if stale else PermitLostError, permit, current, operation) from exc

    def release(self, permit: Permit, budget: RetryBudget) -> Release:
        """One conditional write giving ``permit`` back, judged from ALL_OLD (:meth:`Semaphore.release`)."""
        try:
            self.io.send("UpdateItem", self.release_params(permit), budget)
        except ClientError as exc:
            item = wire.old_item(exc) or self.io.get(permit.key)
            current = decode_permit(item, permit.key, permit.index)
            if current.owner == permit.owner.id or (current.free and current.last_owner == permit.owner.id):
                token = current.fencing_token if current.owner else current.last_token
                if (token or 0) > permit.fencing_token:
                    raise self.lost(StalePermitTokenError, permit, current, "release") from exc
                if current.free and token == permit.fencing_token:
                    return Release("already_released", permit.key)
            return Release("gone", permit.key, current.owner)
        return Release("released", permit.key)

    def release_params(self, permit: Permit) -> dict[str, Any]:
        values = {":now": {"N": str(self.clock_ms())}}
        params = self.update(permit.index, PERMIT_RELEASE_UPDATE, PERMIT_OURS, self.ours(permit, values))
        return params

    @staticmethod
    def ours(permit: Permit, values: Mapping[str, Any]) -> dict[str, Any]:
        return {":owner": {"S": permit.owner.id}, ":token": {"N": str(permit.fencing_token)}, **values}

    def update(self, index: int, update: UpdateExpression, condition: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every write of a permit item: sets the table layout and is conditioned on it (:func:`write`)."""
        return write(
            self.table_name,
            key=table.permit_key(self.name, index),
            expression=update,
            condition=checked(condition),
            names=PERMIT_NAMES,
            values=values,
        )

    def old(self, exc: ClientError, index: int) -> PermitRecord:
        """The permit that failed a condition (ALL_OLD; one consistent read when the answer has none)."""
        key = table.permit_key(self.name, index)
        item = wire.old_item(exc)
        return decode_permit(item if item is not None else self.io.get(key), key, index)

    @staticmethod
    def lost(error: type[PermitLostError], permit: Permit, current: PermitRecord, operation: str) -> PermitLostError:
        return error(
            permit.key,
            permit.owner.id,
            permit.fencing_token,
            current.owner,
            current.fencing_token if current.owner else current.last_token,
            operation=operation,
        )
