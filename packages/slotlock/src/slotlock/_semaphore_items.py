"""The capacity semaphore's values and its items as stored: permits, tickets, waiters (no I/O).

:class:`PermitOwner` names what a permit stands for (a slot's query: job, slot, generation);
:class:`Permit` is a permit we hold, :class:`Wait` the answer of an acquisition that must wait,
:class:`Ticket` a waiter's place in line, :class:`Release` the outcome of a release. Decoding a permit
item (:func:`decode_permit`) or the tickets item (:func:`decode_waiters`) type-checks every attribute and
reports a tampered one as :class:`~slotlock.errors.CorruptLockItemError`, as :mod:`slotlock.codec` does; an item
of a table layout this slotlock does not read raises :class:`~slotlock.errors.UnsupportedSchemaVersionError` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from . import _wire as wire
from . import table
from ._expressions import (
    NEXT_TICKET,
    PERMIT_EXPIRES,
    PERMIT_LAST_OWNER,
    PERMIT_LAST_TOKEN,
    PERMIT_OWNER,
    PERMIT_QUERY,
    PERMIT_TOKEN,
    WAITER_EXPIRES,
    WAITER_TICKETS,
)
from ._lease import Lease
from .codec import check_schema_version, number_attribute, text_attribute
from .errors import CorruptLockItemError
from .slot import Slot

TakeKind = Literal["free", "reclaimed", "inherited", "held"]
ReleaseOutcome = Literal["released", "already_released", "gone"]


@dataclass(frozen=True)
class PermitOwner:
    """What a permit belongs to: a slot's query (``job``, ``slot``, ``generation``), not an invocation.

    Every holder of the slot's lease (a takeover, a Lambda retry) is the same owner with a higher fencing
    token, so it inherits the permit instead of taking a second one.
    """

    job: str
    slot: Slot
    generation: int = table.LIVE_GENERATION

    @property
    def id(self) -> str:
        """The owner as stored on a permit item and as the waiter id: ``<job>#<slot iso>#g<generation>``."""
        return f"{self.job}#{self.slot.iso}#g{self.generation}"

    @classmethod
    def of(cls, lease: Lease) -> PermitOwner:
        """The owner of the query that ``lease``'s slot and generation run."""
        return cls(lease.job_name, lease.slot, lease.generation)


@dataclass(frozen=True)
class Ticket:
    """A waiter's place in line: ``number`` from the semaphore's ticket counter, kept across polls.

    ``expires_at_ms`` (caller clock): after it, the waiter counts as gone and no longer blocks later tickets.
    """

    semaphore: str
    waiter_id: str
    number: int
    expires_at_ms: int


@dataclass(frozen=True)
class Permit:
    """A permit we hold: permit ``index`` of ``semaphore``, for ``owner``, fenced by ``fencing_token``.

    ``how`` says how it was obtained: ``free`` (absent or released), ``reclaimed`` (its holder's lease had
    expired, with no query or a terminal one: ``replaced_owner``/``replaced_query`` name them), ``inherited``
    (a holder of the same query with a lower token: ``replaced_token``), ``held`` (ours already: a resend or
    a repeated call). ``query_execution_id`` is the query it stands for once recorded (kept by an inheritance).
    """

    acquired: ClassVar[bool] = True

    semaphore: str
    index: int
    owner: PermitOwner
    fencing_token: int
    expires_at_ms: int
    how: TakeKind
    query_execution_id: str | None = None
    replaced_owner: str | None = None
    replaced_token: int | None = None
    replaced_query: str | None = None
    ticket: Ticket | None = None
    in_use: int | None = None  # permits held just after the take, ours included (as read; None: not counted)

    @property
    def key(self) -> str:
        """The permit item's partition key."""
        return table.permit_key(self.semaphore, self.index)


@dataclass(frozen=True)
class Wait:
    """No permit for us now: wait (heartbeating the lease) and call again with ``ticket``.

    ``ahead`` is the number of live waiters with smaller tickets seen, ``free`` the permits free or
    reclaimable seen.
    """

    acquired: ClassVar[bool] = False

    ticket: Ticket
    ahead: int
    free: int


