"""The goals of a ``make capacity`` run (:mod:`local.capacity.report`): each ``{"pass": bool | None, ...}`` with the
value it judged; the run fails when one does not pass (``None``: not judged, e.g. a goal that needs the negative
control when the run had none, or the second deployment when it had none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The most DynamoDB requests the semaphore may add to a winner's slot when no one waits (one BatchGetItem of the
#: permits and the tickets item, one conditional UpdateItem of a permit): docs/protocol.md, "Capacity semaphore".
MAX_ADDED_REQUESTS = 2


def goals(
    report: Mapping[str, Any], main: Mapping[str, Any], second: Mapping[str, Any] | None, added: int | None
) -> dict[str, dict[str, Any]]:
    """Each goal's verdict (``pass``) with the value it judged. ``main``: the budgeted deployment's figures (with the
    checker's verdict over both deployments on its budget), ``second``: the second deployment's (``None``: none)."""
    budget = report["budget"]
    check = main["capacity_check"]
    control = report["negative_control"]
    return {
        "max_active_queries_within_budget": {
            "pass": main["max_active_queries"] <= budget,
            "value": main["max_active_queries"],
            "limit": budget,
        },
        "no_too_many_requests": {"pass": main["too_many_requests"] == 0, "value": main["too_many_requests"]},
        "every_slot_committed_once": _committed_once(main),
        "failure_queue_empty": {"pass": main["failure_queue"] == 0, "value": main["failure_queue"]},
        "second_deployment_committed_once": {"pass": None, "skipped": "no second deployment (--second-jobs 0)"}
        if second is None
        else {
            **_committed_once(second),
            "pass": _committed_once(second)["pass"] and second["failure_queue"] == 0,
            "failure_queue": second["failure_queue"],
        },
        "capacity_checker": {
            "pass": not check["violations"],
            "violations_by_check": check["violations_by_check"],
            "examples": check["violations"][:5],
        },
        "queries_within_max_query_active": {
            "pass": main["longest_query_active_s"] <= report["max_query_active_s"],
            "value": main["longest_query_active_s"],
            "limit": report["max_query_active_s"],
        },
        "semaphore_adds_at_most_2_requests": _unless_no_control(
            control,
            {"pass": added is not None and added <= MAX_ADDED_REQUESTS, "value": added, "limit": MAX_ADDED_REQUESTS},
        ),
        "negative_control_meets_too_many_requests": _unless_no_control(
            control,
            {
                "pass": control is not None and control["too_many_requests"] > 0,
                "value": (control or {}).get("too_many_requests"),
            },
        ),
        "negative_control_caught_by_checker": _caught_by_checker(report, control),
        "no_harness_error": {"pass": not report["harness_errors"], "value": len(report["harness_errors"])},
    }


def _committed_once(figures: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "pass": not figures["slot_problems"]
        and figures["slots_committed_once"] + figures["missed_capacity"] == figures["slots"],
        "value": figures["slots_committed_once"],
        "slots": figures["slots"],
        "missed_capacity": figures["missed_capacity"],
        "problems": figures["slot_problems"][:10],
    }


def _caught_by_checker(report: Mapping[str, Any], control: Mapping[str, Any] | None) -> dict[str, Any]:
    """The checker, judging the negative control against the budget it lacked, reports ``capacity_exceeded``: not
    judged when Athena's quota itself keeps the queries within the budget (``--quota`` at or below ``--budget``)."""
    if control is not None and report["quota"]["active_queries"] <= report["budget"]:
        return {"pass": None, "skipped": "Athena's quota is not above the budget: the control cannot exceed it"}
    violations = (control or {}).get("checker_violations_by_check") or {}
    return _unless_no_control(
        control, {"pass": violations.get("capacity_exceeded", 0) > 0, "violations_by_check": violations}
    )


def _unless_no_control(control: Mapping[str, Any] | None, goal: dict[str, Any]) -> dict[str, Any]:
    """A goal that needs the negative control: not judged (``pass`` None) when the run had none (``--no-control``)."""
    if control is None:
        return {"pass": None, "skipped": "no negative control (--no-control)"}
    return goal


__all__ = ["MAX_ADDED_REQUESTS", "goals"]
