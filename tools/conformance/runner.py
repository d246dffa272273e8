"""Running the cases: each statement on the local engine (the run) and through the SQL check (the check).

- **The run**: the statement on the local engine's DuckDB session
  (:class:`local.emulators.duckdb_engine.session.DuckDBSession`, the one :class:`DuckDBQueryEngine` runs every
  query on: prepared from Trino SQL, run with the session zone UTC, its values as Athena's ``VarCharValue`` text
  and its column types as Trino's), over the tables of ``data_dir`` (the sample ``flights`` after ``make data``).
  A value case is ``EQUAL`` when it answers one row of one column whose value and type are the expected ones
  (:mod:`.compare`), ``DIFFERENT`` when it answers anything else, ``REFUSED`` when the engine fails the query. A
  refusal case is ``REFUSED`` when the engine fails it (as Athena does) and ``DIFFERENT`` when it answers (for an
  execution error, :data:`~tools.conformance.cases.EXECUTION_ERRORS`, that answer is the difference that counts).
- **The check**: :func:`athena_sql.analyzer.check_query` with the sample table's columns (Trino types) and no
  parameters: ``REFUSED_BY_CHECK`` when it refuses the statement, ``ACCEPTED`` when not (what it could not judge
  counts as accepted, as the analyzer documents). A refusal case should be refused; a value case should not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.conformance.cases import Case
from tools.conformance.compare import same_type, same_value

__all__ = ["CHECK_STATUSES", "RUN_STATUSES", "Outcome", "run_cases", "sample_tables"]

RUN_STATUSES = ("EQUAL", "DIFFERENT", "REFUSED")
#: A local answer longer than this is cut in the report (an aggregate over the whole sample can be megabytes).
SHOWN_CHARS = 200
CHECK_STATUSES = ("REFUSED_BY_CHECK", "ACCEPTED")

#: Glue (Hive DDL) types of the sample's table -> Trino's (Athena engine v3 reads Glue ``timestamp`` as
#: ``timestamp(3)``, ``string`` as ``varchar``: https://docs.aws.amazon.com/athena/latest/ug/data-types.html).
_TRINO_OF_GLUE = {
    "int": "integer",
    "bigint": "bigint",
    "double": "double",
    "string": "varchar",
    "timestamp": "timestamp(3)",
}


def sample_tables() -> dict[str, dict[str, str]]:
    """The sample tables the statements may read, as the check takes them: table -> column -> Trino type."""
    from sample_data.flights import FLIGHTS_GLUE_COLUMNS, FLIGHTS_GLUE_PARTITION_KEYS, FLIGHTS_TABLE

    columns = (*FLIGHTS_GLUE_COLUMNS, *FLIGHTS_GLUE_PARTITION_KEYS)
    return {FLIGHTS_TABLE: {name: _TRINO_OF_GLUE[glue] for name, glue in columns}}


@dataclass(frozen=True)
class Outcome:
    """What one case gave: ``run`` (one of :data:`RUN_STATUSES`) with what the engine answered, and ``check``
    (one of :data:`CHECK_STATUSES`) with the check's error classes."""

    case: Case
    run: str
    check: str
    answer: dict[str, Any]
    check_errors: tuple[str, ...]
    check_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The case's entry of the report."""
        case = self.case
        expect: dict[str, Any] = {"error": case.error} if case.refusal else {"value": case.value, "type": case.type}
        entry: dict[str, Any] = {"id": case.id, "category": case.category, "sql": case.sql, "expect": expect}
        entry.update({"run": self.run, "check": self.check, "local": self.answer})
        check: dict[str, Any] = {"errors": list(self.check_errors)}
        if case.refusal:
            check["error_matches"] = case.error in self.check_errors
        if self.check_note:
            check["note"] = self.check_note
        entry["check_detail"] = check
        entry.update(case.extra)
        return entry


def run_cases(cases: Sequence[Case], *, data_dir: Path) -> Iterator[Outcome]:
    """Each case's outcome, in order (one DuckDB session for all; closed at the end)."""
    from local.emulators.duckdb_engine.session import DuckDBSession

    tables = sample_tables()
    session = DuckDBSession(data_dir)
    try:
        for case in cases:
            run, answer = _run(session, case)
            check, errors, note = _check(case, tables)
            yield Outcome(case, run, check, answer, errors, note)
    finally:
        session.close()


def _run(session: Any, case: Case) -> tuple[str, dict[str, Any]]:
    record, results = session.execute(case.sql, [])
    if results is None:
        error = (record.get("error") or {}).get("error_message") or record.get("outcome", "FAILED")
        code = error.split(":", 1)[0] if ":" in error else ""
        answer: dict[str, Any] = {"error": _shown(" ".join(str(error).split())), "error_code": code}
        if case.refusal:
            answer["error_matches"] = code == case.error
        return "REFUSED", answer
    columns, rows = results["columns"], results["rows"]
    if len(columns) != 1 or len(rows) != 1:
        shape = f"{len(rows)} row(s) of {len(columns)} column(s)"
        shown = [[_shown(cell) for cell in row] for row in rows[:3]]
        return "DIFFERENT", {"answered": shape, "types": [_type(c) for c in columns], "rows": shown}
    value, type_text = rows[0][0], _type(columns[0])
    answer = {"value": _shown(value), "type": type_text}
    if case.refusal:
        return "DIFFERENT", {**answer, "difference": f"answered; Athena refuses it ({case.error})"}
    assert case.type is not None  # a value case has a type (cases.py)
    value_ok, type_ok = same_value(case.value, case.type, value), same_type(case.type, type_text)
    if value_ok and type_ok:
        return "EQUAL", answer
    answer["difference"] = " and ".join(name for name, ok in (("value", value_ok), ("type", type_ok)) if not ok)
    return "DIFFERENT", answer


def _type(column: Mapping[str, Any]) -> str:
    """A result column's whole Trino type (``decimal(5,1)``, ``timestamp(3) with time zone``, ``array(integer)``),
    as the local engine derives it; Athena's ColumnInfo type name (``decimal``) when it gives none."""
    return str(column.get("trino_type") or column["type"])


def _shown(value: str | None) -> str | None:
    """``value``, cut to :data:`SHOWN_CHARS` characters with the length said."""
    if value is None or len(value) <= SHOWN_CHARS:
        return value
    return f"{value[:SHOWN_CHARS]}... ({len(value)} characters)"


def _check(case: Case, tables: Mapping[str, Mapping[str, str]]) -> tuple[str, tuple[str, ...], str]:
    from athena_sql.analyzer import check_query

    try:
        result = check_query(case.sql, tables=tables, parameters={})
    except Exception as exc:  # noqa: BLE001 - check_query never raises by contract; if it does, nothing was refused
        return "ACCEPTED", (), f"the check raised {type(exc).__name__}: {exc}"
    errors = tuple(d.error_class for d in result.refusals)
    note = "; ".join(f"{d.error_class}: {d.message}" for d in result.refusals)
    return ("REFUSED_BY_CHECK" if result.refused else "ACCEPTED"), errors, note
