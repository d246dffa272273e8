"""The capacity semaphore (slotlock.semaphore) on moto and DynamoDB Local, interleavings driven one request at
a time with the fake clock: take and release, N at the boundary, expiry with and without a query, a racing
renew, inheritance on takeover, stale holders, lost answers, the release inside a commit, fairness, and the
request count of an acquirer that does not wait.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Self

import pytest
from botocore.exceptions import ConnectionClosedError

from slotlock import (
    CommitConflictError,
    Permit,
    PermitLostError,
    PermitOwner,
    Semaphore,
    Slot,
    SlotLock,
    StalePermitTokenError,
    Wait,
)

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

NAME = "123456789012-us-east-1"
LEASE_MS = 30_000
TTL_S = 20.0


@pytest.fixture
def make_sem(make_semaphore: Callable[..., Semaphore]) -> Callable[..., Semaphore]:
    def make(permits: int = 2, **overrides: Any) -> Semaphore:
        # Reclaim at the expiry itself, as slotlock 1.0 did: these tests are about the expiry's mechanics. The start
        # window (a permit naming no query stays counted max_query_active_s past it), and the cache of
        # query_is_terminal's answers, have their own tests (test_semaphore_invariants.py).
        return make_semaphore(permits, **{"max_query_active_s": 0, "query_recheck_s": 0, **overrides})

    return make


def owner(job: str, slot: Slot, generation: int = 1) -> PermitOwner:
    return PermitOwner(job, slot, generation)


def taken(result: Permit | Wait) -> Permit:
    assert isinstance(result, Permit), f"expected a permit, got {result}"
    return result


def waiting(result: Permit | Wait) -> Wait:
    assert isinstance(result, Wait), f"expected a wait, got {result}"
    return result


def held_by(get_item: Callable[[str], Any], index: int) -> str | None:
    item = get_item(f"permit#{NAME}#{index}") or {}
    return item.get("permit_owner", {}).get("S")


def holders(get_item: Callable[[str], Any], permits: int) -> list[str | None]:
    return [held_by(get_item, index) for index in range(permits)]


# --- take, release, the boundary --------------------------------------------------------------------------
def test_take_and_release(make_sem: Any, slot: Slot, clock: Any, get_item: Any) -> None:
    sem = make_sem(permits=2)
    permit = taken(sem.try_acquire(owner("a", slot), 7, clock.now + LEASE_MS))
    assert permit.how == "free" and permit.fencing_token == 7
    item = get_item(permit.key)
    assert item["permit_owner"]["S"] == "a#2026-11-22T00:30:00Z#g1"
    assert item["permit_fencing_token"]["N"] == "7"
    assert item["permit_expires_at_ms"]["N"] == str(clock.now + LEASE_MS)
    assert sem.release(permit).outcome == "released"
    assert holders(get_item, 2) == [None, None]
    assert sem.release(permit).outcome == "already_released"  # idempotent, recognised by last owner/token


def test_n_holders_fill_the_semaphore_and_the_next_waits(make_sem: Any, slot: Slot, clock: Any, get_item: Any) -> None:
    sem = make_sem(permits=3)
    permits = [taken(sem.try_acquire(owner(f"job{i}", slot), 1, clock.now + LEASE_MS)) for i in range(3)]
    assert sorted(permit.index for permit in permits) == [0, 1, 2]
    fourth = waiting(sem.try_acquire(owner("job3", slot), 1, clock.now + LEASE_MS))
    assert fourth.free == 0 and fourth.ahead == 0 and fourth.ticket.number == 0
    assert None not in holders(get_item, 3)
    assert sem.release(permits[1]).outcome == "released"
    fourth_permit = taken(sem.try_acquire(owner("job3", slot), 1, clock.now + LEASE_MS, ticket=fourth.ticket))
    assert fourth_permit.index == permits[1].index
    assert fourth_permit.ticket == fourth.ticket
    # the waiter left the line when it got its permit
    assert get_item(f"tickets#{NAME}")["waiter_tickets"]["M"] == {}


# --- expiry and reclaim ----------------------------------------------------------------------------------
def test_an_expired_permit_without_a_query_is_reclaimed(make_sem: Any, slot: Slot, clock: Any) -> None:
    sem = make_sem(permits=1)
    first = taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS))
    waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS))  # still held
    clock.advance(ms=LEASE_MS)  # expiry <= now: expired
    second = taken(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS))
    assert second.how == "reclaimed" and second.replaced_owner == first.owner.id
    with pytest.raises(PermitLostError) as lost:
        sem.renew(first, clock.now + LEASE_MS)
    assert not isinstance(lost.value, StalePermitTokenError)
    assert lost.value.current_owner == second.owner.id
    assert sem.release(first).outcome == "gone"  # a clear result, not an exception


def test_an_expired_permit_with_a_running_query_is_reclaimed_only_once_terminal(
    make_sem: Any, slot: Slot, clock: Any
) -> None:
    sem = make_sem(permits=1)
    first = sem.record_query(taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS)), "q-1")
    clock.advance(ms=LEASE_MS + 1)
    asked: list[str] = []

    def running(query: str) -> bool:
        asked.append(query)
        return False

    waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS))  # no callable: never reclaimed
    waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS, query_is_terminal=running))
    assert asked == ["q-1"]
    second = taken(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS, query_is_terminal=lambda q: True))
    assert second.how == "reclaimed" and second.replaced_query == "q-1" and second.query_execution_id is None
    with pytest.raises(PermitLostError):
        sem.record_query(first, "q-1")


def test_a_racing_renew_beats_a_reclaim(make_sem: Any, ddb: Any, slot: Slot, clock: Any, get_item: Any) -> None:
    sem = make_sem(permits=1)
    first = taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS))
    clock.advance(ms=LEASE_MS + 1)
    renewed: list[Permit] = []

    def renew_first(model: Any, params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params.get("body") or b"{}")
        if model.name == "UpdateItem" and ":seen_owner" in body.get("ExpressionAttributeValues", {}) and not renewed:
            renewed.append(sem.renew(first, clock.now + LEASE_MS))  # between the reclaimer's read and write

    ddb.meta.events.register("before-call.dynamodb", renew_first)
    try:
        result = sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS)
    finally:
        ddb.meta.events.unregister("before-call.dynamodb", renew_first)
    waiting(result)
    assert renewed and held_by(get_item, 0) == first.owner.id
    assert get_item(first.key)["permit_expires_at_ms"]["N"] == str(renewed[0].expires_at_ms)


def test_a_lease_that_runs_out_during_the_read_takes_nothing(
    make_sem: Any, ddb: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN an acquirer whose read of the permits is slow: its lease runs out before the answer (found by
    # make capacity: a 6 s read under load, then a take whose expiry had passed, reclaimed at once by another slot)
    sem = make_sem(permits=1)

    def slow_read(model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem":
            clock.advance(ms=LEASE_MS + 1)

    # WHEN it tries for a permit
    ddb.meta.events.register("after-call.dynamodb", slow_read)
    try:
        result = sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS)
    finally:
        ddb.meta.events.unregister("after-call.dynamodb", slow_read)
    # THEN it writes no permit born expired (naming no query, anyone could reclaim it while it starts its query): it
    # waits, and takes one once it tries again with a renewed lease
    waiting(result)
    assert held_by(get_item, 0) is None
    assert taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS)).how == "free"


# --- takeover, stale holders -----------------------------------------------------------------------------
def test_a_takeover_inherits_the_permit_and_its_query(make_sem: Any, slot: Slot, clock: Any, get_item: Any) -> None:
    sem = make_sem(permits=3)
    first = sem.record_query(taken(sem.try_acquire(owner("a", slot), 4, clock.now + LEASE_MS)), "q-1")
    successor = taken(sem.try_acquire(owner("a", slot), 5, clock.now + LEASE_MS))  # same query, higher token
    assert successor.how == "inherited" and successor.index == first.index
    assert successor.query_execution_id == "q-1" and successor.replaced_token == 4
    assert holders(get_item, 3).count(first.owner.id) == 1  # never a second permit
    again = taken(sem.try_acquire(owner("a", slot), 5, clock.now + LEASE_MS))
    assert again.how == "held" and again.index == first.index
    # the stale holder (token 4) is refused everywhere
    for write in (lambda: sem.renew(first, clock.now + LEASE_MS), lambda: sem.record_query(first, "q-2")):
        with pytest.raises(StalePermitTokenError) as stale:
            write()
        assert stale.value.current_token == 5
    with pytest.raises(StalePermitTokenError):
        sem.release(first)
    with pytest.raises(StalePermitTokenError):
        sem.try_acquire(owner("a", slot), 4, clock.now + LEASE_MS)
    assert sem.release(successor).outcome == "released"
    with pytest.raises(StalePermitTokenError):  # released by the newer holder: still refused, never "gone"
        sem.release(first)


def test_an_other_generation_of_the_same_slot_is_another_owner(make_sem: Any, slot: Slot, clock: Any) -> None:
    sem = make_sem(permits=2)
    live = taken(sem.try_acquire(owner("a", slot, 1), 3, clock.now + LEASE_MS))
    rerun = taken(sem.try_acquire(owner("a", slot, 2), 1, clock.now + LEASE_MS))
    assert {live.index, rerun.index} == {0, 1} and rerun.how == "free"


# --- lost answers: the SDK resends an applied write ------------------------------------------------------
class LoseAnswers:
    """The next ``count`` matching requests apply, but their answer is replaced by a dropped connection."""

    def __init__(self, client: Any, operation: str, count: int = 1, when: Callable[[dict[str, Any]], bool] = bool):
        self.client, self.operation, self.count, self.when = client, operation, count, when

    def __enter__(self) -> Self:
        self.client.meta.events.register("before-call.dynamodb", self._before)
        self.client.meta.events.register("after-call.dynamodb", self._after)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", self._before)
        self.client.meta.events.unregister("after-call.dynamodb", self._after)

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        params["context"]["semaphore_test_body"] = json.loads(params.get("body") or b"{}")

    def _after(self, model: Any, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        body = context.get("semaphore_test_body", {})
        if model.name == self.operation and self.count > 0 and http_response.status_code < 300 and self.when(body):
            self.count -= 1
            raise ConnectionClosedError(endpoint_url="https://dynamodb.local")


def test_resent_writes_whose_answers_were_lost_are_recognised_as_ours(
    make_sem: Any, ddb: Any, slot: Slot, clock: Any, get_item: Any, request_log: Any
) -> None:
    sem = make_sem(permits=2)
    with LoseAnswers(ddb, "UpdateItem") as lose:  # the take applied, its answer lost, resent: ours
        permit = taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS))
    assert lose.count == 0 and holders(get_item, 2).count(permit.owner.id) == 1
    with LoseAnswers(ddb, "UpdateItem"):
        permit = sem.record_query(permit, "q-1")
    with LoseAnswers(ddb, "UpdateItem"):
        inherited = taken(sem.try_acquire(owner("a", slot), 2, clock.now + LEASE_MS))
    assert inherited.how == "inherited" and inherited.query_execution_id == "q-1"
    with LoseAnswers(ddb, "UpdateItem"):
        assert sem.release(inherited).outcome == "already_released"  # the resend finds its own release
    assert holders(get_item, 2) == [None, None]


def test_a_resent_registration_keeps_the_waiters_ticket(
    make_sem: Any, ddb: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    sem = make_sem(permits=1)
    taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS))
    with LoseAnswers(ddb, "UpdateItem", when=lambda body: body["Key"]["pk"]["S"].startswith("tickets#")):
        wait = waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS))
    assert wait.ticket.number == 0
    tickets = get_item(f"tickets#{NAME}")
    assert tickets["next_ticket"]["N"] == "1"  # one ticket taken, not two
    # a retry of the invocation without its ticket object adopts the same ticket
    assert waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS)).ticket.number == 0


# --- the release inside the commit transaction -----------------------------------------------------------
def test_the_release_item_goes_inside_the_commit_transaction(
    make_sem: Any, make_lock: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    sem = make_sem(permits=1)
    lock: SlotLock = make_lock()
    lease = lock.acquire(slot, "req-1")
    permit = taken(sem.try_acquire_for(lease))
    assert permit.owner == PermitOwner("flights-dashboard", slot, 1) and permit.fencing_token == lease.fencing_token
    lock.commit(lease, writes=[sem.release_item(permit)], summary={"rows": 1})
    assert held_by(get_item, 0) is None
    assert get_item(lock.slot_key(slot))["status"]["S"] == "SUCCEEDED"


def test_a_permit_lost_before_the_commit_never_stops_the_commit(
    make_sem: Any, make_lock: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    sem = make_sem(permits=1)
    lock: SlotLock = make_lock()
    lease = lock.acquire(slot, "req-1")
    permit = taken(sem.try_acquire(PermitOwner.of(lease), lease.fencing_token, clock.now + 1_000))
    clock.advance(ms=1_000)  # the permit's expiry passed (no query recorded): another job reclaims it
    other = taken(sem.try_acquire(owner("other", slot), 1, clock.now + LEASE_MS))
    assert other.how == "reclaimed"
    lease = lock.heartbeat(lease)
    with pytest.raises(CommitConflictError) as conflict:
        lock.commit(lease, writes=[sem.release_item(permit)])
    assert conflict.value.index == 0
    lock.commit(lease)  # commit again without the permit write
    assert get_item(lock.slot_key(slot))["status"]["S"] == "SUCCEEDED"
    assert held_by(get_item, 0) == other.owner.id  # the other job's permit is untouched


# --- fairness ----------------------------------------------------------------------------------------------
def test_a_later_ticket_never_takes_a_permit_ahead_of_a_live_earlier_waiter(
    make_sem: Any, slot: Slot, clock: Any
) -> None:
    sem = make_sem(permits=1)
    holder = taken(sem.try_acquire(owner("hourly", slot), 1, clock.now + LEASE_MS))
    daily = waiting(sem.try_acquire(owner("daily", slot), 1, clock.now + LEASE_MS))
    frequent = waiting(sem.try_acquire(owner("frequent", slot), 1, clock.now + LEASE_MS))
    assert (daily.ticket.number, frequent.ticket.number) == (0, 1) and frequent.ahead == 1
    sem.release(holder)
    assert waiting(sem.try_acquire(owner("frequent", slot), 1, clock.now + LEASE_MS, ticket=frequent.ticket)).ahead == 1
    assert waiting(sem.try_acquire(owner("newcomer", slot), 1, clock.now + LEASE_MS)).ahead == 2  # behind both
    got = taken(sem.try_acquire(owner("daily", slot), 1, clock.now + LEASE_MS, ticket=daily.ticket))
    assert got.how == "free"


def test_free_permits_serve_as_many_waiters_in_order(make_sem: Any, slot: Slot, clock: Any) -> None:
    sem = make_sem(permits=2)
    held = [taken(sem.try_acquire(owner(f"h{i}", slot), 1, clock.now + LEASE_MS)) for i in range(2)]
    first = waiting(sem.try_acquire(owner("w0", slot), 1, clock.now + LEASE_MS))
    second = waiting(sem.try_acquire(owner("w1", slot), 1, clock.now + LEASE_MS))
    for permit in held:
        sem.release(permit)
    # two free permits, one waiter ahead: the second waiter may take the second free permit already
    assert taken(sem.try_acquire(owner("w1", slot), 1, clock.now + LEASE_MS, ticket=second.ticket)).index == 1
    assert taken(sem.try_acquire(owner("w0", slot), 1, clock.now + LEASE_MS, ticket=first.ticket)).index == 0


def test_a_dead_waiters_ticket_stops_blocking_after_its_expiry(make_sem: Any, slot: Slot, clock: Any) -> None:
    sem = make_sem(permits=1)
    holder = taken(sem.try_acquire(owner("h", slot), 1, clock.now + 10 * LEASE_MS))
    dead = waiting(sem.try_acquire(owner("dead", slot), 1, clock.now + 10 * LEASE_MS))
    clock.advance(s=TTL_S / 2 + 1)
    alive = waiting(sem.try_acquire(owner("alive", slot), 1, clock.now + 10 * LEASE_MS))
    sem.release(holder)
    assert waiting(sem.try_acquire(owner("alive", slot), 1, clock.now + 10 * LEASE_MS, ticket=alive.ticket)).ahead == 1
    clock.advance(ms=dead.ticket.expires_at_ms - clock.now)  # the dead waiter's expiry: it never polled again
    got = taken(sem.try_acquire(owner("alive", slot), 1, clock.now + 10 * LEASE_MS, ticket=alive.ticket))
    assert got.how == "free"
    # the dead waiter, coming back, has lost its place: a new, later ticket
    back = waiting(sem.try_acquire(owner("dead", slot), 1, clock.now + 10 * LEASE_MS, ticket=dead.ticket))
    assert back.ticket.number > alive.ticket.number


def test_a_waiter_renews_its_place_when_half_its_ttl_is_spent(make_sem: Any, slot: Slot, clock: Any) -> None:
    sem = make_sem(permits=1)
    taken(sem.try_acquire(owner("h", slot), 1, clock.now + 10 * LEASE_MS))
    wait = waiting(sem.try_acquire(owner("w", slot), 1, clock.now + 10 * LEASE_MS))
    for _ in range(5):
        clock.advance(s=TTL_S / 2 + 1)
        renewed = waiting(sem.try_acquire(owner("w", slot), 1, clock.now + 10 * LEASE_MS, ticket=wait.ticket))
        assert renewed.ticket.number == wait.ticket.number and renewed.ticket.expires_at_ms > clock.now
        wait = renewed


# --- request counting and shapes --------------------------------------------------------------------------
def test_an_acquirer_that_does_not_wait_sends_two_requests(
    make_sem: Any, slot: Slot, clock: Any, request_log: Any
) -> None:
    sem = make_sem(permits=3)
    held = [taken(sem.try_acquire(owner(f"x{i}", slot), 1, clock.now + LEASE_MS)) for i in range(3)]
    wait = waiting(sem.try_acquire(owner("y", slot), 1, clock.now + LEASE_MS))  # the tickets item exists now
    sem.release(held[0])
    taken(sem.try_acquire(owner("y", slot), 1, clock.now + LEASE_MS, ticket=wait.ticket))  # and is empty again
    sem.release(held[1])
    request_log.clear()
    permit = taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS))
    assert request_log.operations == ["BatchGetItem", "UpdateItem"]
    assert permit.index == held[1].index
    batch = request_log.requests("BatchGetItem")[0]["RequestItems"]
    ((request,),) = [batch.values()]
    assert request["ConsistentRead"] is True and len(request["Keys"]) == 4  # 3 permits + the tickets item


VALUE = re.compile(r":[A-Za-z0-9_]+")
NAME_RE = re.compile(r"#[A-Za-z0-9_]+")


def test_every_request_defines_exactly_the_placeholders_it_uses(
    make_sem: Any, slot: Slot, clock: Any, request_log: Any
) -> None:
    sem = make_sem(permits=1)
    first = sem.record_query(taken(sem.try_acquire(owner("a", slot), 1, clock.now + LEASE_MS)), "q-1")
    waiting(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS))
    clock.advance(ms=LEASE_MS)
    second = taken(sem.try_acquire(owner("b", slot), 1, clock.now + LEASE_MS, query_is_terminal=lambda q: True))
    sem.renew(second, clock.now + LEASE_MS)
    sem.release(second)
    sem.release(first)
    for operation, body in request_log.calls:
        if operation not in ("UpdateItem", "PutItem"):
            continue
        text = " ".join(body.get(key, "") for key in ("UpdateExpression", "ConditionExpression"))
        assert set(VALUE.findall(text)) == set(body.get("ExpressionAttributeValues", {})), body
        assert set(NAME_RE.findall(text)) == set(body.get("ExpressionAttributeNames", {})), body
