"""The scripted scenario of the golden transcript: every kind of DynamoDB request slotlock sends, once or more.

Driven through slotlock's public API only (``SlotLock``, ``Semaphore``, the operator actions, ``request_generation``),
one step at a time on one table, on a fake clock that only the scenario moves (sleeps between retries move it too):
every value sent is fixed (slots, owner ids, request ids, audit texts, the semaphore's random order seeded). The
few values that are random by design (a MISSED record's ``record_id``, botocore's idempotency tokens) are labelled
by the recorder (:mod:`tests.golden.recorder`).

Each step is labelled ``area: what happens`` and asserts the outcome it scripts, so a change of behaviour shows as
a failed step, not only as a different transcript. The settings are pinned here (not taken from a conftest), so
that only slotlock's own code decides what is sent.

Timeline (slots are 30 minutes apart, S1 = 2026-11-22T00:30:00Z; lease 30 s; waiter TTL 20 s):

```
S1+2s   lock: A wins S1 (token 1); B loses (held)
S1+12s  lock: A heartbeats, records state {query: q-1}
S1+43s  lock: A froze; C takes S1 over (token 2, adopts q-1); A's heartbeat is refused; C commits with a result
S2+1s   lock: D wins S2 and releases it (given back), E takes it over and commits without writes
S2+9s   lock: a late delivery of S0 is too old (MISSED too_old, in a transaction)
S3+1s   lock: S3 recorded MISSED by hand (a holder-less record, e.g. no capacity)
S3+2s   manual: rerun of S1 requested (generation 2), acquired on the manual lease, committed
S3+3s   admin: pause; at S4+1s a racer of S4 loses (paused) and records S4 MISSED paused; resume at S4+2s
S5+1s   admin: G wins S5; release (forced) fences G out; fence bump to 100
S6+1s   lock: H wins S6 (S5, fenced out, is recorded MISSED superseded)
        semaphore (1 permit): H takes it, records its query, renews; W1 waits (registers, creates the line);
        W1 polls after 11 s (touches); H releases S6 and H2, taking it over, inherits the permit; W2 waits and abandons;
        H2 releases; W1 takes the permit (leaves the line); W3 waits 41 s later (prunes W2) and leaves
then    history: two pages of the job's MISSED records (a Query on the history index, with a filter), the second
        continuing after the first
```
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any

from slotlock import (
    Lease,
    LeaseLostError,
    Loss,
    Permit,
    PermitOwner,
    Semaphore,
    Slot,
    SlotHistory,
    SlotLock,
    Wait,
    bump_fencing_token,
    create_lock_table,
    pause,
    release,
    request_generation,
    resume,
)
from tests.golden.recorder import Recorder

TABLE = "slotlock-golden"
JOB = "golden-job"
SEMAPHORE = "123456789012-us-east-1"
LEASE_S = 30.0
HEARTBEAT_S = 10.0
MAX_SLOT_AGE_S = 1800.0
WAITER_TTL_S = 20.0
DEADLINE_MS = 900_000  # every invocation's remaining time at its start (a 15-minute Lambda)
S1 = Slot(int(dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC).timestamp()))


def slot(n: int) -> Slot:
    """Slot ``Sn`` of the timeline (S0 is one period before S1)."""
    return Slot(S1.epoch_s + (n - 1) * 1800)


@dataclass
class Clock:
    """The callers' wall clock, epoch milliseconds (``tests/integration/slotlock/conftest.py``'s ``FakeClock``)."""

    now: int

    def __call__(self) -> int:
        return self.now

    def advance(self, *, ms: int = 0, s: float = 0) -> int:
        self.now += ms + int(s * 1000)
        return self.now

    def at(self, when: Slot, *, s: float) -> None:
        """Move to ``s`` seconds after ``when`` (never backwards)."""
        target = when.epoch_s * 1000 + int(s * 1000)
        assert target >= self.now, f"the scenario's clock would go back from {self.now} to {target}"
        self.now = target

    def sleep(self, seconds: float) -> None:
        self.advance(ms=max(1, int(seconds * 1000)))


def won(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss, reason: str) -> Loss:
    assert isinstance(result, Loss) and result.reason == reason, f"expected a {reason} loss, got {result}"
    return result


def taken(result: Permit | Wait) -> Permit:
    assert isinstance(result, Permit), f"expected a permit, got {result}"
    return result


def waiting(result: Permit | Wait) -> Wait:
    assert isinstance(result, Wait), f"expected a wait, got {result}"
    return result


def run_scenario(client: Any) -> list[dict[str, Any]]:
    """Create the table, play every step on ``client`` (a DynamoDB client on a fresh moto), return the transcript.

    The table's creation is not recorded (``create_lock_table`` is setup, not the protocol).
    """
    create_lock_table(client, TABLE, enable_ttl=False)
    clock = Clock(now=S1.epoch_s * 1000 + 2_000)
    lock = SlotLock(
        TABLE,
        JOB,
        client=client,
        lease_duration_s=LEASE_S,
        heartbeat_interval_s=HEARTBEAT_S,
        max_slot_age_s=MAX_SLOT_AGE_S,
        clock_ms=clock,
        sleep_s=clock.sleep,
    )
    with Recorder(client) as recorder:
        _lock_steps(recorder, lock, clock)
        _manual_steps(recorder, lock, clock)
        _admin_steps(recorder, lock, clock)
        _semaphore_steps(recorder, lock, clock, client)
        _history_steps(recorder, client)
    return recorder.transcript()


def _deadline(clock: Clock) -> int:
    return clock.now + DEADLINE_MS


def _lock_steps(recorder: Recorder, lock: SlotLock, clock: Clock) -> None:
    s1, s2 = slot(1), slot(2)
    with recorder.labelled("lock: A wins S1"):
        a = won(lock.try_acquire(s1, "req-A", deadline_ms=_deadline(clock)))
        assert a.fencing_token == 1
    with recorder.labelled("lock: B loses S1 (held)"):
        lost(lock.try_acquire(s1, "req-B", deadline_ms=_deadline(clock)), "held")
    clock.at(s1, s=12)
    with recorder.labelled("lock: A heartbeats"):
        a = lock.heartbeat(a)
    with recorder.labelled("lock: A records state"):
        a = lock.record_state(a, {"query_execution_id": "q-1"})
    clock.at(s1, s=43)  # A froze: its lease (renewed at +12 s) expired at +42 s
    with recorder.labelled("lock: C takes S1 over after expiry"):
        c = won(lock.try_acquire(s1, "req-C", deadline_ms=_deadline(clock)))
        assert c.takeover_from == "req-A" and c.state == {"query_execution_id": "q-1"}, c
    with recorder.labelled("lock: A's heartbeat is refused"):
        try:
            lock.heartbeat(a)
        except LeaseLostError:
            pass
        else:
            raise AssertionError("A's heartbeat after the takeover went through")
    result_put = {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": f"result#{JOB}#{s1.iso}"}, "fencing_token": {"N": str(c.fencing_token)}},
            "ConditionExpression": "attribute_not_exists(#pk) OR #token < :token",
            "ExpressionAttributeNames": {"#pk": "pk", "#token": "fencing_token"},
            "ExpressionAttributeValues": {":token": {"N": str(c.fencing_token)}},
        }
    }
    with recorder.labelled("lock: C commits with an extra write"):
        receipt = lock.commit(c, writes=[result_put], summary={"rows": 3})
        assert not receipt.already_applied
    clock.at(s2, s=1)
    with recorder.labelled("lock: D wins S2"):
        d = won(lock.try_acquire(s2, "req-D", deadline_ms=_deadline(clock)))
    with recorder.labelled("lock: D releases S2 (given back)"):
        lock.release(d, given_back="capacity")
    clock.at(s2, s=2)
    with recorder.labelled("lock: E takes S2 over after the release"):
        e = won(lock.try_acquire(s2, "req-E", deadline_ms=_deadline(clock)))
        assert e.takeover_from == "req-D", e
    with recorder.labelled("lock: E commits without extra writes"):
        lock.commit(e, summary={"rows": 0})
    clock.at(s2, s=9)
    with recorder.labelled("lock: late delivery of S0 is too old (missed)"):
        lost(lock.try_acquire(slot(0), "req-late", deadline_ms=_deadline(clock)), "too_old")
    clock.at(slot(3), s=1)
    with recorder.labelled("lock: S3 recorded missed by hand"):
        assert lock.record_missed(slot(3), "capacity", detail={"waited_s": 900})


def _manual_steps(recorder: Recorder, lock: SlotLock, clock: Clock) -> None:
    s1 = slot(1)
    clock.at(slot(3), s=2)
    with recorder.labelled("manual: rerun of S1 requested"):
        requested = request_generation(
            lock.context, s1, run_id="run-1", kind="rerun", requested_by="ops@example.com", reason="golden rerun"
        )
        assert requested.generation == 2 and requested.created, requested
    manual = lock.for_generation(2)
    with recorder.labelled("manual: M acquires S1 generation 2"):
        m = won(manual.try_acquire(s1, "req-M", deadline_ms=_deadline(clock)))
    with recorder.labelled("manual: M commits generation 2"):
        manual.commit(m, summary={"rows": 4})


def _admin_steps(recorder: Recorder, lock: SlotLock, clock: Clock) -> None:
    clock.at(slot(3), s=3)
    with recorder.labelled("admin: pause"):
        assert pause(lock, reason="golden maintenance", requested_by="ops@example.com").changed
    clock.at(slot(4), s=1)
    with recorder.labelled("admin: a racer of S4 loses (paused) and records it missed"):
        lost(lock.try_acquire(slot(4), "req-P", deadline_ms=_deadline(clock)), "paused")
    clock.at(slot(4), s=2)
    with recorder.labelled("admin: resume"):
        assert resume(lock, requested_by="ops@example.com").changed
    clock.at(slot(5), s=1)
    with recorder.labelled("admin: G wins S5"):
        won(lock.try_acquire(slot(5), "req-G", deadline_ms=_deadline(clock)))
    with recorder.labelled("admin: forced release of G's lease"):
        assert release(lock, reason="golden stuck run", requested_by="ops@example.com", force=True).changed
    with recorder.labelled("admin: fence bump to 100"):
        assert bump_fencing_token(lock, 100).bumped


def _semaphore_steps(recorder: Recorder, lock: SlotLock, clock: Clock, client: Any) -> None:
    s6 = slot(6)
    sem = Semaphore(
        TABLE,
        SEMAPHORE,
        1,
        client=client,
        clock_ms=clock,
        sleep_s=clock.sleep,
        waiter_ttl_s=WAITER_TTL_S,
        rng=random.Random(0),
        deployment=TABLE,
    )
    clock.at(s6, s=1)
    with recorder.labelled("lock: H wins S6; S5 (released, never finished) recorded missed as superseded"):
        h = won(lock.try_acquire(s6, "req-H", deadline_ms=_deadline(clock)))
        assert h.superseded_slot == slot(5) and h.superseded_recorded, h
    with recorder.labelled("semaphore: H takes the permit"):
        permit = taken(sem.try_acquire_for(h))
        assert permit.how == "free", permit
    with recorder.labelled("semaphore: H records its query"):
        permit = sem.record_query(permit, "q-6", expires_at_ms=sem.query_expiry_ms(h, lock.lease_duration_ms))
    with recorder.labelled("semaphore: H renews"):
        permit = sem.renew(permit, permit.expires_at_ms + 10_000)

    def waiter(name: str) -> PermitOwner:
        return PermitOwner(name, s6, deployment=TABLE)

    with recorder.labelled("tickets: W1 waits (registers)"):
        w1 = waiting(sem.try_acquire(waiter("waiter-1"), 1, clock.now + 30_000))
    clock.advance(s=11)
    with recorder.labelled("tickets: W1 polls (touches)"):
        w1 = waiting(sem.try_acquire(waiter("waiter-1"), 1, clock.now + 30_000, ticket=w1.ticket))
    with recorder.labelled("lock: H releases S6"):
        lock.release(h)
    with recorder.labelled("lock: H2 takes S6 over"):
        h2 = won(lock.try_acquire(s6, "req-H2", deadline_ms=_deadline(clock)))
    with recorder.labelled("semaphore: H2 inherits the permit"):
        inherited = sem.adopt_for(h2)
        assert inherited is not None and inherited.how == "inherited", inherited
    with recorder.labelled("tickets: W2 waits (registers) and abandons"):
        waiting(sem.try_acquire(waiter("waiter-2"), 1, clock.now + 30_000))
    with recorder.labelled("semaphore: H2 releases"):
        assert sem.release(inherited).outcome == "released"
    with recorder.labelled("tickets: W1 takes the permit (leaves the line)"):  # held long: W3 must wait
        taken(sem.try_acquire(waiter("waiter-1"), 1, clock.now + 300_000, ticket=w1.ticket))
    clock.advance(s=41)  # W2's entry expired more than a TTL ago
    with recorder.labelled("tickets: W3 waits (registers, prunes W2)"):
        w3 = waiting(sem.try_acquire(waiter("waiter-3"), 1, clock.now + 30_000))
    with recorder.labelled("tickets: W3 leaves"):
        sem.leave(w3.ticket)


def _history_steps(recorder: Recorder, client: Any) -> None:
    history = SlotHistory(TABLE, client=client)
    with recorder.labelled("history: first page of MISSED records, S1..S6"):
        first = history.page(JOB, since=slot(1), until=slot(6), status="MISSED", limit=3)
        assert first.next_key is not None, first
    with recorder.labelled("history: next page"):
        second = history.page(JOB, since=slot(1), until=slot(6), status="MISSED", limit=3, start_key=first.next_key)
    missed = [record.slot for record in [*first.records, *second.records]]
    assert missed == [slot(5), slot(4), slot(3)], missed
