"""A failed or missed slot's reason reaches every reader (issue 34): the API's history entries, the overview's row
and a job's widget, with the error objects the runtime really records (:meth:`QueryFailedError.as_dict`, a
capacity miss's detail), not hand-made shapes.

Before, the overview and the results CLI read ``error.type``/``error.message``, which a failed query's record does
not have: ``FAILED | -`` for a slot whose record says ``COLUMN_NOT_FOUND: ... "dst" not found``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.catalog import CatalogQuery
from athena_refresh.engine import Column, QueryResult
from athena_refresh.errors import QueryFailedError
from athena_refresh.results import ResultsStore
from results_api import overview
from results_api.reader import ResultsReader
from results_api.widget import render_widget
from slotlock import Lease, Slot, SlotLock
from tests.integration.results_api.history import HALF_HOURLY, WINDOW, FakeClock
from tests.integration.results_api.test_widget import parse
from tests.unit.results_api.conftest import STATISTICS

FAILING, NEVER_OK = "reasons-failing", "reasons-never-ok"
S0, S1, S2 = (Slot.parse(f"2026-11-22T{hm}:00Z") for hm in ("00:00", "00:30", "01:00"))
MESSAGE = "line 3:8: Column 'dst' cannot be resolved or requester is not authorized to access requested resources"
QUERY_FAILED = QueryFailedError(
    "qe-failed",
    "FAILED",
    reason=f"COLUMN_NOT_FOUND: {MESSAGE}",
    error_category=2,
    error_type=1006,
    error_message=f"COLUMN_NOT_FOUND: {MESSAGE}",
).as_dict()


@pytest.fixture
def failing(
    make_lock: Callable[[str], SlotLock],
    make_store: Callable[..., ResultsStore],
    catalog: dict[str, CatalogQuery],
    clock: FakeClock,
) -> None:
    """``reasons-failing``: S0 SUCCEEDED, then S1 FAILED with a real query failure; ``reasons-never-ok``: S0
    FAILED, no result ever."""
    for job in (FAILING, NEVER_OK):
        catalog[job] = CatalogQuery("SELECT dst FROM flights", (), schedule=HALF_HOURLY)
    clock.now = S0.epoch_ms + 2_000
    lock, store = make_lock(FAILING), make_store()
    lease = lock.try_acquire(S0, "racer-0")
    assert isinstance(lease, Lease)
    prepared = store.prepare(
        job_name=FAILING,
        slot_iso=S0.iso,
        fencing_token=lease.fencing_token,
        query_execution_id="qe-ok",
        statistics=STATISTICS,
        result=QueryResult(columns=(Column("origin", "varchar"),), rows=[{"origin": "JFK"}]),
        committed_at_ms=clock.now,
        window=WINDOW,
    )
    lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
    never = make_lock(NEVER_OK)
    lease = never.try_acquire(S0, "racer-1")
    assert isinstance(lease, Lease)
    never.commit(lease, outcome="failed", error=QUERY_FAILED)
    clock.now = S1.epoch_ms + 2_000
    lease = lock.try_acquire(S1, "racer-2")
    assert isinstance(lease, Lease)
    lock.commit(lease, outcome="failed", error=QUERY_FAILED)
    clock.now += 5_000


def test_the_api_history_names_the_error_class_and_keeps_the_whole_message(
    failing: None, reader: ResultsReader
) -> None:
    # GIVEN a slot FAILED with Athena's COLUMN_NOT_FOUND WHEN the history is read
    newest = reader.history(FAILING).entries[0]

    # THEN its entry carries the failure: class, the full message, a one-line summary; the raw error stays
    assert newest["status"] == "FAILED"
    assert newest["failure"] == {
        "status": "FAILED",
        "error_class": "COLUMN_NOT_FOUND",
        "message": MESSAGE,
        "summary": f"COLUMN_NOT_FOUND: {MESSAGE}",  # under 160 characters: whole
        "failing": True,
    }
    assert newest["error"]["error_message"] == f"COLUMN_NOT_FOUND: {MESSAGE}"
    assert reader.history(FAILING).entries[1]["failure"] is None  # S0 SUCCEEDED


def test_the_overview_row_shows_the_reason(failing: None, reader: ResultsReader, clock: FakeClock) -> None:
    # WHEN the overview reads every job, and the widget's one-job read of each
    rows = {row.job: row for row in overview.read_overview(reader, now_ms=clock.now)}

    # THEN each row's last slot is FAILED with Athena's error class and message (cut to a cell), the same as the
    # widget's read of that job alone
    for job, slot in ((FAILING, S1), (NEVER_OK, S0)):
        row = rows[job]
        assert (row.status, row.slot_iso) == ("FAILED", slot.iso)
        assert row.detail is not None and row.detail.startswith("COLUMN_NOT_FOUND: line 3:8: Column 'dst'")
        assert overview.last_slot(reader, job, now_ms=clock.now) == (slot.iso, "FAILED", row.detail)


def test_a_widget_without_any_result_shows_the_last_slot_and_its_reason(
    failing: None, reader: ResultsReader, clock: FakeClock
) -> None:
    page = parse(render_widget(reader, NEVER_OK, now_ms=clock.now))

    assert len(page.paragraphs) == 2 and page.paragraphs[0].endswith("has no committed result yet")
    assert page.paragraphs[1].startswith(f"Last slot {S0.iso}: FAILED: COLUMN_NOT_FOUND: line 3:8: Column 'dst'")
    assert page.facts[1] == ["FAILED"]
    assert page.rows == []


def test_a_widget_keeps_the_last_good_result_and_says_the_last_slot_failed(
    failing: None, reader: ResultsReader, clock: FakeClock
) -> None:
    page = parse(render_widget(reader, FAILING, now_ms=clock.now))

    # THEN the note first (the failure and that the table is the last good result), then S0's rows
    first: Any = page.paragraphs[0]
    assert first.startswith(f"Last slot {S1.iso}: FAILED: COLUMN_NOT_FOUND:")
    assert first.endswith("The result below is the last good one.")
    assert ["JFK"] in page.rows


def test_a_widget_of_a_job_whose_newest_slot_succeeded_has_no_note(
    failing: None, reader: ResultsReader, clock: FakeClock, make_lock: Callable[[str], SlotLock]
) -> None:
    # GIVEN S2 of the failing job SUCCEEDED (only its lock's state matters to the note: no result is written)
    lock = make_lock(FAILING)
    lease = lock.try_acquire(S2, "racer-3")
    assert isinstance(lease, Lease)
    lock.commit(lease)

    # THEN the widget shows the latest result without a note
    page = parse(render_widget(reader, FAILING, now_ms=clock.now))
    assert not any(p.startswith("Last slot") for p in page.paragraphs)
    assert ["JFK"] in page.rows