@dataclass(frozen=True)
class Release:
    """The outcome of a release: ``released`` (by this call), ``already_released`` (our own earlier release,
    e.g. an SDK resend of an applied one), ``gone`` (reclaimed by another owner, or never ours: nothing to
    give back). ``current_owner`` is the permit's holder when it is ``gone`` (``None``: free)."""

    outcome: ReleaseOutcome
    key: str
    current_owner: str | None = None


@dataclass(frozen=True)
class PermitRecord:
    """A permit item as read: ``owner`` ``None`` when free; ``last_owner``/``last_token`` the last release."""

    index: int
    owner: str | None = None
    fencing_token: int | None = None
    expires_at_ms: int | None = None
    query_execution_id: str | None = None
    last_owner: str | None = None
    last_token: int | None = None

    @property
    def free(self) -> bool:
        return self.owner is None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and self.expires_at_ms <= now_ms


@dataclass(frozen=True)
class Waiters:
    """The tickets item as read: the next ticket number and each waiter's ticket and expiry."""

    next_ticket: int = 0
    tickets: Mapping[str, int] = field(default_factory=dict)
    expires_at_ms: Mapping[str, int] = field(default_factory=dict)
    ready: bool = False  # the item exists with its maps (a waiter can register in one write)

    def live(self, now_ms: int) -> dict[str, int]:
        """Waiter id -> ticket of the waiters whose expiry has not passed at ``now_ms``."""
        return {waiter: ticket for waiter, ticket in self.tickets.items() if self.expires_at_ms.get(waiter, 0) > now_ms}

    def ahead_of(self, waiter_id: str, ticket: int | None, now_ms: int) -> int:
        """Live waiters (other than ``waiter_id``) with a ticket below ``ticket`` (``None``: all of them)."""
        return sum(
            1
            for waiter, number in self.live(now_ms).items()
            if waiter != waiter_id and (ticket is None or number < ticket)
        )


def decode_permit(item: Mapping[str, Mapping[str, Any]] | None, key: str, index: int) -> PermitRecord:
    """A permit item (DynamoDB JSON, or ``None`` when absent) as a :class:`PermitRecord`.

    Raises :class:`UnsupportedSchemaVersionError` for a newer table layout (checked first), and
    :class:`CorruptLockItemError` on a wrong-typed attribute, or a holder without token or expiry.
    """
    check_schema_version(item, key)
    if not item:
        return PermitRecord(index)
    owner = text_attribute(item, key, PERMIT_OWNER)
    token = number_attribute(item, key, PERMIT_TOKEN)
    expires = number_attribute(item, key, PERMIT_EXPIRES)
    if owner is not None and (token is None or expires is None):
        missing = PERMIT_TOKEN if token is None else PERMIT_EXPIRES
        raise CorruptLockItemError(key, missing, "is missing although a permit owner is set")
    return PermitRecord(
        index=index,
        owner=owner,
        fencing_token=token,
        expires_at_ms=expires,
        query_execution_id=text_attribute(item, key, PERMIT_QUERY),
        last_owner=text_attribute(item, key, PERMIT_LAST_OWNER),
        last_token=number_attribute(item, key, PERMIT_LAST_TOKEN),
    )


def decode_waiters(item: Mapping[str, Mapping[str, Any]] | None, key: str) -> Waiters:
    """The tickets item (DynamoDB JSON, or ``None``) as :class:`Waiters`; raises :class:`UnsupportedSchemaVersionError`
    (a newer table layout, checked first) or :class:`CorruptLockItemError`."""
    check_schema_version(item, key)
    if not item:
        return Waiters()
    next_ticket = number_attribute(item, key, NEXT_TICKET) or 0
    maps: list[dict[str, int]] = []
    for name in (WAITER_TICKETS, WAITER_EXPIRES):
        value = item.get(name)
        if value is None:
            maps.append({})
            continue
        if set(value) != {"M"}:
            raise CorruptLockItemError(key, name, f"must be a Map, found {wire.type_of(value)}")
        decoded: dict[str, int] = {}
        for waiter, number in value["M"].items():
            if set(number) != {"N"}:
                raise CorruptLockItemError(key, f"{name}.{waiter}", f"must be a Number, found {wire.type_of(number)}")
            decoded[waiter] = int(number["N"])
        maps.append(decoded)
    ready = item.get(WAITER_TICKETS) is not None and item.get(WAITER_EXPIRES) is not None
    return Waiters(next_ticket, maps[0], maps[1], ready)
