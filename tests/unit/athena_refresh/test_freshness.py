"""The watchdog's decision per job (athena_refresh.freshness): late, waiting, failing, paused, on time; DST; no I/O."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from athena_refresh.catalog import CatalogQuery, CatalogSchedule, load_catalog, write_catalog
from athena_refresh.freshness import JobState, JobWatch, Observed, SlotRecord, decide, due_firing, recent_firings
from athena_refresh.watchdog import job_watches, notification

HALF_HOURLY = JobWatch("flights", "cron(0/30 * * * ? *)", "UTC", grace_s=2100, max_slot_age_s=1800)
DAILY_NY = JobWatch("carriers", "cron(15 6 * * ? *)", "America/New_York", grace_s=3900, max_slot_age_s=3600)


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def s(text: str) -> int:
    return ms(text) // 1000


def test_a_job_whose_latest_due_slot_succeeded_is_on_time() -> None:
    now = ms("2026-12-02T10:40:00Z")  # due: 10:00 (10:00 + 35 min <= 10:40); 10:30 still within its grace
    observed = Observed(last_finished_slot_epoch_s=s("2026-12-02T10:00:00Z"), last_finished_outcome="succeeded")
    verdict = decide(HALF_HOURLY, observed, now)
    assert verdict.state == JobState.ON_TIME
    assert verdict.due_slot_epoch_s == s("2026-12-02T10:00:00Z")
    assert verdict.lateness_s == 0 and not verdict.alarming


def test_late_exactly_at_the_grace_and_not_one_second_before() -> None:
    observed = Observed(last_finished_slot_epoch_s=s("2026-12-02T09:30:00Z"), last_finished_outcome="succeeded")
    before = decide(HALF_HOURLY, observed, ms("2026-12-02T10:34:59Z"))
    at = decide(HALF_HOURLY, observed, ms("2026-12-02T10:35:00Z"))
    assert before.state == JobState.ON_TIME
    assert at.state == JobState.LATE and at.alarming
    assert at.lateness_s == 0 and "2026-12-02T10:00:00Z not finished 2100 s" in at.reason
    later = decide(HALF_HOURLY, observed, ms("2026-12-02T12:00:00Z"))
    # The first unfinished firing after the last finished slot is 10:00: late since 10:35.
    assert later.state == JobState.LATE and later.lateness_s == 85 * 60


def test_a_finished_slot_from_the_history_items_counts_as_well_as_the_lock_items_commit() -> None:
    observed = Observed(
        last_finished_slot_epoch_s=s("2026-12-02T09:00:00Z"),
        last_finished_outcome="succeeded",
        slots=(SlotRecord(s("2026-12-02T10:00:00Z"), "MISSED", reason="paused"),),
    )
    verdict = decide(HALF_HOURLY, observed, ms("2026-12-02T10:40:00Z"))
    assert verdict.state == JobState.ON_TIME  # MISSED paused is finished and not failing
    assert verdict.last_finished_status == "MISSED"


def test_failing_for_a_failed_slot_any_reason_assertion_included() -> None:
    for record in (
        SlotRecord(s("2026-12-02T10:00:00Z"), "FAILED", error={"error_message": "COLUMN_NOT_FOUND: line 1:8: x"}),
        SlotRecord(s("2026-12-02T10:00:00Z"), "FAILED", reason="assertion", error={"message": "rows 0 < 1"}),
    ):
        verdict = decide(HALF_HOURLY, Observed(slots=(record,)), ms("2026-12-02T10:40:00Z"))
        assert verdict.state == JobState.FAILING and verdict.alarming
    assert (
        "COLUMN_NOT_FOUND"
        in decide(
            HALF_HOURLY,
            Observed(
                slots=(SlotRecord(s("2026-12-02T10:00:00Z"), "FAILED", error={"error_message": "COLUMN_NOT_FOUND: x"}),)
            ),
            ms("2026-12-02T10:40:00Z"),
        ).reason
    )


def test_failing_for_a_missed_slot_of_any_reason_but_paused() -> None:
    for reason in ("too_old", "overrun", "superseded", "capacity"):
        record = SlotRecord(s("2026-12-02T10:00:00Z"), "MISSED", reason=reason)
        verdict = decide(HALF_HOURLY, Observed(slots=(record,)), ms("2026-12-02T10:40:00Z"))
        assert verdict.state == JobState.FAILING, reason
        assert reason in verdict.reason


def test_a_lock_item_commit_that_failed_is_failing() -> None:
    observed = Observed(last_finished_slot_epoch_s=s("2026-12-02T10:00:00Z"), last_finished_outcome="failed")
    assert decide(HALF_HOURLY, observed, ms("2026-12-02T10:40:00Z")).state == JobState.FAILING


def test_paused_wins_over_late_and_failing() -> None:
    observed = Observed(
        paused=True, last_finished_slot_epoch_s=s("2026-12-01T00:00:00Z"), last_finished_outcome="failed"
    )
    verdict = decide(HALF_HOURLY, observed, ms("2026-12-02T10:40:00Z"))
    assert verdict.state == JobState.PAUSED and not verdict.alarming


def test_a_slot_given_back_for_capacity_is_waiting_until_its_max_age_then_late() -> None:
    observed = Observed(
        last_finished_slot_epoch_s=s("2026-12-02T09:30:00Z"),
        last_finished_outcome="succeeded",
        lease_slot_epoch_s=s("2026-12-02T10:00:00Z"),
        given_back_reason="capacity",
    )
    short_grace = JobWatch("f", "cron(0/30 * * * ? *)", "UTC", grace_s=600, max_slot_age_s=1800)
    waiting = decide(short_grace, observed, ms("2026-12-02T10:20:00Z"))
    assert waiting.state == JobState.WAITING and not waiting.alarming
    late = decide(short_grace, observed, ms("2026-12-02T10:30:00Z"))
    assert late.state == JobState.LATE  # 10:00 + 1800 s max age: no redelivery can run it any more
    other = Observed(
        last_finished_slot_epoch_s=s("2026-12-02T09:30:00Z"),
        lease_slot_epoch_s=s("2026-12-02T10:00:00Z"),
        given_back_reason="shutdown",
    )
    assert decide(short_grace, other, ms("2026-12-02T10:20:00Z")).state == JobState.LATE


def test_a_job_that_never_ran_is_late_unless_first_seen_after_the_due_firing() -> None:
    now = ms("2026-12-02T10:40:00Z")
    assert decide(HALF_HOURLY, Observed(first_seen_ms=ms("2026-12-02T10:05:00Z")), now).state == JobState.ON_TIME
    verdict = decide(HALF_HOURLY, Observed(first_seen_ms=ms("2026-12-02T09:00:00Z")), now)
    assert verdict.state == JobState.LATE and "no slot has ever finished" in verdict.reason


def test_dst_spring_forward_new_york_daily_job() -> None:
    """2027-03-14: New York springs forward (02:00 EST -> 03:00 EDT); 06:15 local is 10:15Z the day after, 11:15Z
    the day before."""
    assert due_firing(DAILY_NY, ms("2027-03-14T12:20:00Z")) == s("2027-03-14T10:15:00Z")
    ran_before = Observed(last_finished_slot_epoch_s=s("2027-03-13T11:15:00Z"), last_finished_outcome="succeeded")
    # 10:15Z + 3900 s = 11:20Z: late at 11:20Z (a UTC-only reckoning would wait until 12:20Z).
    assert decide(DAILY_NY, ran_before, ms("2027-03-14T11:19:59Z")).state == JobState.ON_TIME
    assert decide(DAILY_NY, ran_before, ms("2027-03-14T11:20:00Z")).state == JobState.LATE


def test_dst_fall_back_new_york_daily_job() -> None:
    """2026-11-01: New York falls back; 06:15 local is 11:15Z from then on (10:15Z before)."""
    ran = Observed(last_finished_slot_epoch_s=s("2026-10-31T10:15:00Z"), last_finished_outcome="succeeded")
    assert decide(DAILY_NY, ran, ms("2026-11-01T12:19:59Z")).state == JobState.ON_TIME
    assert decide(DAILY_NY, ran, ms("2026-11-01T12:20:00Z")).state == JobState.LATE


def test_recent_firings_are_newer_than_the_last_finished_slot() -> None:
    now = ms("2026-12-02T10:40:00Z")
    assert recent_firings(HALF_HOURLY, now, after_epoch_s=None, count=3) == [
        s("2026-12-02T09:30:00Z"),
        s("2026-12-02T10:00:00Z"),
        s("2026-12-02T10:30:00Z"),
    ]
    assert recent_firings(HALF_HOURLY, now, after_epoch_s=s("2026-12-02T10:00:00Z"), count=3) == [
        s("2026-12-02T10:30:00Z")
    ]


def test_the_catalog_carries_each_schedules_grace_and_max_age(tmp_path: Path) -> None:
    schedule = CatalogSchedule("cron(0/30 * * * ? *)", "UTC", 3, freshness_s=2100, max_slot_age_s=1800)
    path = write_catalog(tmp_path / "job_catalog.json", {"flights": CatalogQuery("SELECT 1", (), schedule=schedule)})
    loaded = load_catalog(path)["flights"].schedule
    assert loaded == schedule and schedule.as_dict() == {
        "expression": "cron(0/30 * * * ? *)",
        "timezone": "UTC",
        "racers": 3,
    }
    assert job_watches(load_catalog(path)) == [JobWatch("flights", "cron(0/30 * * * ? *)", "UTC", 2100, 1800)]
    # A catalog written before the watchdog: one period for the max age, plus 300 s for the grace.
    older = write_catalog(
        tmp_path / "older.json",
        {"flights": CatalogQuery("SELECT 1", (), schedule=CatalogSchedule("cron(0/30 * * * ? *)"))},
    )
    assert job_watches(load_catalog(older)) == [JobWatch("flights", "cron(0/30 * * * ? *)", "UTC", 2100, 1800)]


def test_one_notification_names_each_job_its_reason_last_success_and_the_command() -> None:
    late = decide(
        HALF_HOURLY,
        Observed(
            last_finished_slot_epoch_s=s("2026-12-02T09:30:00Z"),
            last_finished_outcome="succeeded",
            last_succeeded_slot_epoch_s=s("2026-12-02T09:30:00Z"),
            last_succeeded_at_ms=ms("2026-12-02T09:30:04Z"),
        ),
        ms("2026-12-02T11:00:00Z"),
    )
    paused = decide(DAILY_NY, Observed(paused=True), ms("2026-12-02T11:00:00Z"))
    subject, message = notification([("on_time", late), (None, paused)], stack="Prod")
    assert subject == "athena-once watchdog: 1 late, 1 paused (Prod)"
    assert "flights: on time -> LATE\n" in message and "carriers: new -> PAUSED\n" in message
    assert "last success:  slot 2026-12-02T09:30:00Z, committed 2026-12-02T09:30:04Z" in message
    assert "late by:       1500 s" in message  # 10:00's grace ended 10:35
    assert "look closer:   athena-once ops --stack Prod history --job flights" in message
    assert "slot 2026-12-02T10:00:00Z not finished 2100 s after its firing" in message
