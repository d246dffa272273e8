"""A job's ``query.sql`` at synth: named parameters to Athena's positional ``ExecutionParameters``, and its shape.

A job's SQL names its parameters (``:window_start``, ``:window_end``, ``:slot_time``, ``:window_first_date``,
``:window_last_date`` and the job's own constants, ``[parameters]`` in ``job.toml``). Athena only knows positional ``?`` placeholders, bound by
``StartQueryExecution``'s ``ExecutionParameters`` in order
(https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements.html), so at synth:

- the placeholders are found with sqlglot's Trino **tokenizer**, so ``:x`` or ``?`` inside a string literal
  or a comment is never counted (Trino has no other use for ``:`` outside them);
- each ``:name`` is replaced by ``?`` **in the user's own text** (offsets from the tokens), never by SQL
  regenerated from an AST, which could rewrite their Trino SQL; a name used twice gets two ``?`` and its
  value is repeated in :attr:`PreparedSql.parameter_order`;
- the result is parsed (Trino dialect) to report syntax errors at synth, and to read the output column
  names that value metrics may refer to.

sqlglot runs here only: the Lambda asset receives the prepared text and the parameter order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError, TokenError
from sqlglot.tokens import TokenType

from athena_refresh.checks import Labels

#: The parameters every job may use: the slot's window ``[window_start, window_end)`` and the slot's own
#: scheduled time, each bound as ``'YYYY-MM-DD HH:MM:SS'`` text (UTC) for ``CAST(:name AS timestamp)``; and the
#: UTC dates of the window's first and last instant (``window_end`` - 1 s), as ``'YYYY-MM-DD'`` text, for a
#: partition filter ``dt BETWEEN :window_first_date AND :window_last_date`` (docs/partitioning.md). The runtime's
#: list (``athena_refresh.catalog.BUILTIN_PARAMETERS``) is the same (tests/stacks/test_query_sql.py checks it).
BUILTIN_PARAMETERS = ("window_start", "window_end", "slot_time", "window_first_date", "window_last_date")
PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
MAX_PARAMETER_BYTES = 1024  # one constant's text (Athena: an execution parameter is at most 1024 characters)
DIALECT = "trino"


class QuerySqlError(ValueError):
    """The SQL cannot be prepared; ``problems`` lists every reason (each a complete sentence)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class PreparedSql:
    """The SQL as Athena receives it and what the runtime binds to it.

    ``text``: the user's text with each ``:name`` replaced by ``?``; ``parameter_order``: the name bound to
    each ``?``, in order (repeated names repeated); ``output_columns``: the names of the result columns as
    Athena reports them (an unnamed expression is ``_col<i>``), ``None`` when a ``*`` makes them unknown.
    """

    text: str
    parameter_order: tuple[str, ...]
    output_columns: tuple[str, ...] | None

    @property
    def used_parameters(self) -> frozenset[str]:
        return frozenset(self.parameter_order)


def prepare_sql(sql: str, *, defined: Iterable[str] = BUILTIN_PARAMETERS) -> PreparedSql:
    """Translate ``sql``'s named parameters to ``?`` and check it parses.

    ``defined``: the parameter names the job defines (the built-ins and its constants).

    Raises
    ------
    QuerySqlError
        With every problem found: an unterminated string or comment, a positional ``?`` (use names), a
        ``:`` not followed by a parameter name, a name the job does not define, SQL that does not parse
        as Trino, a statement that is not a single query.
    """
    if not sql.strip():
        raise QuerySqlError(["the query is empty"])
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql)
    except TokenError as exc:
        raise QuerySqlError([f"the SQL cannot be tokenized: {_first_line(exc)}"]) from exc
    problems: list[str] = []
    known = set(defined)
    pieces: list[str] = []
    order: list[str] = []
    position = 0
    skip_next = False
    for index, token in enumerate(tokens):
        if skip_next:
            skip_next = False
            continue
        if token.token_type == TokenType.PLACEHOLDER:
            problems.append(
                f"line {token.line}: a positional '?' placeholder; name the parameter instead"
                f" (:{', :'.join(BUILTIN_PARAMETERS)} or a [parameters] constant)"
            )
            continue
        if token.token_type != TokenType.COLON:
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        name = sql[following.start : following.end + 1] if following is not None else ""
        if following is None or following.start != token.end + 1 or not PARAMETER_NAME.match(name):
            problems.append(f"line {token.line}: ':' is not followed by a parameter name (e.g. :window_start)")
            continue
        if name not in known:
            problems.append(
                f"line {token.line}: parameter :{name} is not defined (defined: {', '.join(sorted(known))})"
            )
        pieces.append(sql[position : token.start])
        pieces.append("?")
        position = following.end + 1
        order.append(name)
        skip_next = True
    pieces.append(sql[position:])
    text = "".join(pieces)
    columns: tuple[str, ...] | None = None
    if not problems:
        columns, parse_problems = _shape(text)
        problems.extend(parse_problems)
    if problems:
        raise QuerySqlError(problems)
    return PreparedSql(text=text, parameter_order=tuple(order), output_columns=columns)


