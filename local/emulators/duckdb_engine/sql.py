"""SQL preparation: Trino text + ExecutionParameters -> DuckDB SQL (no string formatting of values).

- **SQL**: Trino (Athena engine v3) is parsed with sqlglot and generated as DuckDB SQL. Catalog and database
  qualifiers are dropped (Athena's ``QueryExecutionContext`` plays that role); the data tables the query
  reads are returned with the SQL (the engine exposes them as DuckDB views). Only one SELECT (or other
  query) statement per execution, as in Athena.
- **ExecutionParameters** (Athena semantics: SQL literal text, strings with their quotes) are never
  formatted into the SQL string. The query is parsed; every ``?`` placeholder is replaced, in source
  order, by the parsed literal; then DuckDB SQL is generated from the tree. A value that is not a literal
  (a literal, ``NULL``, ``true``/``false``, a negative number, ``TIMESTAMP '...'``/``DATE '...'``/``CAST``
  of a literal, ``INTERVAL '1' DAY``, ``X'AB'``), or a placeholder count that differs from the parameter
  count, makes the query FAILED (user error), as Athena does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import sqlglot
from sqlglot import exp
from sqlglot.dialects.trino import Trino
from sqlglot.errors import ErrorLevel, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import TokenType

from stacks.query_sql import is_literal_node

__all__ = ["BoundQuery", "PreparedQuery", "QueryRejected", "bind_query", "prepare_query", "translate_query"]

_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*m")


class QueryRejected(Exception):
    """The query cannot run (user error): it ends FAILED with ``error_code: message`` as its reason."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code


class _PositionalTrinoParser(Trino.Parser):  # type: ignore[misc, name-defined]
    """Trino's parser, except that each ``?`` placeholder keeps its source position (``meta["start"]``).

    The tree's own order is not the text's order (``WITH`` is visited after the main query), and
    ExecutionParameters bind in text order.
    """

    PLACEHOLDER_PARSERS: ClassVar[dict[Any, Any]] = {
        **Trino.Parser.PLACEHOLDER_PARSERS,
        TokenType.PLACEHOLDER: lambda self: self.expression(exp.Placeholder(), token=self._prev),
    }


@dataclass(frozen=True)
class PreparedQuery:
    """DuckDB SQL generated from the bound tree, the data tables it reads (lowercase, CTEs excluded), and the
    bound tree itself (Trino, parameters as literals, identifiers normalized, no catalog/database qualifiers):
    :mod:`.scan` reads it to account the bytes scanned. Do not modify the tree."""

    duckdb_sql: str
    tables: tuple[str, ...]
    tree: exp.Query | None = field(default=None, repr=False, compare=False)
    #: Per output column, the time zone its ``timestamp with time zone`` values print in (None: UTC / not one).
    output_zones: tuple[str | None, ...] = ()
    #: Per output column, its Trino type where DuckDB's loses a parameter (``timestamp(0)``; None: DuckDB's).
    output_types: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class BoundQuery:
    """The bound Trino tree (see :class:`PreparedQuery`) and the data tables it reads, before translation."""

    tree: exp.Query
    tables: tuple[str, ...]


def prepare_query(
    sql: str, parameters: Sequence[str], schema: dict[str, dict[str, str]] | None = None
) -> PreparedQuery:
    """Parse Trino `sql`, bind `parameters` to its ``?`` placeholders in source order, rewrite the tree to answer
    as Trino (:mod:`.trino_semantics`; `schema`: table -> column -> Trino type, for typing columns), generate
    DuckDB SQL.

    Raises
    ------
    QueryRejected
        Syntax error, not exactly one query statement, a named placeholder, a parameter count that differs
        from the placeholder count, a parameter that is not a literal, SQL sqlglot cannot translate, a function
        Athena does not have (FUNCTION_NOT_FOUND) or a construct only Athena reproduces (NOT_SUPPORTED).
    """
    return translate_query(bind_query(sql, parameters), schema)


def translate_query(bound: BoundQuery, schema: dict[str, dict[str, str]] | None = None) -> PreparedQuery:
    """DuckDB SQL for a bound query, rewritten to answer as Trino. :raises QueryRejected: as :func:`prepare_query`."""
    from .trino_semantics import Refused, translate

    try:
        translation = translate(bound.tree, schema)
    except Refused as exc:
        raise QueryRejected(exc.error_code, exc.message) from exc
    try:
        duckdb_sql = translation.tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        reason = re.sub(r"\s*(?:when targeting|to) DuckDB", "", _sqlglot_message(exc))
        raise QueryRejected(
            "NOT_SUPPORTED", f"runs on Athena only: {reason}; the local engine cannot translate it"
        ) from exc
    return PreparedQuery(
        duckdb_sql=duckdb_sql,
        tables=bound.tables,
        tree=bound.tree,
        output_zones=translation.output_zones,
        output_types=translation.output_types,
    )


