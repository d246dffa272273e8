"""``results_api.responses``: content negotiation, entity tags, ``If-None-Match``, CSV, ``Cache-Control`` and
problem documents, as pure functions (no backend)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from results_api import models
from results_api.errors import (
    BackendUnavailableError,
    BadParameterError,
    NotAcceptableError,
    ResultNotFoundError,
    UnknownJobError,
)
from results_api.responses import (
    CSV,
    IMMUTABLE,
    JSON,
    NO_CACHE,
    if_none_match,
    negotiate,
    problem,
    result_document,
    result_etag,
    result_headers,
    to_csv,
)


def parse_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


# ---------------------------------------------------------------------------------------------------
# negotiate
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, JSON),
        ("", JSON),
        ("   ", JSON),
        ("*/*", JSON),
        ("application/json", JSON),
        ("text/csv", CSV),
        ("TEXT/CSV", CSV),
        ("text/csv; charset=utf-8", CSV),
        ("text/csv;Q=1", CSV),
        ("text/*", CSV),
        ("application/*", JSON),
        ("text/html, text/csv", CSV),
        ("text/html, */*;q=0.1", JSON),
        ("text/csv, application/json", JSON),  # a tie goes to JSON
        ("application/json;q=0.5, text/csv;q=0.5", JSON),
        ("text/csv;q=0.5, application/json;q=0.4", CSV),
        ("application/json;q=0.9, text/csv", CSV),
        ("text/csv;q=0, */*", JSON),  # the most specific range decides: CSV is excluded
        ("*/*, text/csv;q=0", JSON),  # whatever the order
        ("application/json;q=0, */*", CSV),
        ("application/json;q=0, text/*;q=0.2", CSV),
        ("*/*;q=0.3, text/csv;q=0.2", JSON),
        ("text/*;q=0.8, text/csv;q=0.1, application/json;q=0.5", JSON),  # text/csv is more specific than text/*
        ("text/csv;q=1.5", CSV),  # clamped to 1
        ("text/csv;q=0.001", CSV),
        ("image/png, text/csv;q=0.1", CSV),
        ("garbage", JSON),  # unparseable: as if absent
        (";;;", JSON),
        (",", JSON),
    ],
)
def test_negotiate_picks_the_representation(accept: str | None, expected: str) -> None:
    assert negotiate(accept) == expected


@pytest.mark.parametrize(
    "accept",
    [
        "image/png",
        "text/html",
        "application/xml, image/*",
        "text/csv;q=0",
        "application/json;q=0, text/csv;q=0",
        "*/*;q=0",
        "text/csv;q=x",  # an unreadable quality counts as 0
        "text/*;q=0, application/*;q=0",
    ],
)
def test_negotiate_refuses_a_header_that_excludes_both(accept: str) -> None:
    with pytest.raises(NotAcceptableError) as caught:
        negotiate(accept)
    assert caught.value.status == 406 and "application/json, text/csv" in caught.value.message


def test_a_header_of_5_kb_is_a_bad_accept_parameter_with_a_bounded_message() -> None:
    with pytest.raises(BadParameterError) as caught:
        negotiate("text/csv;q=0.5, " + "a/b, " * 1000)
    assert caught.value.parameter == "Accept" and caught.value.status == 400
    assert len(caught.value.message) < 100
    # (at the limit it is still read)
    assert negotiate("text/csv" + " " * (4096 - len("text/csv"))) == CSV


def test_a_refusal_quotes_at_most_80_characters_of_the_header() -> None:
    with pytest.raises(NotAcceptableError) as caught:
        negotiate("image/png, " + "x/y, " * 700)
    assert len(caught.value.message) < 200


# ---------------------------------------------------------------------------------------------------
# entity tags
# ---------------------------------------------------------------------------------------------------
def test_the_etag_is_a_quoted_strong_tag_that_changes_with_each_part_of_the_identity(
    stored_of: Callable[..., Any],
) -> None:
    base = stored_of()
    tag = result_etag(base, JSON)
    # a strong tag: quoted, no W/ prefix, opaque characters only
    assert tag.startswith('"') and tag.endswith('"') and not tag.startswith("W/")
    assert len(tag) == 34 and set(tag[1:-1]) <= set("0123456789abcdef")
    # the same result in the same representation has the same tag (the rows do not take part: they never change)
    assert result_etag(stored_of(rows=[]), JSON) == tag
    variants = [
        result_etag(stored_of(job_name="carrier-on-time"), JSON),
        result_etag(stored_of(slot_iso="2026-11-22T02:00:00Z"), JSON),
        result_etag(stored_of(generation=2), JSON),
        result_etag(stored_of(fencing_token=4), JSON),
        result_etag(base, CSV),
        result_etag(base, "redirect"),
    ]
    assert len({tag, *variants}) == 7


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        ('"abc"', True),
        ('  "abc"  ', True),
        ('W/"abc"', True),  # weak comparison (RFC 9110 13.1.2)
        ('"x", "abc"', True),
        ('"x",W/"abc" , "y"', True),
        ("*", True),
        (" * ", True),
        ('"abd"', False),
        ('"x", "y"', False),
        ("abc", False),  # unquoted
        ('"ABC"', False),  # opaque: case matters
        ('W/"x"', False),
    ],
)
def test_if_none_match(header: str | None, matches: bool) -> None:
    assert if_none_match(header, '"abc"') is matches


def test_if_none_match_reads_at_most_4096_characters() -> None:
    assert if_none_match('"x", ' * 10 + '"abc"', '"abc"')
    assert not if_none_match('"x", ' * 1000 + '"abc"', '"abc"')  # the match is past the bound


# ---------------------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------------------
def test_csv_round_trips_through_the_csv_module() -> None:
    columns = ["text", "number", "float", "nothing", "flag", "nested", "unicode"]
    rows: list[dict[str, Any]] = [
        {
            "text": 'say "hi", then\r\nleave',
            "number": 3,
            "float": 1.5,
            "nothing": None,
            "flag": True,
            "nested": {"a": [1, 2], "b": {"c": None}},
            "unicode": "Zürich ✈ 東京",
        },
        {"text": "a,b;c", "number": -2, "float": 0.1, "nothing": "", "flag": False, "nested": [1, "x"], "unicode": ""},
        {"text": "<script>alert(1)</script>", "number": 0},  # missing columns: NULL
    ]
    text = to_csv(columns, rows)
    # RFC 4180: CRLF after every record, header row first
    assert text.endswith("\r\n") and text.startswith("text,number,float,nothing,flag,nested,unicode\r\n")
    parsed = parse_csv(text)
    assert parsed == [
        columns,
        ['say "hi", then\r\nleave', "3", "1.5", "", "true", '{"a":[1,2],"b":{"c":null}}', "Zürich ✈ 東京"],
        ["a,b;c", "-2", "0.1", "", "false", '[1,"x"]', ""],
        ["<script>alert(1)</script>", "0", "", "", "", "", ""],
    ]
    # nested values are JSON text, read back as what they were
    assert json.loads(parsed[1][5]) == rows[0]["nested"]
    # fields that need it are quoted, quotes doubled
    assert '"say ""hi"", then\r\nleave"' in text and '"a,b;c"' in text


def test_csv_of_no_rows_is_the_header_alone() -> None:
    assert to_csv(["a", "b"], []) == "a,b\r\n"
    assert to_csv([], []) == "\r\n"


# ---------------------------------------------------------------------------------------------------
# Cache-Control, documents, headers, problems
# ---------------------------------------------------------------------------------------------------
def test_what_can_change_is_revalidated_and_only_a_named_generation_is_immutable() -> None:
    # no-cache: a cache may store the answer but must revalidate it before every reuse (RFC 9111 5.2.2.4)
    assert NO_CACHE == "no-cache"
    assert IMMUTABLE == "public, max-age=31536000, immutable"


def test_the_result_document_validates_against_the_result_model(stored_of: Callable[..., Any]) -> None:
    stored = stored_of(window_start="2013-11-21T00:00:00", window_end="2013-11-22T00:00:00")
    document = result_document(stored, stored.rows)
    validated = models.Result.model_validate(json.loads(json.dumps(document)))
    assert (validated.slot, validated.generation, validated.fencing_token) == ("2026-11-22T01:30:00Z", 1, 3)
    assert validated.rows == stored.rows and [c.name for c in validated.columns][:2] == ["origin", "flights"]
    assert document["window"] == {"start": "2013-11-21T00:00:00", "end": "2013-11-22T00:00:00"}
    assert result_headers(stored) == {
        "X-Job": "flights-dashboard",
        "X-Slot": "2026-11-22T01:30:00Z",
        "X-Generation": "1",
        "X-Fencing-Token": "3",
        "X-Query-Execution-Id": "qe-s3",
    }


@pytest.mark.parametrize(
    ("error", "status", "code", "parameter"),
    [
        (BadParameterError("slot", "is bad"), 400, "bad_parameter", "slot"),
        (UnknownJobError("x", ["a", "b"]), 404, "unknown_job", None),
        (ResultNotFoundError("a", "2026-11-22T00:00:00Z", 2), 404, "no_result", None),
        (NotAcceptableError("no"), 406, "not_acceptable", None),
        (BackendUnavailableError("down"), 503, "backend_unavailable", None),
    ],
)
def test_problems_are_rfc_9457_documents(error: Any, status: int, code: str, parameter: str | None) -> None:
    document = problem(error)
    assert (document["status"], document["code"], document.get("parameter")) == (status, code, parameter)
    assert document["type"] == f"about:blank#{code}" and document["detail"] == error.message
    assert document["title"] == code.replace("_", " ")
    assert models.Problem.model_validate(document).status == status