def output_columns(text: str) -> tuple[str, ...] | None:
    """The output column names of the single query in ``text`` as Athena reports them; ``None`` when they
    cannot be known at synth (a ``*``) or ``text`` is not one query."""
    columns, problems = _shape(text)
    return None if problems else columns


def _shape(text: str) -> tuple[tuple[str, ...] | None, list[str]]:
    """The output column names of the single query in ``text`` (``None`` with a ``*``), or the problems."""
    try:
        statements = [s for s in sqlglot.parse(text, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        return None, [f"the SQL does not parse as Trino: {_first_line(exc)}"]
    if len(statements) != 1:
        return None, [f"the file must hold exactly one statement, found {len(statements)}"]
    (statement,) = statements
    if not isinstance(statement, exp.Query):
        found = " ".join(text.split())[:60]
        return None, [f"the statement must be a query (SELECT or WITH ...), found: {found}"]
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in statement.selects):
        return None, []
    return tuple(_output_name(i, e) for i, e in enumerate(statement.selects)), []


def _output_name(index: int, expression: exp.Expr) -> str:
    """The result column's name as Athena reports it: the alias, the column's name, else ``_col<index>``."""
    if isinstance(expression, exp.Alias):
        return expression.alias
    if isinstance(expression, exp.Column):
        return expression.name
    return f"_col{index}"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def job_parameters(value: Any, labels: Labels, problems: list[str]) -> dict[str, str]:
    """``[parameters]`` of a job.toml: name -> the SQL literal text Athena binds as that ExecutionParameter (as
    written: ``"'AA'"``, ``"15"``, ``"DATE '2024-01-31'"``). Each problem (named with its file and line) goes to
    ``problems``; a parameter that is not a literal is refused: Athena puts the text into the statement as written,
    so ``UA`` would be read as a column name (https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements.html)."""
    if not isinstance(value, Mapping):
        problems.append(f'{labels.at("parameters")}: must be a table of name = "text", got {value!r}')
        return {}
    constants: dict[str, str] = {}
    for name, text in value.items():
        where = labels.at(f"parameters.{name}")
        if name in BUILTIN_PARAMETERS:
            problems.append(f"{where}: a built-in parameter (the runtime binds it per slot); choose another name")
        elif not PARAMETER_NAME.match(name):
            problems.append(f"{where}: a parameter name is a letter or '_' then letters, digits or '_' (at most 64)")
        elif not isinstance(text, str):
            problems.append(
                f'{where}: must be text (Athena binds it as a SQL literal, e.g. "\'AA\'" or "15"), got {text!r}'
            )
        elif not text.strip() or len(text.encode("utf-8")) > MAX_PARAMETER_BYTES:
            problems.append(f"{where}: must be 1 to {MAX_PARAMETER_BYTES} bytes of SQL literal text, got {text!r}")
        elif not is_literal_text(text):
            quoted = "'" + text.strip().replace("'", "''") + "'"
            problems.append(
                f"{where}: {text!r} is not a SQL literal, and Athena binds the text as written (it would be a"
                f' column name, or SQL); text is quoted: {name} = "{quoted}"; a number, true/false, NULL,'
                " DATE '...' or TIMESTAMP '...' are literals too"
            )
            constants[name] = text  # defined still: the query's :name is not reported as unknown too
        else:
            constants[name] = text
    return constants


def is_literal_text(text: str) -> bool:
    """Whether ``text`` is one Trino literal: a string, number (a negative one too), ``true``/``false``, ``NULL``,
    ``X'..'``, a typed literal (``DATE '...'``, ``TIMESTAMP '...'``, ``DECIMAL '...'``, ``CAST(<literal> AS type)``)
    or ``INTERVAL '1' DAY``."""
    try:
        node = sqlglot.parse_one(text, read=DIALECT)
    except SqlglotError:
        return False
    return is_literal_node(node)


def is_literal_node(node: exp.Expr | None) -> bool:
    """Whether a parsed expression is one literal (the forms :func:`is_literal_text` names): the job's constants at
    synth and the local engine's ExecutionParameters are judged by this one rule."""
    if isinstance(node, (exp.Literal, exp.Null, exp.Boolean, exp.HexString)):
        return True
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    if isinstance(node, exp.Cast):
        return isinstance(node.args.get("to"), exp.DataType) and is_literal_node(node.this)
    if isinstance(node, exp.Interval):
        unit = node.args.get("unit")
        return isinstance(node.this, exp.Literal) and (unit is None or isinstance(unit, exp.Var))
    return False