def bind_query(sql: str, parameters: Sequence[str]) -> BoundQuery:
    """Parse Trino `sql` and bind `parameters` to its ``?`` placeholders in source order (no translation).

    :raises QueryRejected: as :func:`prepare_query`, translation aside."""
    dialect = Trino()
    try:
        tokens = dialect.tokenize(sql)
        _refuse_foreign_syntax(tokens)
        parsed = _PositionalTrinoParser(dialect=dialect).parse(tokens, sql)
        statements = [statement for statement in parsed if statement is not None]
    except SqlglotError as exc:
        raise QueryRejected("SYNTAX_ERROR", _sqlglot_message(exc)) from exc
    if len(statements) != 1:
        raise QueryRejected("SYNTAX_ERROR", f"expected exactly one SQL statement, found {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise QueryRejected(
            "NOT_SUPPORTED", f"the local DuckDB engine runs queries (SELECT) only, not {type(tree).__name__}"
        )

    placeholders = list(tree.find_all(exp.Placeholder))
    if any(p.this is not None or "start" not in p.meta for p in placeholders):
        raise QueryRejected("INVALID_PARAMETER_USAGE", "only positional '?' parameters are supported")
    placeholders.sort(key=lambda p: p.meta["start"])
    if len(placeholders) != len(parameters):
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"Incorrect number of parameters: expected {len(placeholders)} but found {len(parameters)}",
        )
    for position, (placeholder, text) in enumerate(zip(placeholders, parameters, strict=True), start=1):
        placeholder.replace(_parse_parameter(position, text))

    group = tree.args.get("group")
    if isinstance(group, exp.Group) and group.args.get("all") and not group.expressions:
        raise QueryRejected(
            "SYNTAX_ERROR", "GROUP BY ALL without grouping elements is not Trino syntax: name the columns"
        )
    tree = normalize_identifiers(tree, dialect="trino")  # unquoted names are lowercase (Athena's column names)
    _name_unnamed_columns(tree)
    cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    tables: list[str] = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # table functions, UNNEST, ...: DuckDB decides (and cannot read outside data_dir)
        table.set("catalog", None)  # Athena resolves them from QueryExecutionContext
        table.set("db", None)
        name = table.name.lower()
        if name not in cte_names and name not in tables:
            tables.append(name)
    return BoundQuery(tree=tree, tables=tuple(tables))


def _refuse_foreign_syntax(tokens: Sequence[Any]) -> None:
    """Syntax sqlglot accepts and Trino does not (its grammar, SqlBase.g4): ``::`` casts, ILIKE, an unquoted
    interval quantity (``INTERVAL 1 DAY``). :raises QueryRejected: SYNTAX_ERROR at the token's line and column."""
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        foreign = token.token_type in (TokenType.DCOLON, TokenType.ILIKE) or (
            token.token_type == TokenType.INTERVAL
            and following is not None
            and following.token_type == TokenType.NUMBER
        )
        if foreign:
            shown = following if token.token_type == TokenType.INTERVAL else token
            column = max(1, shown.col - len(shown.text) + 1)
            raise QueryRejected("SYNTAX_ERROR", f"line {shown.line}:{column}: mismatched input '{shown.text}'")


def _parse_parameter(position: int, text: str) -> exp.Expr:
    """One ExecutionParameter as a literal expression; anything else is rejected."""
    try:
        node = sqlglot.parse_one(text, read="trino")
    except SqlglotError as exc:
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"execution parameter {position} ({text!r}) is not a SQL literal: {_sqlglot_message(exc)}",
        ) from exc
    if not is_literal_node(node):
        raise QueryRejected(
            "INVALID_PARAMETER_USAGE",
            f"execution parameter {position} ({text!r}) is not a SQL literal (got {type(node).__name__});"
            " pass literal text such as '2013-01-01 00:00:00' (with quotes), 42, -1.5, TIMESTAMP '...', NULL",
        )
    for sub in node.walk():
        sub.comments = None
    return node


def _name_unnamed_columns(tree: exp.Query) -> None:
    """Trino names an unaliased output expression ``_col<position>`` (DuckDB would use its text)."""
    if not isinstance(tree, exp.Select) or any(isinstance(e, exp.Star) or e.is_star for e in tree.expressions):
        return
    for position, projection in enumerate(tree.expressions):
        if not isinstance(projection, (exp.Alias, exp.Column)):
            projection.replace(exp.alias_(projection.copy(), f"_col{position}"))


def _sqlglot_message(exc: SqlglotError) -> str:
    """sqlglot's error text without its ANSI underline codes, on one line (``line 1:8: ...`` as Trino)."""
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        text = f"line {first.get('line')}:{first.get('col')}: {first.get('description')}"
    else:
        text = str(exc)
    return " ".join(_ANSI_RE.sub("", text).split())
