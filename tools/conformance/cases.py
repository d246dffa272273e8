"""The cases of a conformance corpus: a JSON list read, validated and turned into :class:`Case` objects.

A case is one of (JSON)::

    {"id": "math-div-int", "category": "arithmetic", "sql": "SELECT 7 / 2",
     "expect": {"value": 3, "type": "integer"}, "source": {...}}        a statement answering one row, one column
    {"id": "habit-cast-colons", "category": "habits", "sql": "SELECT '1'::integer",
     "expect": {"error": "SYNTAX_ERROR"}, "source": {...}}                 a statement Athena refuses

``id`` (unique across the files), ``category`` and ``sql`` are non-empty strings; ``expect`` holds either ``value``
(any JSON: null, a boolean, a number, a string, a list or an object) and ``type`` (Trino's type text, ``bigint``,
``decimal(3,1)``, ``varchar(13)``, ``timestamp(3) with time zone``), or ``error`` (a Trino error code in upper
case, ``TYPE_MISMATCH``, as in Trino's ``io.trino.spi.StandardErrorCode``). Any other key (``source``, ``note``)
is kept as given and copied into the report.

A refusal whose code is one of :data:`EXECUTION_ERRORS` (``DIVISION_BY_ZERO``, ``INVALID_CAST_ARGUMENT`` ...) is
one Trino raises while **executing** the statement (the analysis accepts it): it is the local run that must fail
it, and the check need not refuse it. Every other code is an analysis error (``SYNTAX_ERROR``, ``TYPE_MISMATCH``,
``FUNCTION_NOT_FOUND`` ...), which the check must refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EXECUTION_ERRORS", "Case", "CasesError", "load_cases"]

#: Trino error codes raised while executing, not analysing (io.trino.spi.StandardErrorCode; the function tests
#: assert them on ``evaluate``: core/trino-main/src/test/java/io/trino/type/TestIntegerOperators.java).
EXECUTION_ERRORS = frozenset(
    {
        "DIVISION_BY_ZERO",
        "INVALID_CAST_ARGUMENT",
        "INVALID_FUNCTION_ARGUMENT",
        "NUMERIC_VALUE_OUT_OF_RANGE",
        "INVALID_ARGUMENTS",
        "GENERIC_USER_ERROR",
        "INVALID_JSON_LITERAL",
    }
)

_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]*")


class CasesError(Exception):
    """A cases file that cannot be used (unreadable, not JSON, or a case of the wrong shape): one line."""


@dataclass(frozen=True)
class Case:
    """One case. ``error`` is set for a refusal case (then ``value``/``type`` are unused), else ``type`` is."""

    id: str
    category: str
    sql: str
    value: Any = None
    type: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def refusal(self) -> bool:
        """True when Athena refuses the statement (the case expects an error)."""
        return self.error is not None

    @property
    def fails_at_run(self) -> bool:
        """True for a refusal Trino raises while executing (:data:`EXECUTION_ERRORS`): the local run must fail."""
        return self.error in EXECUTION_ERRORS

    @property
    def refused_by_analysis(self) -> bool:
        """True for a refusal of Trino's analysis (syntax, types, functions...): the check must refuse it."""
        return self.error is not None and self.error not in EXECUTION_ERRORS


def load_cases(paths: Sequence[Path]) -> list[Case]:
    """Every case of ``paths`` in file order.

    :raises CasesError: a file unreadable or not JSON, not a list, a case without a required key or of the
        wrong type, or an ``id`` seen twice; the message names the file and the case.
    """
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for path in paths:
        for case in _load_file(path):
            if case.id in seen:
                raise CasesError(f"{path}: case {case.id!r}: id already used (in {seen[case.id]})")
            seen[case.id] = path
            cases.append(case)
    return cases


def _load_file(path: Path) -> list[Case]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except OSError as exc:
        raise CasesError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CasesError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise CasesError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from exc
    except _NotJsonConstant as exc:
        raise CasesError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(document, list):
        raise CasesError(f"{path}: expected a JSON list of cases, got {type(document).__name__}")
    return [_case(path, position, item) for position, item in enumerate(document, start=1)]


class _NotJsonConstant(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a cases file: Python's json reads them, JSON has no such value."""


def _no_constant(name: str) -> Any:
    raise _NotJsonConstant(f'{name} is not a JSON value (write the string "{name}" for a double)')


def _case(path: Path, position: int, item: Any) -> Case:
    where = f"{path}: case {position}"
    if not isinstance(item, dict):
        raise CasesError(f"{where}: expected an object, got {type(item).__name__}")
    if isinstance(item.get("id"), str) and item["id"]:
        where = f"{path}: case {item['id']!r}"
    for key in ("id", "category", "sql"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise CasesError(f"{where}: {key!r} must be a non-empty string")
    expect = item.get("expect")
    if not isinstance(expect, dict):
        raise CasesError(f"{where}: 'expect' must be an object with 'value' and 'type', or 'error'")
    extra = {k: v for k, v in item.items() if k not in ("id", "category", "sql", "expect")}
    base: dict[str, Any] = {"id": item["id"], "category": item["category"], "sql": item["sql"], "extra": extra}
    if "error" in expect:
        code = expect["error"]
        if set(expect) != {"error"} or not isinstance(code, str) or not _ERROR_CODE.fullmatch(code):
            raise CasesError(f"{where}: 'expect' with 'error' holds only a Trino error code such as TYPE_MISMATCH")
        return Case(**base, error=code)
    if set(expect) != {"value", "type"}:
        raise CasesError(f"{where}: 'expect' must hold exactly 'value' and 'type' (or 'error'), got {sorted(expect)}")
    if not isinstance(expect["type"], str) or not expect["type"].strip():
        raise CasesError(f"{where}: 'expect.type' must be Trino's type text, e.g. 'bigint' or 'decimal(3,1)'")
    return Case(**base, value=expect["value"], type=expect["type"])
