"""Result tests that guard what is published (issue 34, :mod:`athena_refresh.assertions`), in the function: a slot
whose rows break an assertion is committed FAILED with reason ``assertion`` and the failing counts, its rows stored
under its slot for inspection, LATEST left on the last good result, and no retry."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from athena_refresh.failures import describe_failure
from athena_refresh.job_defaults import spec_of
from athena_refresh.jobspec import AssertionsSpec
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from slotlock import Slot, SlotLock

PREVIOUS_SLOT_OFFSET_S = 1800
GOOD_ROWS = [{"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25}]
BAD_ROWS = [
    {"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25},
    {"origin": "XXX", "flights": -1, "avg_dep_delay_min": None},
    {"origin": "XXX", "flights": 5, "avg_dep_delay_min": 3.0},
]


@pytest.fixture
def guarded(settings: Settings) -> Settings:
    spec = spec_of(
        job_name=settings.job_name,
        schedule_expression="cron(0/30 * * * ? *)",
        database="flights_demo",
        table="flights",
        workgroup="athena-refresh",
        sql=settings.query_sql,
        assertions=AssertionsSpec(
            rows_at_least=1,
            not_null=("avg_dep_delay_min",),
            unique=("origin",),
            accepted_values={"origin": ("EWR", "JFK", "LGA")},
            expressions=("flights >= 0",),
        ),
    )
    return dataclasses.replace(settings, spec=spec)


def test_rows_that_break_an_assertion_fail_the_slot_and_keep_the_last_good_result_published(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    guarded: Settings,
    clock: Any,
) -> None:
    # GIVEN the previous slot committed rows that pass
    previous = Slot(slot.epoch_s - PREVIOUS_SLOT_OFFSET_S)
    now, clock.now = clock.now, previous.epoch_ms + 2_000
    outcome = run(make_runner(), make_job(make_engine(rows=GOOD_ROWS), settings=guarded), "req-0", for_slot=previous)
    assert outcome.status == "succeeded"
    clock.now = now

    # WHEN this slot's query returns rows that break four assertions
    engine = make_engine(rows=BAD_ROWS)
    outcome = run(make_runner(), make_job(engine, settings=guarded), "req-1")

    # THEN the slot is FAILED (a normal return: no Lambda retry), with each assertion and its failing count
    assert outcome.status == "failed" and len(engine.starts) == 1
    error = dict(outcome.details)
    assert error["type"] == "assertion" and error["retryable"] is False and error["row_count"] == 3
    assert [(a["assertion"], a["failing"]) for a in error["assertions"]] == [
        ("not_null avg_dep_delay_min", 1),
        ("unique origin", 1),
        ("accepted_values origin", 2),
        ("expression flights >= 0", 1),
    ]
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "FAILED"
    failure = describe_failure(item["status"], item.get("reason"), item.get("error"))
    assert failure is not None and failure.error_class == "assertion" and failure.failing
    assert failure.message.startswith("4 assertion(s) failed on 3 row(s): not_null avg_dep_delay_min: 1 row(s)")
    # AND its rows are stored under the slot for inspection, marked, while LATEST stays on the last good result
    stored = store.result(guarded.job_name, slot.iso)
    assert stored is not None and stored.rows == BAD_ROWS
    assert stored.assertions_failed is not None and len(stored.assertions_failed) == 4
    latest = store.latest(guarded.job_name)
    assert latest is not None and latest.slot_iso == previous.iso and latest.assertions_failed is None

    # AND a later invocation of the same slot does not run it again (it is finished)
    again = run(make_runner(), make_job(make_engine(rows=GOOD_ROWS), settings=guarded), "req-2")
    assert again.status != "succeeded" and len(engine.starts) == 1


def test_rows_that_pass_commit_as_always(
    make_runner: Any, make_job: Any, make_engine: Any, run: Any, slot: Slot, store: ResultsStore, guarded: Settings
) -> None:
    outcome = run(make_runner(), make_job(make_engine(rows=GOOD_ROWS), settings=guarded), "req-1")
    assert outcome.status == "succeeded"
    latest = store.latest(guarded.job_name)
    assert latest is not None and latest.slot_iso == slot.iso and latest.assertions_failed is None
