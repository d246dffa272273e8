"""The capacity semaphore's invariant in the situations found from outside (issue 31), on moto and DynamoDB Local.

Never more than N permitted queries active at once: two deployments sharing one semaphore with a job of the same
name, a start whose answer (or whose record) was lost, live slots behind manual waiters, dead places in line, long
queries (no renewal per heartbeat, bounded Athena questions), and a takeover's inheritance in a write of its own.
Driven one request at a time with the fake clock, with slotlock's defaults (the start window on).
"""

from __future__ import annotations

from typing import Any

import pytest

from slotlock import (
    Permit,
    PermitOwner,
    Semaphore,
    Slot,
    SlotLock,
    SlotRunner,
    StalePermitTokenError,
    Wait,
)
from slotlock.semaphore import DEFAULT_MAX_QUERY_ACTIVE_S

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

NAME = "123456789012-us-east-1"  # conftest.SEMAPHORE_NAME
LEASE_MS = 30_000
STAGING, PRODUCTION = "staging-locks", "production-locks"


def taken(result: Permit | Wait) -> Permit:
    assert isinstance(result, Permit), f"expected a permit, got {result}"
    return result


def waiting(result: Permit | Wait) -> Wait:
    assert isinstance(result, Wait), f"expected a wait, got {result}"
    return result


def owners(sem: Semaphore) -> list[str | None]:
    permits, _ = sem.read()
    return [permit.owner for permit in permits]


# --- finding 1: two deployments, one budget, a job of the same name ----------------------------------------
@pytest.mark.parametrize("their_token", [4, 5, 6], ids=["lower", "equal", "higher"])
def test_another_deployments_permit_for_the_same_job_and_slot_is_never_ours(
    make_semaphore: Any, slot: Slot, clock: Any, their_token: int
) -> None:
    # GIVEN staging and production share one budget of 1, each with its own lock table (its own tokens)
    staging, production = make_semaphore(deployment=STAGING), make_semaphore(deployment=PRODUCTION)
    held = taken(staging.try_acquire(PermitOwner("daily-kpis", slot, deployment=STAGING), 5, clock.now + LEASE_MS))
    # WHEN production's daily-kpis, same slot, asks with a lower, equal or higher token
    got = production.try_acquire(
        PermitOwner("daily-kpis", slot, deployment=PRODUCTION), their_token, clock.now + LEASE_MS
    )
    # THEN it waits: neither "held" nor inherited nor a StalePermitTokenError; staging keeps its permit
    assert waiting(got).free == 0
    assert owners(staging) == [held.owner.id] == [f"daily-kpis#{slot.iso}#g1#d{STAGING}"]


def test_the_deployment_is_keyword_only_and_absent_keeps_the_1_0_owner_id(slot: Slot) -> None:
    assert PermitOwner("a", slot).id == f"a#{slot.iso}#g1"
    assert PermitOwner("a", slot, 2, deployment="prod-locks").id == f"a#{slot.iso}#g2#dprod-locks"
    with pytest.raises(TypeError):
        PermitOwner("a", slot, 1, "prod-locks")  # type: ignore[misc]
    assert PermitOwner.from_id(PermitOwner("a", slot, 3, deployment="p").id) == PermitOwner(
        "a", slot, 3, deployment="p"
    )
    assert PermitOwner.from_id("someone-elses-owner") is None


