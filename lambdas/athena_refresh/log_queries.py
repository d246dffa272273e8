"""CloudWatch Logs Insights queries over the runtime's structured log lines (issue 23), as documented.

Most facts of an invocation are no metric (each metric name + dimension set is a billed custom metric) but a field
of its one outcome line, ``"slot <iso>: <outcome>"`` (:func:`athena_refresh.outcomes.outcome_log_fields`; names in
:mod:`athena_refresh.contract`, ``LOG_FIELD_*``). These queries answer the questions the former metrics answered.
``docs/observability.md`` shows each one under its title (a test keeps both the same); the stack may put them in
alarm descriptions and dashboard log widgets.

Each query starts with a ``filter`` on the structured fields; ``<JOB>`` and ``<SLOT>`` are placeholders
(:func:`render`). Bound the time range when running one: Logs Insights bills every byte of the selected log groups
in the range ($0.005 per GB scanned in us-east-1), whatever the filter keeps. JSON booleans read as 1 and 0.

Standard library only: the stack imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

JOB_PLACEHOLDER: Final = "<JOB>"
SLOT_PLACEHOLDER: Final = "<SLOT>"  # the slot's ISO time as logged, e.g. 2026-11-24T20:30:00Z

#: Query name -> its title (the question it answers; the heading in docs/observability.md).
TITLES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "slot_history": "What happened to job J at slot S",
        "outcomes_by_job": "Outcomes and work by job",
        "losses_by_reason": "Lost races by job and reason",
        "takeovers_and_adoptions": "Takeovers and adopted queries by job",
        "missed_slots_by_reason": "Missed slots by job and reason",
        "estimated_cost_by_job": "Estimated cost by job",
        "thresholds_exceeded": "Which job exceeded a threshold",
        "stale_and_corrupt_by_job": "Stale writes and corrupt items by job",
        "value_series_dropped": "Value series dropped by job",
    }
)

#: Query name -> its lines (join them with newlines to run it).
QUERIES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "slot_history": (
            "fields @timestamp, owner, level, message, outcome, reason, fencing_token, query_execution_id, checkpoint",
            f'| filter job = "{JOB_PLACEHOLDER}" and (slot = "{SLOT_PLACEHOLDER}" or missed_slot = "{SLOT_PLACEHOLDER}")',
            "| sort @timestamp asc",
            "| limit 1000",
        ),
        "outcomes_by_job": (
            "filter ispresent(outcome)",
            (
                "| stats count(*) as invocations, sum(lease_acquired) as leases, sum(queries_started) as queries,"
                " sum(rows_stored) as rows by job, outcome"
            ),
            "| sort invocations desc",
        ),
        "losses_by_reason": (
            'filter outcome = "lost"',
            "| stats count(*) as losses by job, reason",
            "| sort losses desc",
        ),
        "takeovers_and_adoptions": (
            "filter ispresent(outcome) and (takeover = 1 or query_adopted = 1)",
            "| stats sum(takeover) as takeovers, sum(query_adopted) as adopted_queries by job",
            "| sort takeovers desc",
        ),
        "missed_slots_by_reason": (
            "filter ispresent(missed_reason)",
            "| stats count(*) as missed, latest(missed_slot) as last_missed_slot by job, missed_reason",
            "| sort missed desc",
        ),
        "estimated_cost_by_job": (
            "filter ispresent(estimated_cost_usd)",
            (
                "| stats sum(estimated_cost_usd) as estimated_usd, count(*) as committed_slots,"
                " avg(estimated_cost_usd) as usd_per_slot by job"
            ),
            "| sort estimated_usd desc",
        ),
        "thresholds_exceeded": (
            "filter ispresent(threshold_exceeded)",
            (
                "| stats count(*) as slots, max(data_scanned_bytes) as max_scanned_bytes,"
                " max(query_duration_ms) as max_duration_ms, latest(slot) as last_slot by job, threshold_exceeded"
            ),
            "| sort slots desc",
        ),
        "stale_and_corrupt_by_job": (
            'filter outcome in ["stale_rejected", "corrupt"]',
            (
                "| stats count(*) as events, latest(slot) as last_slot, latest(item_key) as last_corrupt_item"
                " by job, outcome"
            ),
            "| sort events desc",
        ),
        "value_series_dropped": (
            "filter value_series_dropped > 0",
            "| stats count(*) as slots, max(value_series_dropped) as most_dropped by job",
            "| sort most_dropped desc",
        ),
    }
)


def query_text(name: str) -> str:
    """The query ``name`` as one text (its lines joined with newlines), placeholders left in."""
    return "\n".join(QUERIES[name])


def render(name: str, *, job: str | None = None, slot: str | None = None) -> str:
    """The query ``name`` with ``<JOB>`` and ``<SLOT>`` replaced by ``job`` and ``slot`` (when given).

    The values go inside double-quoted Logs Insights strings: a job name (letters, digits, ``-``, ``_``) and an ISO
    slot time need no escaping; anything with a double quote or a backslash is refused.
    """
    text = query_text(name)
    for placeholder, value in ((JOB_PLACEHOLDER, job), (SLOT_PLACEHOLDER, slot)):
        if value is None:
            continue
        if '"' in value or "\\" in value:
            raise ValueError(f"{placeholder} value must not contain a double quote or a backslash: {value!r:.80}")
        text = text.replace(placeholder, value)
    return text
