"""The documented Logs Insights queries (athena_refresh.log_queries == docs/observability.md), the fields they
read, and the report behind the outcome line's fields (athena_refresh.report)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from athena_refresh import contract, log_queries
from athena_refresh.report import SlotReport, ThresholdExceeded, thresholds_exceeded

DOC = Path(__file__).resolve().parents[3] / "docs" / "observability.md"
#: Keys every line of an invocation carries besides the outcome line's own fields (Powertools appended keys, the
#: checkpoint lines' key, a corrupt line's item key), and Logs Insights' own fields.
OTHER_KEYS = {"owner", "level", "message", "checkpoint", "item_key", "@timestamp"}


def documented_queries() -> dict[str, str]:
    """Title -> the first code block under its ``###`` heading in docs/observability.md."""
    text = DOC.read_text(encoding="utf-8")
    sections = re.split(r"^### ", text, flags=re.MULTILINE)[1:]
    found = {}
    for section in sections:
        title, _, body = section.partition("\n")
        block = re.search(r"^```\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL)
        assert block, f"no code block under {title!r}"
        found[title.strip()] = block.group(1).rstrip("\n")
    return found


def test_every_documented_query_is_a_constant_and_the_other_way_round() -> None:
    # GIVEN the queries in the module and in the document
    documented = documented_queries()

    # THEN each one is under its title, with the same text, and none is only in one place
    assert set(log_queries.QUERIES) == set(log_queries.TITLES)
    assert documented == {log_queries.TITLES[name]: log_queries.query_text(name) for name in log_queries.QUERIES}
    # AND the document names each query's constant
    text = DOC.read_text(encoding="utf-8")
    assert all(f"`{name}`" in text for name in log_queries.QUERIES)


def test_the_document_names_the_metric_set() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in contract.ALL_METRICS:
        assert f"| `{name}` |" in text, name
    for name in contract.LOG_ONLY_FIELDS:
        assert f"`{name}`" in text, name
    assert "https://aws.amazon.com/cloudwatch/pricing/" in text and "$0.005 per GB" in text


@pytest.mark.parametrize("name", list(log_queries.QUERIES))
def test_each_query_reads_only_fields_the_runtime_logs_and_filters_first(name: str) -> None:
    text = log_queries.query_text(name)
    # the fields a query filters, aggregates or groups on
    used = set(re.findall(r"\b(?:ispresent|sum|max|avg|latest)\((@?[a-z_]+)\)", text))
    used |= set(re.findall(r"\b([a-z_]+)\s*(?:=|>|in \[)", text))
    for by in re.findall(r"\bby ([a-z_, ]+)$", text, flags=re.MULTILINE):
        used |= {field.strip() for field in by.split(",")}
    for fields in re.findall(r"^fields (.*)$", text, flags=re.MULTILINE):
        used |= {field.strip() for field in fields.split(",")}
    known = set(contract.LOG_FIELDS) | set(contract.LOG_ONLY_FIELDS) | OTHER_KEYS
    assert used and used <= known, used - known
    # every query narrows with a filter on the structured fields (a bounded time range does the rest)
    assert re.search(r"^(\| )?filter ", text, flags=re.MULTILINE)


def test_render_fills_the_placeholders_and_refuses_a_quote() -> None:
    text = log_queries.render("slot_history", job="flights-dashboard", slot="2026-11-24T20:30:00Z")
    assert 'filter job = "flights-dashboard" and (slot = "2026-11-24T20:30:00Z"' in text
    assert "<JOB>" not in text and "<SLOT>" not in text
    with pytest.raises(ValueError, match="double quote"):
        log_queries.render("slot_history", job='x" or job = "y')


def test_log_queries_and_report_use_the_standard_library_only() -> None:
    # the stack imports log_queries; the job and local tools import report: neither may pull in Powertools
    for module in (log_queries, __import__("athena_refresh.report", fromlist=["report"])):
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        imported = {
            (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        allowed = {"__future__", "collections.abc", "types", "typing", "dataclasses", ""}
        assert imported <= allowed, imported - allowed  # "": the package's own modules (from . import contract)


# ---------------------------------------------------------------------------------------------------
# the report behind the outcome line
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scanned", "duration", "max_scanned", "max_duration", "expected"),
    [
        pytest.param(100, 10, None, None, [], id="off"),
        pytest.param(100, 10, 100, 10, [], id="equal-is-not-above"),
        pytest.param(101, 10, 100, 10, [contract.METRIC_DATA_SCANNED_BYTES], id="bytes"),
        pytest.param(100, 11, 100, 10, [contract.METRIC_QUERY_DURATION_MS], id="duration"),
        pytest.param(
            101, 11, 100, 10, [contract.METRIC_DATA_SCANNED_BYTES, contract.METRIC_QUERY_DURATION_MS], id="both"
        ),
        pytest.param(10**15, 10, None, 10, [], id="only-duration-on"),
    ],
)
def test_a_threshold_is_exceeded_only_when_set_and_strictly_above(
    scanned: int, duration: int, max_scanned: int | None, max_duration: int | None, expected: list[str]
) -> None:
    exceeded = thresholds_exceeded(
        data_scanned_bytes=scanned,
        query_duration_ms=duration,
        max_data_scanned_bytes=max_scanned,
        max_query_duration_ms=max_duration,
    )
    assert [t.metric for t in exceeded] == expected
    settings = {contract.METRIC_DATA_SCANNED_BYTES: contract.ENV_ALARM_DATA_SCANNED_BYTES}
    settings[contract.METRIC_QUERY_DURATION_MS] = contract.ENV_ALARM_QUERY_DURATION_MS
    assert all(t.setting == settings[t.metric] for t in exceeded)


def test_the_reports_log_fields_are_the_contracts_and_unknown_ones_are_none() -> None:
    # a loser's report: nothing but the counts
    assert SlotReport().log_fields() == {
        "query_adopted": False,
        "queries_started": 0,
        "data_scanned_bytes": None,
        "query_duration_ms": None,
        "rows_stored": None,
        "estimated_cost_usd": None,
        "value_series_dropped": None,
        "threshold_exceeded": None,
        "permit": None,
        "permit_wait_ms": None,
        "capacity_deferrals": None,
        "permit_queries_unreadable": None,
    }
    assert set(SlotReport().log_fields()) <= set(contract.LOG_ONLY_FIELDS)
    both = (
        ThresholdExceeded(contract.METRIC_DATA_SCANNED_BYTES, contract.ENV_ALARM_DATA_SCANNED_BYTES, 2, 1),
        ThresholdExceeded(contract.METRIC_QUERY_DURATION_MS, contract.ENV_ALARM_QUERY_DURATION_MS, 2, 1),
    )
    assert SlotReport(thresholds=both).log_fields()["threshold_exceeded"] == "DataScannedBytes,QueryDurationMs"
