"""``results_api.widget``: the dashboard's custom widget, a job's latest result as an HTML table. The HTML is
parsed (``html.parser``), never string-matched: what a browser would build from it is what is checked.

The widget adds HTML over the reader, not DynamoDB behaviour (``test_reader.py`` runs both backends), so this
module runs on moto only.
"""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import pytest

from athena_refresh.cost import format_usd
from results_api import handler
from results_api.reader import ResultsReader
from results_api.widget import DOCUMENTATION, MAX_ROWS, render_widget, widget_response
from slotlock import Slot

JOB = "flights-dashboard"
PAUSED_JOB = "carrier-on-time"
IDLE_JOB = "daily-ny"
S0, S3 = Slot.parse("2026-11-22T00:00:00Z"), Slot.parse("2026-11-22T01:30:00Z")
SCRIPT = "<script>alert(1)</script>"


class Page(HTMLParser):
    """What a browser would build from the widget's HTML: every start tag, the paragraphs' text and their bold
    facts, the table's header cells (text and title) and its rows of cells (text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.paragraphs: list[str] = []
        self.facts: list[list[str]] = []
        self.headers: list[tuple[str, str | None]] = []
        self.rows: list[list[str]] = []
        self.italic_cells = 0
        self._open: list[str] = []
        self._buffers: dict[str, list[str]] = {}
        self._title: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "i" and "td" in self._open:
            self.italic_cells += 1
        self._open.append(tag)
        if tag in ("p", "b", "th", "td"):
            self._buffers[tag] = []
        if tag == "p":
            self.facts.append([])
        if tag == "th":
            self._title = dict(attrs).get("title")
        if tag == "tr" and "tbody" in self._open:
            self.rows.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            while self._open.pop() != tag:
                pass  # (an element left open closes with its parent)
        text = "".join(self._buffers.pop(tag, []))
        if tag == "b" and "p" in self._open:
            self.facts[-1].append(text)
        elif tag == "p":
            self.paragraphs.append(text)
        elif tag == "th":
            self.headers.append((text, self._title))
        elif tag == "td":
            self.rows[-1].append(text)

    def handle_data(self, data: str) -> None:
        for buffer in self._buffers.values():
            buffer.append(data)


def parse(document: str) -> Page:
    page = Page()
    page.feed(document)
    page.close()
    return page


def fact_map(page: Page) -> dict[str, str]:
    """The first paragraph's facts (``slot <b>...</b> · generation <b>...</b> ...``) by name."""
    names = ["slot", "generation", "age", "fencing token", "rows", "query", "est. cost (estimate)"]
    return dict(zip(names, page.facts[0], strict=False))


def test_the_latest_result_is_a_table_of_its_columns_and_values(reader: ResultsReader, world: Any) -> None:
    # WHEN the widget renders the job, 75 s after its latest result was committed
    now_ms = world.committed_at_ms[(S3, 1)] + 75_000
    page = parse(render_widget(reader, JOB, now_ms=now_ms))

    # THEN the header cells are the result's column names, their titles the Athena types
    assert page.headers == [(column["name"], column["type"]) for column in world.latest_columns]
    # AND each row's cells hold the values: NULL in italics, booleans as words, nested values as JSON
    assert page.rows == [
        [SCRIPT, "3", "1.5", 'say "hi", then\r\nleave', "true", '{"a":[1,2],"b":[]}'],
        ["Zürich ✈ 東京", "0", "null", "a,b;c", "false", "null"],
        ["JFK", "-2", "0.1", "' & <b>", "null", '[1,"x"]'],
    ]
    assert page.italic_cells == 3
    # AND the markup in a value is text in its cell: no script element, no element but the widget's own
    assert "script" not in page.tags
    assert set(page.tags) <= {"p", "b", "table", "thead", "tbody", "tr", "th", "td", "i"}
    # AND the facts name the slot, generation, age, fencing token, row count and query
    assert fact_map(page) == {
        "slot": S3.iso,
        "generation": "1",
        "age": "1 min ago",
        "fencing token": str(world.tokens[(S3, 1)]),
        "rows": "3",
        "query": "qe-s3",
        "est. cost (estimate)": format_usd(world.latest_cost["estimated_cost_usd"]),
    }
    assert len(page.paragraphs) == 1  # no "more rows" note


@pytest.mark.parametrize(
    ("age_ms", "shown"),
    [
        (-5_000, "0 s ago"),
        (0, "0 s ago"),
        (59_999, "59 s ago"),
        (3_600_000, "1 h ago"),
        (2 * 86_400_000 + 5, "2 d ago"),
    ],
)
def test_the_age_is_in_the_largest_whole_unit(
    stored_of: Callable[..., Any],
    offline_reader: ResultsReader,
    monkeypatch: pytest.MonkeyPatch,
    age_ms: int,
    shown: str,
) -> None:
    stored = stored_of()
    monkeypatch.setattr(offline_reader, "latest", lambda job: stored)
    page = parse(render_widget(offline_reader, JOB, now_ms=stored.committed_at_ms + age_ms))
    assert fact_map(page)["age"] == shown


