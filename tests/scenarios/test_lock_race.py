"""The real ``slotlock.SlotLock`` under a real race: spawned processes against the serialized moto server.

Every round is a new schedule slot. All racer processes are released together by a
``multiprocessing.Barrier``; each calls ``try_acquire(slot, owner_id=f"p{i}-r{round}")`` and the one
that wins commits at once. moto is made atomic by ``local.emulators.atomic_moto`` (stock moto lets several racers
win: see ../shared/notes/platform-facts.md), so this proves the lock's conditions, not moto's.

Every wait is bounded: barrier waits, queue reads, joins.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import traceback
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config

from local.emulators.processes import gather
from slotlock import Slot, SlotLock, create_lock_table

pytestmark = pytest.mark.slow

RACERS = 8
ROUNDS = 100
JOB = "race-job"
REGION = "us-east-1"
FIRST_SLOT_EPOCH_S = Slot.parse("2026-11-22T00:00:00Z").epoch_s  # round r races for FIRST + r minutes
BARRIER_TIMEOUT_S = 60.0  # the first wait also covers the spawn start-up of every racer (imports boto3)
RACE_TIMEOUT_S = 150.0


# ---------------------------------------------------------------------------------------------------
# module-level helpers: spawned processes import them from here
# ---------------------------------------------------------------------------------------------------


def make_client(endpoint_url: str) -> Any:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", aws_session_token="testing", region_name=REGION
    )
    config = Config(retries={"mode": "standard"}, connect_timeout=2, read_timeout=10, max_pool_connections=2)
    return session.client("dynamodb", endpoint_url=endpoint_url, config=config)


def slot_of(round_no: int) -> Slot:
    return Slot(FIRST_SLOT_EPOCH_S + 60 * round_no)


def racer(endpoint_url: str, table: str, index: int, rounds: int, barrier: Any, results: Any) -> None:
    """One racer process: one SlotLock (client and connection reused), one acquisition attempt per round.

    Reports ``(index, [(round, fencing_token or None, loss reason or None), ...], error)``.
    """
    outcomes: list[tuple[int, int | None, str | None]] = []
    try:
        lock = SlotLock(table, JOB, client=make_client(endpoint_url), lease_duration_s=60)
        lock.get_lock()  # open the connection before the first round, outside the race
        for round_no in range(rounds):
            slot = slot_of(round_no)
            barrier.wait(BARRIER_TIMEOUT_S)
            result = lock.try_acquire(slot, owner_id=f"p{index}-r{round_no}")
            if result.acquired:
                lock.commit(result, summary={"round": round_no})
                outcomes.append((round_no, result.fencing_token, None))
            else:
                outcomes.append((round_no, None, result.reason))
        results.put((index, outcomes, None))
    except BaseException:  # noqa: BLE001 - report instead of dying silently; free the others from the barrier
        barrier.abort()
        results.put((index, outcomes, traceback.format_exc()))


def run_race(endpoint_url: str, table: str) -> dict[int, list[tuple[int, int | None, str | None]]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=racer, args=(endpoint_url, table, i, ROUNDS, barrier, results), name=f"racer-{i}")
        for i in range(RACERS)
    ]
    reports: dict[int, list[tuple[int, int | None, str | None]]] = {}
    errors: list[str] = []
    for index, outcomes, error in gather(procs, results, RACE_TIMEOUT_S):
        reports[index] = outcomes
        if error:
            errors.append(f"p{index}: {error}")
    assert not errors, "\n".join(errors)
    assert [p.exitcode for p in procs] == [0] * RACERS
    return reports


# ---------------------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------------------


def test_one_winner_per_slot_and_strictly_increasing_tokens_across_processes(atomic_moto_endpoint: str) -> None:
    # GIVEN a fresh lock table on the serialized moto server
    client = make_client(atomic_moto_endpoint)
    table = f"race-locks-{uuid.uuid4().hex[:12]}"
    create_lock_table(client, table, enable_ttl=False)

    # WHEN 8 spawned processes race for 100 consecutive slots, released together each round
    reports = run_race(atomic_moto_endpoint, table)  # about 18 s on a 2-core machine; bounded by RACE_TIMEOUT_S

    # THEN every racer took part in every round
    assert sorted(reports) == list(range(RACERS))
    assert all([r for r, _, _ in outcomes] == list(range(ROUNDS)) for outcomes in reports.values())

    # AND each round has exactly one winner; every loser lost to it (held) or to its commit (slot finished)
    winners: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    reasons: collections.Counter[str] = collections.Counter()
    for index, outcomes in reports.items():
        for round_no, token, reason in outcomes:
            if token is not None:
                winners[round_no].append((index, token))
            else:
                reasons[reason or "?"] += 1
    bad_rounds = {r: winners.get(r, []) for r in range(ROUNDS) if len(winners.get(r, [])) != 1}
    assert bad_rounds == {}, f"rounds without exactly one winner: {bad_rounds}"
    assert set(reasons) <= {"held", "slot_finished"}, reasons
    assert sum(reasons.values()) == ROUNDS * (RACERS - 1)

    # AND the winners' fencing tokens strictly increase round over round (losers never consume one)
    tokens = [winners[r][0][1] for r in range(ROUNDS)]
    assert all(earlier < later for earlier, later in itertools.pairwise(tokens)), tokens
    assert tokens == list(range(1, ROUNDS + 1))

    # AND the table agrees: every slot succeeded under its winner's owner id and token
    lock = SlotLock(table, JOB, client=client)
    for round_no in range(ROUNDS):
        index, token = winners[round_no][0]
        item = lock.get_slot(slot_of(round_no))
        assert item is not None
        assert (item["status"], item["owner_id"]) == ("SUCCEEDED", f"p{index}-r{round_no}")
        assert item["fencing_token"] == token
        assert item["summary"] == {"round": round_no}
    record = lock.get_lock()
    assert (record.fencing_token, record.owner_id, record.last_finished_slot) == (ROUNDS, None, slot_of(ROUNDS - 1))
