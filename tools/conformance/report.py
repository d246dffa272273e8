"""The report of a conformance run: per case, totals per category, and the goals (issue 33).

Totals per category (and ``all``):

- of the value cases: ``EQUAL``, ``DIFFERENT``, ``REFUSED`` (the local run), ``DIFFERENT_type_only`` (the value
  is right, the type text is not: ``varchar`` for ``varchar(13)``), ``equal_percent``, and
  ``valid_refused_by_check`` (value cases the check refused: it should refuse none);
- of the refusal cases Trino's analysis raises (syntax, types, functions, aggregation): ``REFUSED_BY_CHECK``
  (``refused_with_trino_code``: with Trino's error code among the check's), ``ACCEPTED`` (the check), and
  ``refused_locally`` (the local engine failed the statement too);
- of the refusal cases Trino raises while executing (``DIVISION_BY_ZERO``, ``INVALID_CAST_ARGUMENT``...,
  :data:`tools.conformance.cases.EXECUTION_ERRORS`): ``failing_cases``, ``failed_locally`` (good;
  ``failed_with_trino_code``: with Trino's error code) and ``answered_locally`` (the local engine answered where
  Athena fails the query).

The goals, all of which must hold for exit status 0:

- no value case ``DIFFERENT``, and no case that fails on Athena while executing answered locally;
- no analysis refusal ``ACCEPTED`` by the check;
- no value case refused by the check;
- at least 90% of the value cases ``EQUAL`` in every category but ``maps`` and ``json`` (where refusing is
  acceptable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tools.conformance.runner import Outcome

__all__ = ["EQUAL_GOAL_EXEMPT", "EQUAL_GOAL_PERCENT", "Goal", "goals", "totals"]

EQUAL_GOAL_PERCENT = 90.0
#: Categories where refusing to run is acceptable (the 90% EQUAL goal does not apply).
EQUAL_GOAL_EXEMPT = frozenset({"maps", "json"})
ALL = "all"
#: The categories of issue 33, in its order; others follow in the order the cases name them.
CATEGORY_ORDER = (
    "arithmetic",
    "decimals",
    "casts",
    "strings",
    "dates",
    "time zones",
    "conditionals",
    "arrays",
    "maps",
    "json",
    "regexp",
    "aggregation",
)


def _empty() -> dict[str, Any]:
    return {
        "value_cases": 0,
        "EQUAL": 0,
        "DIFFERENT": 0,
        "REFUSED": 0,
        "DIFFERENT_type_only": 0,
        "equal_percent": None,
        "valid_refused_by_check": 0,
        "refusal_cases": 0,
        "REFUSED_BY_CHECK": 0,
        "refused_with_trino_code": 0,
        "ACCEPTED": 0,
        "refused_locally": 0,
        "failing_cases": 0,
        "failed_locally": 0,
        "failed_with_trino_code": 0,
        "answered_locally": 0,
    }


def totals(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    """Category -> its counts (:data:`CATEGORY_ORDER` first, then the others in first-seen order, then ``all``)."""
    by_category: dict[str, dict[str, Any]] = {}
    overall = _empty()
    for outcome in outcomes:
        for counts in (by_category.setdefault(outcome.case.category, _empty()), overall):
            if outcome.case.fails_at_run:
                counts["failing_cases"] += 1
                counts["failed_locally" if outcome.run == "REFUSED" else "answered_locally"] += 1
                counts["failed_with_trino_code"] += outcome.answer.get("error_code") == outcome.case.error
            elif outcome.case.refusal:
                counts["refusal_cases"] += 1
                counts[outcome.check] += 1
                counts["refused_with_trino_code"] += outcome.case.error in outcome.check_errors
                counts["refused_locally"] += outcome.run == "REFUSED"
            else:
                counts["value_cases"] += 1
                counts[outcome.run] += 1
                counts["DIFFERENT_type_only"] += outcome.answer.get("difference") == "type"
                counts["valid_refused_by_check"] += outcome.check == "REFUSED_BY_CHECK"
    for counts in (*by_category.values(), overall):
        if counts["value_cases"]:
            counts["equal_percent"] = round(100.0 * counts["EQUAL"] / counts["value_cases"], 1)
    rank = {name: position for position, name in enumerate(CATEGORY_ORDER)}
    ordered = sorted(by_category, key=lambda name: rank.get(name, len(rank)))  # stable: first-seen among the rest
    return {**{name: by_category[name] for name in ordered}, ALL: overall}


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, whether it is met, and what misses it."""

    goal: str
    met: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"goal": self.goal, "met": self.met, "detail": self.detail}


def goals(outcomes: Sequence[Outcome], counted: dict[str, dict[str, Any]]) -> list[Goal]:
    """The goals of this module's docstring, judged on ``outcomes`` and their ``counted`` totals."""

    def ids(predicate: Any) -> list[str]:
        return [o.case.id for o in outcomes if predicate(o)]

    def missed(found: list[str]) -> str:
        shown = ", ".join(found[:8]) + (f", ... ({len(found)} in all)" if len(found) > 8 else "")
        return f"{len(found)}: {shown}" if found else "none"

    different = ids(lambda o: (not o.case.refusal or o.case.fails_at_run) and o.run == "DIFFERENT")
    accepted = ids(lambda o: o.case.refused_by_analysis and o.check == "ACCEPTED")
    refused_valid = ids(lambda o: not o.case.refusal and o.check == "REFUSED_BY_CHECK")
    short = [
        f"{category} {counts['equal_percent']}%"
        for category, counts in counted.items()
        if category != ALL
        and category not in EQUAL_GOAL_EXEMPT
        and counts["equal_percent"] is not None
        and counts["equal_percent"] < EQUAL_GOAL_PERCENT
    ]
    return [
        Goal("no case DIFFERENT (answered unlike Athena)", not different, missed(different)),
        Goal("no analysis refusal ACCEPTED by the check", not accepted, missed(accepted)),
        Goal("no value case refused by the check", not refused_valid, missed(refused_valid)),
        Goal(
            f"at least {EQUAL_GOAL_PERCENT:g}% EQUAL per category (but {', '.join(sorted(EQUAL_GOAL_EXEMPT))})",
            not short,
            ", ".join(short) or "all categories",
        ),
    ]