def test_offloaded_rows_are_read_from_s3_and_capped(reader: ResultsReader, world: Any, request_log: Any) -> None:
    # GIVEN a job whose latest result has 150 rows, offloaded to S3
    request_log.clear()
    page = parse(render_widget(reader, PAUSED_JOB, now_ms=world.paused_committed_at_ms + 1_000))
    # THEN two DynamoDB reads (the LATEST item; the lock item, a BatchGetItem: its last slot succeeded, no third),
    # S3 holds the rows, the first 100 rows drawn, and a note for the other 50
    assert request_log.operations == ["GetItem", "BatchGetItem"]
    assert [name for name, _ in page.headers] == ["origin", "flights"]
    assert len(page.rows) == MAX_ROWS == 100
    assert page.rows == [[row["origin"], str(row["flights"])] for row in world.paused_rows[:MAX_ROWS]]
    assert page.paragraphs[-1] == "50 more rows not shown (the read API serves them all)."
    assert fact_map(page)["rows"] == "150"


def test_a_result_of_exactly_max_rows_has_no_note(
    stored_of: Callable[..., Any], offline_reader: ResultsReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"origin": f"A{index}", "flights": index} for index in range(MAX_ROWS)]
    stored = stored_of(
        rows=rows, columns=[{"name": "origin", "type": "varchar"}, {"name": "flights", "type": "bigint"}]
    )
    monkeypatch.setattr(offline_reader, "latest", lambda job: stored)
    page = parse(render_widget(offline_reader, JOB, now_ms=stored.committed_at_ms))
    assert len(page.rows) == MAX_ROWS and len(page.paragraphs) == 1


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (None, "This widget needs the param job (the job's name)."),
        (42, "This widget needs the param job (the job's name)."),
        (["flights-dashboard"], "This widget needs the param job (the job's name)."),
        ("no-such-job", "no job 'no-such-job'; jobs: carrier-on-time, daily-ny, flights-dashboard, tampered"),
        (IDLE_JOB, f"job '{IDLE_JOB}' has no committed result yet"),
        (
            "<img src=x onerror=alert(1)>",
            "job: must be 1 to 64 letters, digits, '-' or '_', got '<img src=x onerror=alert(1)>'",
        ),
    ],
)
def test_what_cannot_be_shown_is_a_message_not_an_exception(reader: ResultsReader, job: Any, message: str) -> None:
    # GIVEN empty tables (no job ever ran) WHEN the widget renders a missing, invalid, unknown or idle job
    page = parse(render_widget(reader, job, now_ms=0))
    # THEN one paragraph says why, as text (the markup of a hostile job name included), and no table
    assert page.paragraphs == [message]
    assert page.rows == [] and "table" not in page.tags and "img" not in page.tags


def test_an_s3_failure_is_a_message(reader: ResultsReader, world: Any, s3: Any) -> None:
    # GIVEN the offloaded rows' object deleted from the bucket
    stored = reader.latest(PAUSED_JOB)
    assert stored.rows_s3_uri is not None
    bucket, _, key = stored.rows_s3_uri.removeprefix("s3://").partition("/")
    s3.delete_object(Bucket=bucket, Key=key)
    # WHEN / THEN the widget says it could not read them
    page = parse(render_widget(reader, PAUSED_JOB, now_ms=0))
    [message] = page.paragraphs
    assert message.startswith(f"could not read {stored.rows_s3_uri}") and "table" not in page.tags


def test_describe_returns_the_documentation(offline_reader: ResultsReader, offline_requests: Any) -> None:
    assert widget_response({"describe": True}, offline_reader, now_ms=0) == DOCUMENTATION
    assert "params:" in DOCUMENTATION and "job:" in DOCUMENTATION
    assert offline_requests.operations == []


def test_the_widget_handler_answers_cloudwatchs_event(
    deployed: None, lambda_context: Any, world: Any, cloudwatch_widget_context: Any
) -> None:
    # GIVEN CloudWatch's custom widget event: the widget's params merged in, plus widgetContext
    widget_context = cloudwatch_widget_context({"job": JOB}, title="Latest results", width=600, height=400)
    # WHEN the handler gets it
    page = parse(handler.widget_handler({"widgetContext": widget_context, "job": JOB}, lambda_context))
    # THEN it renders the job's latest result from the tables the environment names (real clock: some age)
    assert [name for name, _ in page.headers][:2] == ["origin", "flights"] and len(page.rows) == 3
    assert fact_map(page)["slot"] == S3.iso and fact_map(page)["age"].endswith(" ago")
    assert handler._reader is not None
    # AND describe gives the documentation; no job a message
    assert handler.widget_handler({"describe": True, "widgetContext": widget_context}, lambda_context) == DOCUMENTATION
    assert parse(handler.widget_handler({"widgetContext": widget_context}, lambda_context)).paragraphs == [
        "This widget needs the param job (the job's name)."
    ]
