"""The capacity semaphore's values and its items as stored: permits, tickets, waiters (no I/O).

:class:`PermitOwner` names what a permit stands for (a slot's query: job, slot, generation);
:class:`Permit` is a permit we hold, :class:`Wait` the answer of an acquisition that must wait,
:class:`Ticket` a waiter's place in line, :class:`Release` the outcome of a release. Decoding a permit
item (:func:`decode_permit`) or the tickets item (:func:`decode_waiters`) type-checks every attribute and
reports a tampered one as :class:`~slotlock.errors.CorruptLockItemError`, as :mod:`slotlock.codec` does; an item
of a table layout this slotlock does not read raises :class:`~slotlock.errors.UnsupportedSchemaVersionError` first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
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
    PERMIT_START_MAY_FOLLOW,
    PERMIT_TOKEN,
    WAITER_EXPIRES,
    WAITER_TICKETS,
)
from ._lease import Lease
from .codec import check_schema_version, number_attribute, text_attribute
from .errors import CorruptLockItemError, InvalidEventError, LockConfigurationError
from .slot import Slot

TakeKind = Literal["free", "reclaimed", "inherited", "held"]
ReleaseOutcome = Literal["released", "already_released", "gone"]


#: The separator of a permit owner id's parts; job names, slots and deployments never contain it.
OWNER_SEPARATOR = "#"
#: A waiter id's suffix naming its headroom (``<owner id>#h<headroom>``); absent for headroom 0.
HEADROOM_SUFFIX = "#h"
_DEPLOYMENT_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,255}")
_OWNER_ID = re.compile(
    r"(?P<job>[A-Za-z0-9_-]{1,64})#(?P<slot>[0-9T:Z-]{20})#g(?P<generation>[0-9]{1,12})"
    r"(?:#d(?P<deployment>[A-Za-z0-9_.:-]{1,255}))?"
)


@dataclass(frozen=True)
class PermitOwner:
    """What a permit belongs to: a slot's query (``job``, ``slot``, ``generation``) of one ``deployment``, not an
    invocation.

    Every holder of the slot's lease (a takeover, a Lambda retry) is the same owner with a higher fencing
    token, so it inherits the permit instead of taking a second one. ``deployment`` (keyword-only; e.g. the
    lock table's name) names whose fencing tokens the owner's are: two deployments sharing one semaphore
    with a job of the same name are two owners, never one (each has its own lock table, so their tokens
    are not comparable). ``None``: the id names no deployment (slotlock 1.0's format, kept for one
    deployment alone on its semaphore).
    """

    job: str
    slot: Slot
    generation: int = table.LIVE_GENERATION
    _: KW_ONLY
    deployment: str | None = None

    def __post_init__(self) -> None:
        check_deployment(self.deployment)

    @property
    def id(self) -> str:
        """The owner as stored on a permit item and as the waiter id: ``<job>#<slot iso>#g<generation>``, then
        ``#d<deployment>`` when the owner names its deployment."""
        base = f"{self.job}#{self.slot.iso}#g{self.generation}"
        return base if self.deployment is None else f"{base}#d{self.deployment}"

    @classmethod
    def of(cls, lease: Lease, *, deployment: str | None = None) -> PermitOwner:
        """The owner of the query that ``lease``'s slot and generation run (in ``deployment``)."""
        return cls(lease.job_name, lease.slot, lease.generation, deployment=deployment)

    @classmethod
    def from_id(cls, owner_id: str) -> PermitOwner | None:
        """The owner an id names (a waiter id's headroom suffix ignored), or ``None`` for an id of another shape
        (a semaphore user's own owners)."""
        match = _OWNER_ID.fullmatch(waiter_owner_id(owner_id))
        if match is None:
            return None
        try:
            slot = Slot.parse(match["slot"])
        except InvalidEventError:
            return None
        return cls(match["job"], slot, int(match["generation"]), deployment=match["deployment"])


def check_deployment(deployment: object) -> None:
    """Raises :class:`LockConfigurationError` unless ``deployment`` is ``None`` or 1 to 255 of ``[A-Za-z0-9_.:-]``
    (a lock table's name is: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html)."""
    if deployment is not None and not (isinstance(deployment, str) and _DEPLOYMENT_PATTERN.fullmatch(deployment)):
        raise LockConfigurationError(
            "deployment", f"must be 1 to 255 letters, digits or '_.:-', got {deployment!r:.80}"
        )


def waiter_id(owner_id: str, headroom: int) -> str:
    """The waiter id of ``owner_id`` waiting with ``headroom`` (:data:`HEADROOM_SUFFIX`; the owner id alone for 0)."""
    return owner_id if headroom == 0 else f"{owner_id}{HEADROOM_SUFFIX}{headroom}"


def waiter_owner_id(waiter: str) -> str:
    """The permit owner id a waiter id stands for (its headroom suffix removed)."""
    base, separator, headroom = waiter.rpartition(HEADROOM_SUFFIX)
    return base if separator and headroom.isdigit() else waiter


def waiter_headroom(waiter: str) -> int:
    """The headroom a waiter id declares (0 without the suffix: a live waiter, or one of slotlock 1.0)."""
    _, separator, headroom = waiter.rpartition(HEADROOM_SUFFIX)
    return int(headroom) if separator and headroom.isdigit() else 0


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
    """A permit item as read: ``owner`` ``None`` when free; ``last_owner``/``last_token`` the last release.

    ``start_may_follow_ms``: set by a take, "a query may be started under this permit": while the permit names
    no query it stays counted this long past its expiry (the longest a query can stay active: a start whose
    answer was lost, or whose record failed, may have started one). ``None``: a take by slotlock 1.0.
    """

    index: int
    owner: str | None = None
    fencing_token: int | None = None
    expires_at_ms: int | None = None
    query_execution_id: str | None = None
    last_owner: str | None = None
    last_token: int | None = None
    start_may_follow_ms: int | None = None

    @property
    def free(self) -> bool:
        return self.owner is None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and self.expires_at_ms <= now_ms

    def reclaimable_by_expiry(self, now_ms: int) -> bool:
        """Held, naming no query, and past its expiry plus :attr:`start_may_follow_ms` (a query started under it
        and never recorded has ended by then: Athena cancels a DML query at its timeout)."""
        if self.free or self.query_execution_id is not None or self.expires_at_ms is None:
            return False
        return self.expires_at_ms + (self.start_may_follow_ms or 0) <= now_ms


@dataclass(frozen=True)
class Waiters:
    """The tickets item as read: the next ticket number and each waiter's ticket and expiry.

    A waiter id is its permit owner's id, with ``#h<headroom>`` appended when it waits with a headroom (a
    manual run): :func:`waiter_headroom`.
    """

    next_ticket: int = 0
    tickets: Mapping[str, int] = field(default_factory=dict)
    expires_at_ms: Mapping[str, int] = field(default_factory=dict)
    ready: bool = False  # the item exists with its maps (a waiter can register in one write)

    def live(self, now_ms: int) -> dict[str, int]:
        """Waiter id -> ticket of the waiters whose expiry has not passed at ``now_ms``."""
        return {waiter: ticket for waiter, ticket in self.tickets.items() if self.expires_at_ms.get(waiter, 0) > now_ms}

    def ahead_of(
        self,
        waiter_id: str,
        ticket: int | None,
        now_ms: int,
        *,
        headroom: int = 0,
        skip: Callable[[str], bool] | None = None,
    ) -> int:
        """Live waiters that go before ``waiter_id`` (waiting with ``headroom``, holding ``ticket``; ``None``: a
        newcomer): every waiter with a smaller headroom, whatever its ticket, and those with the same headroom
        and a smaller ticket (all of them for a newcomer). Waiters with a larger headroom never go first: a
        live slot never waits behind a manual run. ``skip(waiter id)``: places known to be dead (their owner
        holds a permit, or their slot is finished), which block nobody."""
        owner = waiter_owner_id(waiter_id)
        count = 0
        for waiter, number in self.live(now_ms).items():
            if waiter_owner_id(waiter) == owner or (skip is not None and skip(waiter)):
                continue
            theirs = waiter_headroom(waiter)
            if theirs < headroom or (theirs == headroom and (ticket is None or number < ticket)):
                count += 1
        return count

    def entries_of(self, owner_id: str) -> dict[str, int]:
        """Waiter id -> ticket of every entry (live or not) standing for ``owner_id``."""
        return {waiter: number for waiter, number in self.tickets.items() if waiter_owner_id(waiter) == owner_id}


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
        start_may_follow_ms=number_attribute(item, key, PERMIT_START_MAY_FOLLOW),
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