def test_during_a_deploy_old_and_new_format_owners_of_one_slot_never_inherit_each_others_permit(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN the old code (owner ids without deployment) holds the slot's permit with token 7
    old, new = make_semaphore(permits=2), make_semaphore(permits=2, deployment=PRODUCTION)
    old_permit = taken(old.try_acquire(PermitOwner("daily-kpis", slot), 7, clock.now + LEASE_MS))
    # WHEN the new code takes the same slot over (token 8)
    new_permit = taken(new.try_acquire(PermitOwner("daily-kpis", slot, deployment=PRODUCTION), 8, clock.now + LEASE_MS))
    # THEN it takes a second permit (over-counting: safe), never the old one's
    assert new_permit.how == "free" and new_permit.index != old_permit.index
    assert sorted(filter(None, owners(old))) == sorted([old_permit.owner.id, new_permit.owner.id])
    # AND the other way round (a rollback): the old format never inherits the new one's either
    assert old.release(old_permit).outcome == "released"
    again = taken(old.try_acquire(PermitOwner("daily-kpis", slot), 9, clock.now + LEASE_MS))
    assert again.how == "free" and again.index != new_permit.index
    # AND with one permit, the second format waits instead of over-admitting
    single_old, single_new = make_semaphore(permits=1), make_semaphore(permits=1, deployment=STAGING)
    assert single_old.release(again).outcome == "released" and new.release(new_permit).outcome == "released"
    taken(single_old.try_acquire(PermitOwner("daily-kpis", slot), 10, clock.now + LEASE_MS))
    waiting(single_new.try_acquire(PermitOwner("daily-kpis", slot, deployment=STAGING), 11, clock.now + LEASE_MS))


def test_a_stale_permit_token_ends_the_slot_run_as_stale_not_as_a_lambda_error(
    make_semaphore: Any, make_lock: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN a newer holder of our own slot (a takeover, token 99) holds the slot's permit
    lock: SlotLock = make_lock()
    sem = make_semaphore(deployment=STAGING)
    newer = PermitOwner(lock.job_name, slot, deployment=STAGING)
    taken(sem.try_acquire(newer, 99, clock.now + LEASE_MS))

    # WHEN our run (token 1) asks for a permit
    def job(run: Any) -> None:
        sem.try_acquire_for(run.lease)

    outcome = SlotRunner(lock).run(job, slot=slot, owner_id="req-1", deadline_ms=clock.now + 300_000)
    # THEN the run ends stale (nothing more written), never an exception for Lambda to retry
    assert (outcome.status, outcome.reason) == ("stale_rejected", "permit_fencing_token_superseded")
    assert outcome.details["holder_fencing_token"] == 99


# --- finding 2: a start that may have happened is counted until it surely ended -------------------------
def test_a_permit_naming_no_query_stays_counted_for_the_start_window_past_its_expiry(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN a holder took a permit, sent StartQueryExecution, and lost the answer (nothing recorded), then died
    sem = make_semaphore()
    lost = taken(sem.try_acquire(PermitOwner("a", slot), 1, clock.now + LEASE_MS))
    window_ms = int(DEFAULT_MAX_QUERY_ACTIVE_S * 1000)
    # WHEN its expiry passed, and until Athena's DML timeout more
    clock.advance(ms=LEASE_MS)
    waiting(sem.try_acquire(PermitOwner("b", slot), 1, clock.now + LEASE_MS))
    clock.advance(ms=window_ms - 1)
    # THEN nobody reclaims it: the query may still be active
    waiting(sem.try_acquire(PermitOwner("b", slot), 1, clock.now + LEASE_MS))
    # AND once the window is over it is reclaimed (the leak is bounded by expiry + max_query_active_s)
    clock.advance(ms=1)
    got = taken(sem.try_acquire(PermitOwner("b", slot), 1, clock.now + LEASE_MS))
    assert got.how == "reclaimed" and got.replaced_owner == lost.owner.id


def test_the_start_window_is_the_takers_own_and_a_release_clears_it(
    make_semaphore: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN a taker whose queries may stay active 10 minutes, and a reclaimer configured for 1 minute
    long_queries, short = make_semaphore(max_query_active_s=600), make_semaphore(max_query_active_s=60)
    permit = taken(long_queries.try_acquire(PermitOwner("a", slot), 1, clock.now + LEASE_MS))
    assert get_item(permit.key)["permit_start_may_follow_ms"]["N"] == "600000"
    clock.advance(ms=LEASE_MS + 60_000)
    # THEN the permit's own window binds the reclaimer
    waiting(short.try_acquire(PermitOwner("b", slot), 1, clock.now + LEASE_MS))
    # AND a released permit carries no window
    assert long_queries.release(permit).outcome == "released"
    assert "permit_start_may_follow_ms" not in get_item(permit.key)


def test_a_retry_of_the_slot_inherits_the_marked_permit_and_records_the_query(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN the start's answer was lost and the invocation failed (lease released, permit kept, no query recorded)
    sem = make_semaphore()
    owner = PermitOwner("a", slot)
    first = taken(sem.try_acquire(owner, 1, clock.now + LEASE_MS))
    clock.advance(ms=LEASE_MS + 5_000)
    # WHEN Lambda's retry of the slot (token 2) comes back: same owner
    retry = taken(sem.try_acquire(owner, 2, clock.now + LEASE_MS))
    # THEN it inherits the same permit (its StartQueryExecution reuses the ClientRequestToken: the same query)
    assert (retry.how, retry.index) == ("inherited", first.index)
    recorded = sem.record_query(retry, "q-1", expires_at_ms=clock.now + 10 * LEASE_MS)
    assert recorded.query_execution_id == "q-1"


# --- finding 4: live slots never wait behind manual runs --------------------------------------------------
def test_a_live_slot_takes_the_permit_a_waiting_backfill_may_not(make_semaphore: Any, slot: Slot, clock: Any) -> None:
    # GIVEN N = 2, manual headroom 1, one permit busy, a backfill waiting in line
    sem = make_semaphore(permits=2)
    taken(sem.try_acquire(PermitOwner("busy", slot), 1, clock.now + 10 * LEASE_MS))
    backfill = waiting(sem.try_acquire(PermitOwner("job", slot, 5), 1, clock.now + LEASE_MS, headroom=1))
    assert backfill.ticket.waiter_id.endswith("#h1")
    # WHEN a live slot arrives
    got = taken(sem.try_acquire(PermitOwner("live", slot), 1, clock.now + LEASE_MS))
    # THEN it takes the free permit at once (the backfill may not take it: one must stay free)
    assert got.how == "free"


def test_as_many_manual_waiters_as_permits_never_starve_live_slots(make_semaphore: Any, slot: Slot, clock: Any) -> None:
    sem = make_semaphore(permits=2)
    holder = taken(sem.try_acquire(PermitOwner("busy", slot), 1, clock.now + 10 * LEASE_MS))
    manual = [
        waiting(sem.try_acquire(PermitOwner(f"m{i}", slot, 2), 1, clock.now + LEASE_MS, headroom=1)) for i in range(3)
    ]
    live_waiter = taken(sem.try_acquire(PermitOwner("live-1", slot), 1, clock.now + LEASE_MS))
    assert live_waiter.how == "free"
    later = waiting(sem.try_acquire(PermitOwner("live-2", slot), 1, clock.now + LEASE_MS))
    assert later.ahead == 0  # no live waiter before it; manual waiters never go first
    sem.release(holder)
    # the freed permit goes to the live waiter, although three manual tickets are older
    waiting(sem.try_acquire(PermitOwner("m0", slot, 2), 1, clock.now + LEASE_MS, ticket=manual[0].ticket, headroom=1))
    assert (
        taken(sem.try_acquire(PermitOwner("live-2", slot), 1, clock.now + LEASE_MS, ticket=later.ticket)).how == "free"
    )


def test_manual_waiters_go_in_ticket_order_once_live_ones_are_served(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    sem = make_semaphore(permits=3)
    held = [taken(sem.try_acquire(PermitOwner(f"h{i}", slot), 1, clock.now + 10 * LEASE_MS)) for i in range(3)]
    first = waiting(sem.try_acquire(PermitOwner("m0", slot, 2), 1, clock.now + LEASE_MS, headroom=1))
    second = waiting(sem.try_acquire(PermitOwner("m1", slot, 2), 1, clock.now + LEASE_MS, headroom=1))
    assert second.ahead == 1
    for permit in held[:2]:
        sem.release(permit)  # 2 free: one for a manual run, one kept free (headroom 1)
    waiting(sem.try_acquire(PermitOwner("m1", slot, 2), 1, clock.now + LEASE_MS, ticket=second.ticket, headroom=1))
    assert taken(sem.try_acquire(PermitOwner("m0", slot, 2), 1, clock.now + LEASE_MS, ticket=first.ticket, headroom=1))


# --- finding 5: dead places leave the line at once ---------------------------------------------------------
def test_a_takeover_that_gets_the_permit_removes_its_killed_predecessors_place(
    make_semaphore: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN N = 1: a holder, and slot S's winner waiting in line, killed while waiting
    sem = make_semaphore()
    holder = taken(sem.try_acquire(PermitOwner("busy", slot), 1, clock.now + 10 * LEASE_MS))
    killed = waiting(sem.try_acquire(PermitOwner("job", slot), 1, clock.now + LEASE_MS))
    sem.release(holder)
    # WHEN its takeover (same owner, token 2, no ticket of its own) takes the permit
    takeover = taken(sem.try_acquire(PermitOwner("job", slot), 2, clock.now + LEASE_MS))
    # THEN the dead place is gone at once
    assert killed.ticket.waiter_id not in get_item(f"tickets#{NAME}")["waiter_tickets"]["M"]
    # AND once the takeover's slot is done, the next job takes the permit at once (not after the dead place's TTL)
    other = waiting(sem.try_acquire(PermitOwner("other", slot), 1, clock.now + LEASE_MS))
    assert other.ahead == 0
    sem.release(takeover)
    assert (
        taken(sem.try_acquire(PermitOwner("other", slot), 1, clock.now + LEASE_MS, ticket=other.ticket)).how == "free"
    )


def test_a_place_whose_owner_holds_a_permit_blocks_nobody(
    make_semaphore: Any, slot: Slot, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN N = 2: an owner that waited, then got a permit, and whose leave write failed (its place stayed)
    sem = make_semaphore(permits=2)
    busy = taken(sem.try_acquire(PermitOwner("busy", slot), 1, clock.now + 10 * LEASE_MS))
    taken(sem.try_acquire(PermitOwner("fill", slot), 1, clock.now + 10 * LEASE_MS))
    place = waiting(sem.try_acquire(PermitOwner("job", slot), 1, clock.now + LEASE_MS))
    sem.release(busy)
    monkeypatch.setattr(sem.tickets, "leave", lambda *args: None)  # the leave write is lost
    taken(sem.try_acquire(PermitOwner("job", slot), 1, clock.now + LEASE_MS, ticket=place.ticket))
    monkeypatch.undo()
    _, waiters = sem.read()
    assert place.ticket.waiter_id in waiters.live(clock.now)
    # WHEN another job looks, THEN the place (whose owner holds a permit) is not ahead of it
    assert waiting(sem.try_acquire(PermitOwner("next", slot), 1, clock.now + LEASE_MS)).ahead == 0


def test_a_newer_live_slot_of_the_same_job_skips_the_older_slots_dead_place(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN N = 1: slot S's winner of job J was killed while waiting; the holder then released
    sem = make_semaphore(deployment=PRODUCTION)
    holder = taken(sem.try_acquire(PermitOwner("busy", slot, deployment=PRODUCTION), 1, clock.now + 10 * LEASE_MS))
    waiting(sem.try_acquire(PermitOwner("J", slot, deployment=PRODUCTION), 1, clock.now + 10 * LEASE_MS))
    sem.release(holder)
    # WHEN J's next slot S+1 arrives (S can never run again: the lock's slots only move forward)
    following = Slot(slot.epoch_s + 1800)
    got = sem.try_acquire(PermitOwner("J", following, deployment=PRODUCTION), 2, clock.now + LEASE_MS)
    # THEN it takes the free permit at once, and removes the finished slot's place
    assert taken(got).how == "free"
    _, waiters = sem.read()
    assert waiters.tickets == {}
    # AND another job no longer counts that place
    assert waiting(sem.try_acquire(PermitOwner("K", slot, deployment=PRODUCTION), 1, clock.now + LEASE_MS)).ahead == 0


def test_a_newer_live_slot_that_must_wait_clears_its_jobs_finished_places(
    make_semaphore: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN N = 1 held for long; job J's slot S waited in line and died; another job K waits behind it
    sem = make_semaphore(deployment=PRODUCTION)
    taken(sem.try_acquire(PermitOwner("busy", slot, deployment=PRODUCTION), 1, clock.now + 10 * LEASE_MS))
    dead = waiting(sem.try_acquire(PermitOwner("J", slot, deployment=PRODUCTION), 1, clock.now + 10 * LEASE_MS))
    k = waiting(sem.try_acquire(PermitOwner("K", slot, deployment=PRODUCTION), 1, clock.now + 10 * LEASE_MS))
    assert k.ahead == 1
    # WHEN J's slot S+1 arrives and must wait too
    following = Slot(slot.epoch_s + 1800)
    later = waiting(sem.try_acquire(PermitOwner("J", following, deployment=PRODUCTION), 2, clock.now + LEASE_MS))
    # THEN S's place is gone at once: K is first in line, J's S+1 behind it
    tickets = get_item(f"tickets#{NAME}")["waiter_tickets"]["M"]
    assert dead.ticket.waiter_id not in tickets and later.ahead == 1
    assert (
        waiting(
            sem.try_acquire(PermitOwner("K", slot, deployment=PRODUCTION), 1, clock.now + LEASE_MS, ticket=k.ticket)
        ).ahead
        == 0
    )


# --- finding 6: long queries add no request per heartbeat; waiters ask Athena little ------------------------
def test_a_recorded_permit_covers_the_invocation_and_is_not_renewed(
    make_semaphore: Any, make_lock: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN a winner with 300 s left in its invocation records its query on the permit
    lock: SlotLock = make_lock()
    sem = make_semaphore()
    lease = lock.acquire(slot, "req-1", deadline_ms=clock.now + 300_000)
    permit = taken(sem.try_acquire_for(lease))
    expiry = sem.query_expiry_ms(lease, lock.lease_duration_ms)
    assert expiry == lease.deadline_ms + lock.lease_duration_ms
    lock.record_state(
        lease, {"query_execution_id": "q-1"}, writes=[sem.record_query_item(permit, "q-1", expires_at_ms=expiry)]
    )
    # THEN the permit's expiry is the deadline plus the takeover window, whatever the query's length
    assert get_item(permit.key)["permit_expires_at_ms"]["N"] == str(expiry)
    # AND while the holder lives (before its deadline), no waiter asks Athena about its query
    asked: list[str] = []
    clock.advance(ms=250_000)
    waiting(
        sem.try_acquire(
            PermitOwner("b", slot), 1, clock.now + LEASE_MS, query_is_terminal=lambda q: asked.append(q) or True
        )
    )
    assert asked == []


def test_a_waiter_asks_athena_about_at_most_one_query_per_poll_and_each_once_per_recheck(
    make_semaphore: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN N = 3 permits naming running queries whose holders died (expiries passed)
    sem = make_semaphore(permits=3, query_recheck_s=30)
    for i in range(3):
        sem.record_query(taken(sem.try_acquire(PermitOwner(f"h{i}", slot), 1, clock.now + LEASE_MS)), f"q-{i}")
    clock.advance(ms=LEASE_MS)
    asked: list[str] = []

    def running(query: str) -> bool:
        asked.append(query)
        return False

    # WHEN a waiter polls 10 times within 30 s
    wait = waiting(sem.try_acquire(PermitOwner("w", slot), 1, clock.now + LEASE_MS, query_is_terminal=running))
    polls = 1
    for _ in range(9):
        clock.advance(ms=1_000)
        wait = waiting(
            sem.try_acquire(
                PermitOwner("w", slot), 1, clock.now + LEASE_MS, ticket=wait.ticket, query_is_terminal=running
            )
        )
        polls += 1
    # THEN each query was asked about once, and never two in one poll
    assert sorted(asked) == ["q-0", "q-1", "q-2"] and len(asked) <= polls
    # AND after the recheck interval each is asked again, one per poll
    clock.advance(ms=30_000)
    waiting(
        sem.try_acquire(PermitOwner("w", slot), 1, clock.now + LEASE_MS, ticket=wait.ticket, query_is_terminal=running)
    )
    assert len(asked) == 4


# --- finding 8: a takeover inherits the permit in a write of its own --------------------------------------
def stalled_holder_and_takeover(
    make_semaphore: Any, make_lock: Any, slot: Slot, clock: Any, *, query: str | None
) -> Any:
    """W (token 1) holds the slot's only permit (naming ``query`` if given) and stalls past its lease; W2 takes
    the lease over (write 1). Returns (semaphore, W's permit, W's lease, W2's lease)."""
    lock: SlotLock = make_lock()
    sem = make_semaphore(permits=1)
    lease_w = lock.acquire(slot, "req-w", deadline_ms=clock.now + 300_000)
    permit_w = taken(sem.try_acquire_for(lease_w))
    if query is not None:
        lock.record_state(lease_w, {"query_execution_id": query}, writes=[sem.record_query_item(permit_w, query)])
        permit_w = sem.recorded(permit_w, query)
    clock.advance(ms=int(lock.lease_duration_ms) + 1)
    lease_w2 = lock.acquire(slot, "req-w2", deadline_ms=clock.now + 300_000)
    assert lease_w2.fencing_token > lease_w.fencing_token
    return sem, permit_w, lease_w, lease_w2


def test_between_a_takeovers_lease_and_its_inheritance_no_write_over_admits(
    make_semaphore: Any, make_lock: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN W (token 1) holds the slot's permit, naming its running query q; W stalls past its lease
    # WHEN W2 takes the lease over (token 2: write 1) ...
    sem, permit_w, _lease_w, lease_w2 = stalled_holder_and_takeover(make_semaphore, make_lock, slot, clock, query="q")
    assert lease_w2.state["query_execution_id"] == "q"
    # ... and before W2's inheritance (write 2): a reclaimer cannot take the permit of a running query
    waiting(sem.try_acquire(PermitOwner("other", slot), 1, clock.now + LEASE_MS, query_is_terminal=lambda q: False))
    # ... and W (stale) renews its permit: accepted (token 1 still on the permit), harmless: it only moves the expiry
    sem.renew(permit_w, clock.now + LEASE_MS)
    # THEN W2 inherits it all the same (the condition is on owner and token, not on the expiry)
    inherited = sem.adopt_for(lease_w2)
    assert inherited is not None and inherited.how == "inherited" and inherited.query_execution_id == "q"
    # AND from then on every write of W is refused as stale
    with pytest.raises(StalePermitTokenError):
        sem.renew(permit_w, clock.now + LEASE_MS)
    with pytest.raises(StalePermitTokenError):
        sem.release(permit_w)


def test_a_stale_holder_releasing_before_the_inheritance_leaves_the_takeover_without_a_permit_never_two(
    make_semaphore: Any, make_lock: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN W gave its permit back (e.g. a deferral) while stalled; W2 took the lease over meanwhile
    sem, permit_w, _lease_w, lease_w2 = stalled_holder_and_takeover(make_semaphore, make_lock, slot, clock, query=None)
    assert sem.release(permit_w).outcome == "released"
    # WHEN W2 inherits: nothing to inherit; it takes a permit like any first start (one query, one permit)
    assert sem.adopt_for(lease_w2) is None
    again = taken(sem.try_acquire_for(lease_w2))
    assert again.how == "free" and owners(sem) == [again.owner.id]
