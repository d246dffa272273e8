"""The one report writer of the local scenario harnesses (demo, chaos, capacity).

Each harness builds its report as a plain dict (the keys are documented with the harness: docs/local.md) and
hands it here; the files look the same whichever harness wrote them:

- ``<name>-report.json`` (:func:`write_report`): the report as indented JSON, one trailing newline, values JSON
  cannot hold (paths, datetimes) written as ``str(value)``; ASCII only (``json.dumps``' default escaping).
- ``<workdir>/history.jsonl`` (:func:`write_history`): the fake Lambda service's history, one JSON object per
  line, in the order recorded; read back by ``local.scenario.checker.history`` readers and by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

HISTORY_FILE = "history.jsonl"
"""The history file's name inside a harness's working directory."""


def report_text(report: dict[str, Any]) -> str:
    """The text of a report file: ``report`` as JSON indented by 2, non-JSON values as ``str``, then a newline."""
    return json.dumps(report, indent=2, default=str) + "\n"


def write_report(path: Path, report: dict[str, Any]) -> Path:
    """Write ``report`` to ``path`` (creating its directory) through a ``.tmp`` sibling and a rename, so a reader
    never sees half a report; returns ``path``. Raises ``OSError`` when the directory or file cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(report_text(report), encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_history(workdir: Path, history: Iterable[dict[str, Any]]) -> None:
    """Write ``history`` (the service's events, dicts) to ``workdir/history.jsonl``, one JSON line each, non-JSON
    values as ``str``. Best effort: called while a harness shuts down, so an ``OSError`` is swallowed."""
    with contextlib.suppress(OSError):
        (workdir / HISTORY_FILE).write_text(
            "".join(json.dumps(e, default=str) + "\n" for e in history), encoding="utf-8"
        )


__all__ = ["HISTORY_FILE", "report_text", "write_history", "write_report"]
