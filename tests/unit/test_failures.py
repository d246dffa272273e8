"""``athena_refresh.failures``: a FAILED or MISSED slot's reason read from every error object the runtime records,
and the results CLI's history table showing it (issue 34: it printed ``FAILED | -``). Pure: no I/O."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from athena_refresh.errors import QueryFailedError, ResultsStoreError, ResultTypeError
from athena_refresh.failures import SUMMARY_CHARS, Failure, describe_failure
from tools.results.render import render_history

COLUMN_NOT_FOUND = "COLUMN_NOT_FOUND: line 1:8: Column 'dst' cannot be resolved"


@pytest.mark.parametrize(
    ("status", "reason", "error", "expected"),
    [
        # a failed query: Athena's message starts with Trino's error name
        (
            "FAILED",
            None,
            QueryFailedError("qe", "FAILED", error_category=2, error_message=COLUMN_NOT_FOUND).as_dict(),
            Failure("FAILED", "COLUMN_NOT_FOUND", "line 1:8: Column 'dst' cannot be resolved"),
        ),
        # only the StateChangeReason (no AthenaError message)
        (
            "FAILED",
            None,
            QueryFailedError("qe", "FAILED", reason="TYPE_MISMATCH: line 2:7: Cannot apply operator").as_dict(),
            Failure("FAILED", "TYPE_MISMATCH", "line 2:7: Cannot apply operator"),
        ),
        # cancelled, without a name in the message
        (
            "FAILED",
            None,
            QueryFailedError("qe", "CANCELLED", reason="Query cancelled by user").as_dict(),
            Failure("FAILED", "CANCELLED", "Query cancelled by user"),
        ),
        # a failed query with no message at all
        ("FAILED", None, QueryFailedError("qe", "FAILED").as_dict(), Failure("FAILED", "QUERY_FAILED", "")),
        # result and store errors: the exception's name
        (
            "FAILED",
            None,
            ResultTypeError("n", "bigint", "x", "invalid literal").as_dict(),
            Failure("FAILED", "ResultTypeError", "column 'n' (bigint): cannot convert 'x': invalid literal"),
        ),
        (
            "failed",
            None,
            ResultsStoreError("rows are not JSON", retryable=False).as_dict(),
            Failure("FAILED", "ResultsStoreError", "rows are not JSON"),
        ),
        # an older or foreign object (type + message), and a failure with a reason of its own
        ("FAILED", None, {"type": "QueryFailed", "message": "boom"}, Failure("FAILED", "QueryFailed", "boom")),
        ("FAILED", "assertion", {"failing_rows": 3}, Failure("FAILED", "assertion", "")),
        # misses: the reason, what it means, and the detail's facts
        (
            "MISSED",
            "capacity",
            {"reason": "capacity", "waited_ms": 1_700_000, "deferrals": 3, "permits": 10},
            Failure(
                "MISSED",
                "capacity",
                "no Athena capacity permit before the slot's maximum age; waited 1700.0 s, given back 3 times,"
                " 10 permits",
            ),
        ),
        ("MISSED", "paused", {}, Failure("MISSED", "paused", "the job was paused")),
        ("MISSED", None, None, Failure("MISSED", "missed", "")),
    ],
)
def test_every_recorded_error_shape_gives_its_class_and_message(
    status: str, reason: str | None, error: object, expected: Failure
) -> None:
    assert describe_failure(status, reason, error) == expected


@pytest.mark.parametrize("status", ["SUCCEEDED", "RUNNING", "REQUESTED", None, 3])
def test_a_slot_that_did_not_fail_has_no_failure(status: object) -> None:
    assert describe_failure(status, None, {"error_message": "COLUMN_NOT_FOUND: x"}) is None


def test_a_paused_miss_is_not_failing_every_other_failure_is() -> None:
    assert not Failure("MISSED", "paused", "").failing
    assert Failure("MISSED", "superseded", "").failing and Failure("FAILED", "CANCELLED", "").failing


def test_the_summary_is_one_line_cut_with_an_ellipsis_and_the_message_stays_whole() -> None:
    message = "line 1:1: " + "x " * 200 + "\nsecond line"
    failure = describe_failure("FAILED", None, {"error_message": f"SYNTAX_ERROR: {message}"})
    assert failure is not None and failure.message == message.strip()
    summary = failure.summary()
    assert len(summary) == SUMMARY_CHARS and summary.endswith("...") and "\n" not in summary
    assert failure.summary(40) == "SYNTAX_ERROR: line 1:1: x x x x x x x..."
    assert Failure("MISSED", "paused", "").summary() == "paused"


def test_the_results_history_table_shows_the_error_class_and_message() -> None:
    entries = [
        {
            "slot": "2026-11-22T00:30:00Z",
            "generation": 1,
            "status": "FAILED",
            "reason": None,
            "error": QueryFailedError("qe", "FAILED", error_message=COLUMN_NOT_FOUND).as_dict(),
        },
        {"slot": "2026-11-22T00:00:00Z", "generation": 1, "status": "MISSED", "reason": "paused", "error": None},
    ]
    out = io.StringIO()
    render_history(Console(file=out, width=400, color_system=None), "j", entries)
    text = out.getvalue()
    assert "COLUMN_NOT_FOUND: line 1:8: Column 'dst' cannot be resolved" in text
    assert "paused: the job was paused" in text
