"""The SQL check before the run: what :func:`athena_sql.analyzer.check_query` refuses, the local engine refuses in
the check's words, so that ``check`` and ``run`` never disagree about a statement Athena fails.

The engine receives what StartQueryExecution receives: the statement with positional ``?`` placeholders and the
ExecutionParameters (SQL literal text). Athena binds each parameter as the literal it is, so the check reads the
statement with each ``?`` replaced by its parameter's text; a position the check reports is mapped back to the
statement's own text (a refusal inside a parameter is reported at its ``?``). The first refusal in text order is the
one reported (Trino stops at its first error; an analysis error before an error of evaluating a constant, which
Trino would raise only when running), as Trino words it: ``CODE: line L:C: message`` for an analysis error
(io/trino/spi/TrinoException's location prefix, trinodb/trino@6f7aadf5a9115ec244aac372e07df5a481a4907f), ``CODE:
message`` for one Trino raises while executing (:data:`RUN_TIME_ERRORS`: a constant ``17 / 0``). What the
check says it could not decide (its notes) is not a refusal.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from athena_sql.analyzer import check_query
from athena_sql.diagnostics import CheckResult, Diagnostic
from athena_sql.types import parse_type

from .trino_tree import Refused

__all__ = ["RUN_TIME_ERRORS", "Checked", "check_statement", "result_types"]

logger = logging.getLogger("local.emulators.duckdb_engine.engine")

#: Trino's errors of evaluating an expression (a constant one the check finds before running): Trino raises them
#: while executing, without a location (io/trino/spi/StandardErrorCode.java).
RUN_TIME_ERRORS = frozenset(
    {"DIVISION_BY_ZERO", "INVALID_CAST_ARGUMENT", "INVALID_FUNCTION_ARGUMENT", "NUMERIC_VALUE_OUT_OF_RANGE"}
)


@dataclass(frozen=True)
class Checked:
    """The check's result for one statement, and its first refusal as the engine's :class:`Refused` (None: not
    refused)."""

    result: CheckResult
    refusal: Refused | None


def check_statement(sql: str, parameters: Sequence[str], tables: Mapping[str, Mapping[str, str]]) -> Checked:
    """Check `sql` (``?`` placeholders bound to `parameters`, Athena's ExecutionParameters) against `tables`
    (table -> column -> Trino type text). A placeholder count that differs from the parameter count is not judged
    here (the engine refuses it: INVALID_PARAMETER_USAGE)."""
    text, segments = _inlined(sql, parameters)
    frozen = tuple(sorted((table, tuple(sorted(columns.items()))) for table, columns in tables.items()))
    try:
        result = _checked(text, frozen)
    except Exception:  # check_query never raises by contract; if it does, the check decided nothing: run
        logger.exception("the SQL check failed on a statement; running it unchecked")
        return Checked(CheckResult(), None)
    if not result.refusals:
        return Checked(result, None)
    analysis = [r for r in result.refusals if r.error_class not in RUN_TIME_ERRORS]
    first = analysis[0] if analysis else result.refusals[0]  # Trino analyzes the whole statement before running it
    if first.error_class in RUN_TIME_ERRORS:
        return Checked(result, Refused(first.error_class, first.message))
    line, column = _original_position(sql, text, segments, first)
    return Checked(result, Refused(first.error_class, f"line {line}:{column}: {first.message}"))


@functools.lru_cache(maxsize=256)
def _checked(text: str, tables: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> CheckResult:
    """The check of one statement text against `tables` (frozen), remembered: the racers of a slot, retries and
    re-runs send the same text (the check takes tens of milliseconds)."""
    return check_query(text, tables={table: dict(columns) for table, columns in tables}, parameters={})


#: (start in the checked text, end in it (exclusive), offset of the ``?`` in the statement) per inlined parameter
_Segment = tuple[int, int, int]


def _inlined(sql: str, parameters: Sequence[str]) -> tuple[str, list[_Segment]]:
    """`sql` with each ``?`` token replaced by its parameter's text, and where each replacement lies."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("trino").tokenize(sql)
    except SqlglotError:
        return sql, []
    marks = [t for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    if not marks or len(marks) != len(parameters):
        return sql, []
    pieces: list[str] = []
    segments: list[_Segment] = []
    cursor = 0
    length = 0
    for mark, value in zip(marks, parameters, strict=True):
        pieces.append(sql[cursor : mark.start])
        length += mark.start - cursor
        segments.append((length, length + len(value), mark.start))
        pieces.append(value)
        length += len(value)
        cursor = mark.end + 1
    pieces.append(sql[cursor:])
    return "".join(pieces), segments


def _original_position(sql: str, text: str, segments: list[_Segment], refusal: Diagnostic) -> tuple[int, int]:
    """The 1-based (line, column) in `sql` of a refusal located in the checked `text`."""
    if not segments:
        return refusal.line, refusal.column
    lines = text.split("\n")
    line_index = min(max(refusal.line, 1), len(lines)) - 1
    offset = sum(len(lines[i]) + 1 for i in range(line_index)) + refusal.column - 1
    original = offset
    for start, end, mark in segments:
        if offset >= end:
            original = mark + 1 + (offset - end)
        elif offset >= start:
            original = mark
            break
        else:
            break
    line = sql.count("\n", 0, original) + 1
    column = original - (sql.rfind("\n", 0, original) + 1) + 1
    return line, column


def result_types(checked: Sequence[str | None], engine: Sequence[str]) -> tuple[str, ...]:
    """Per result column, its Trino type: the check's where it derived one (:mod:`athena_sql.typecheck`: Trino's
    typing rules, bounded ``varchar(n)`` and ``char(n)`` of function results, ``array(varchar(x))``, decimal
    arithmetic, lambdas' bodies), else the engine's (`engine`: what :mod:`.trino_semantics` and DuckDB's result give).
    The values are rendered by the type this gives (:func:`.values._render`: a timestamp's fraction digits)."""
    ours = list(checked) if len(checked) == len(engine) else [None] * len(engine)
    return tuple(
        mine if mine is not None and parse_type(mine) is not None else theirs
        for mine, theirs in zip(ours, engine, strict=True)
    )
