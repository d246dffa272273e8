"""Why a slot did not succeed, in one shape for every reader: status, history, the results CLI, the read API, the
overview and a job's widget.

A FAILED or MISSED slot's history item carries ``reason`` (MISSED: ``capacity``, ``paused``, ``too_old``,
``overrun``, ``superseded``, ...) and ``error``, the JSON object its holder recorded. The objects this package
writes (:mod:`athena_refresh.errors`):

- a failed query (:meth:`QueryFailedError.as_dict`): ``state`` (FAILED, CANCELLED), ``reason`` (Athena's
  StateChangeReason) and ``error_message`` (``AthenaError.ErrorMessage``), both usually starting with Trino's error
  name, ``COLUMN_NOT_FOUND: line 1:8: Column 'dst' cannot be resolved``; ``error_category``/``error_type``
  (https://docs.aws.amazon.com/athena/latest/APIReference/API_AthenaError.html);
- a result or store error (:meth:`ResultTypeError.as_dict`, :meth:`ResultsStoreError.as_dict`): ``type`` (the
  exception's name) and ``error_message``;
- a miss: the detail the holder gave (``capacity``: ``waited_ms``, ``deferrals``, ``permits``).

:func:`describe_failure` reads any of them (and older or foreign objects: ``message``, ``error``) into a
:class:`Failure`: an error class and the full message. Readers show :meth:`Failure.summary` (cut to a line) and
keep the full text one command away (``athena-once results history`` / ``ops history --json``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SUMMARY_CHARS", "Failure", "describe_failure"]

#: The longest summary a table cell or a widget shows (the full message stays in the stored item).
SUMMARY_CHARS = 160
#: Trino's error names are upper snake case (``TYPE_MISMATCH``, ``COLUMN_NOT_FOUND``), first in Athena's messages.
_ERROR_NAME = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9_]{2,}):\s*(?P<rest>.*)$", re.DOTALL)
#: What a MISSED slot's reason means, for people (slotlock's and this package's reasons).
_MISSED = {
    "capacity": "no Athena capacity permit before the slot's maximum age",
    "paused": "the job was paused",
    "too_old": "the invocation came after the slot's maximum age",
    "overrun": "the previous slot's run was still holding the lease",
    "superseded": "a newer slot started before this one ran",
}


@dataclass(frozen=True)
class Failure:
    """A FAILED or MISSED slot's reason: ``status`` (``FAILED``/``MISSED``), ``error_class`` (Trino's error name,
    ``CANCELLED``, the exception's name, or the MISSED reason) and ``message`` (the full text; may be empty)."""

    status: str
    error_class: str
    message: str

    def summary(self, limit_chars: int = SUMMARY_CHARS) -> str:
        """``error_class: message`` on one line, cut to ``limit_chars`` characters (``...`` marks a cut)."""
        text = " ".join(f"{self.error_class}: {self.message}".split()) if self.message else self.error_class
        return text if len(text) <= limit_chars else text[: max(1, limit_chars - 3)].rstrip() + "..."

    @property
    def failing(self) -> bool:
        """Whether the job counts as failing for it: FAILED for any reason, MISSED for any reason but ``paused``."""
        return not (self.status == "MISSED" and self.error_class == "paused")

    def as_dict(self) -> dict[str, Any]:
        """``{"status", "error_class", "message", "summary", "failing"}`` (JSON-safe)."""
        return {
            "status": self.status,
            "error_class": self.error_class,
            "message": self.message,
            "summary": self.summary(),
            "failing": self.failing,
        }


def describe_failure(status: Any, reason: Any = None, error: Any = None) -> Failure | None:
    """The reason of a slot whose ``status`` is FAILED or MISSED (any case), from its history item's ``reason`` and
    ``error``; ``None`` for any other status. Never raises: an unexpected ``error`` shape gives what can be read."""
    if not isinstance(status, str) or status.upper() not in ("FAILED", "MISSED"):
        return None
    status = status.upper()
    detail: Mapping[str, Any] = error if isinstance(error, Mapping) else {}
    if status == "MISSED":
        name = reason if isinstance(reason, str) and reason else "missed"
        return Failure(status, name, _missed_message(name, detail))
    message = _text(detail.get("error_message")) or _text(detail.get("message")) or _text(detail.get("reason"))
    if not message and isinstance(error, str):
        message = error
    matched = _ERROR_NAME.match(message)
    if matched:
        return Failure(status, matched.group("name"), matched.group("rest").strip())
    named = _text(detail.get("type")) or _text(detail.get("error_type_name"))
    if named:
        return Failure(status, named, message)
    state = _text(detail.get("state"))
    if state and state != "FAILED":
        return Failure(status, state, message)  # CANCELLED
    if isinstance(reason, str) and reason:
        return Failure(status, reason, message)  # e.g. ``assertion``
    return Failure(status, "QUERY_FAILED" if "query_execution_id" in detail else "FAILED", message)


def _missed_message(reason: str, detail: Mapping[str, Any]) -> str:
    meaning = _MISSED.get(reason, "")
    facts = []
    waited_ms = detail.get("waited_ms")
    if isinstance(waited_ms, int) and not isinstance(waited_ms, bool):
        facts.append(f"waited {waited_ms / 1000:.1f} s")
    deferrals = detail.get("deferrals")
    if isinstance(deferrals, int) and not isinstance(deferrals, bool) and deferrals:
        facts.append(f"given back {deferrals} time{'s' if deferrals != 1 else ''}")
    permits = detail.get("permits")
    if isinstance(permits, int) and not isinstance(permits, bool):
        facts.append(f"{permits} permits")
    message = _text(detail.get("message")) or _text(detail.get("error_message"))
    parts = [part for part in (meaning, ", ".join(facts), message) if part]
    return "; ".join(parts)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
