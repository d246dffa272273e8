"""The check of one query against Athena engine v3's rules: syntax, functions, types, aggregation.

The order is Trino's: the text must tokenize and parse as Trino's grammar (:mod:`athena_sql.syntax`: sqlglot parses
leniently, so syntax of other dialects is found in the tokens first), then the analysis of the tree: names and types
of every expression (:mod:`athena_sql.typecheck`, with the function list :mod:`athena_sql.functions` and Trino's types
and coercions :mod:`athena_sql.types`) and the aggregation rules (:mod:`athena_sql.aggregation`). Trino stops at its
first error; this check reports every refusal it finds, in text order, so that one ``check`` shows all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from athena_sql import aggregation, forms, typecheck
from athena_sql.diagnostics import CheckResult, Diagnostic, Unchecked
from athena_sql.source import Source
from athena_sql.syntax import syntax_refusals

__all__ = ["check_query"]

DIALECT = "trino"


def check_query(
    sql: str,
    *,
    tables: Mapping[str, Mapping[str, str]],
    parameters: Mapping[str, str],
) -> CheckResult:
    """Check ``sql`` (the text of query.sql, named ``:parameters`` included) as Athena engine v3 would.

    ``tables``: table name (lowercase) -> column name (lowercase) -> Trino type text (``varchar``, ``bigint``,
    ``timestamp(3)``, ``array(varchar)`` ...; Glue types already converted). ``parameters``: parameter name ->
    the SQL literal text Athena receives as its ExecutionParameter (``'2013-01-01 00:00:00'``: a varchar literal,
    which is how Athena binds every window parameter).

    Returns every refusal in text order, and what was not checked. Never raises for the user's SQL.
    """
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql)
    except TokenError as exc:
        return CheckResult(refusals=(_token_refusal(sql, exc),))
    source = Source(sql, tokens)
    try:
        refusals = syntax_refusals(source)
    except _OUR_LIMITS as exc:
        return CheckResult(unchecked=(_not_analyzed(exc),))
    if refusals:  # sqlglot may have rewritten or misread what Trino refuses: the tree is not judged
        return CheckResult(refusals=tuple(refusals))
    gap = _sqlglot_gap(source)
    if gap == "apply(...)":
        sql, gap = _renamed_apply(source), None  # same length: every offset stays the user's
    try:
        statements = _parse(sql) if gap is None else [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except ParseError as exc:
        if gap is not None:
            reason = f"sqlglot cannot parse Trino's {gap} here; the query was not checked"
            return CheckResult(unchecked=(Unchecked(1, 1, gap, reason),))
        if _incomplete(str((exc.errors or [{}])[0].get("description", ""))) == "lambda":
            # Trino's grammar has lambdas of no parameter (``() -> x``), sqlglot does not: its limit, not the user's
            reason = "sqlglot cannot parse a lambda without parameters; the query was not checked"
            return CheckResult(unchecked=(Unchecked(1, 1, "() -> ...", reason),))
        return CheckResult(refusals=(_parse_refusal(source, exc),))
    except SqlglotError as exc:
        return CheckResult(refusals=(Diagnostic(1, 1, "SYNTAX_ERROR", "", f"does not parse: {_first(exc)}"),))
    except RecursionError:
        return CheckResult(unchecked=(Unchecked(1, 1, "query", "nested too deeply for the check to parse"),))
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        return CheckResult(
            unchecked=(Unchecked(1, 1, "statement", "not a single query (synth refuses it; nothing else checked)"),)
        )
    statement = statements[0]
    try:
        source.locate_placeholders(statement)
        typed = typecheck.analyze(statement, source, tables=tables, parameters=parameters)
        found = [
            *typed.refusals,
            *aggregation.refusals(
                statement, source, typed.functions, typed.refused_calls, typed.outer_columns, typed.stars
            ),
            *forms.literals(source),
        ]
        unchecked = list(typed.unchecked)
    except _OUR_LIMITS as exc:
        return CheckResult(unchecked=(_not_analyzed(exc),))
    unique = {(d.line, d.column, d.error_class, d.message): d for d in found}
    ordered = sorted(unique.values(), key=lambda d: (d.line, d.column))
    outputs = tuple(None if t is None else str(t) for t in typed.output_types)
    return CheckResult(
        refusals=tuple(ordered),
        unchecked=tuple(sorted(unchecked, key=lambda u: (u.line, u.column))),
        output_types=outputs,
    )


#: What a construct the analyzer does not follow may raise: our limit, never the user's error. What could not be
#: analyzed is said (an Unchecked), and counts as not refused.
_OUR_LIMITS = (SqlglotError, RecursionError, ValueError, KeyError, IndexError, TypeError, AttributeError)


def _not_analyzed(exc: Exception) -> Unchecked:
    return Unchecked(1, 1, "query", f"not analyzed ({type(exc).__name__}: {exc})")


#: sqlglot's own checks of the arguments of the functions it models: not syntax errors in Trino (the call's
#: arguments are judged against the function list instead).
_VALIDATION = ("Required keyword:", "The number of provided arguments")


#: Trino syntax sqlglot's parser does not follow (a parse error there is sqlglot's, not the user's): the SQL/JSON
#: functions' clauses, row pattern recognition, and ``apply(...)`` (sqlglot reads APPLY as a join keyword).
_SQLGLOT_GAPS = frozenset(
    {
        "RETURNING",
        "JSON_OBJECT",
        "JSON_ARRAY",
        "JSON_QUERY",
        "JSON_VALUE",
        "JSON_EXISTS",
        "JSON_TABLE",
        "MATCH_RECOGNIZE",
    }
)


def _sqlglot_gap(source: Source) -> str | None:
    tokens = source.tokens
    for index, token in enumerate(tokens):
        word = token.text.upper()
        if word in _SQLGLOT_GAPS:
            return word
        if word == "APPLY" and index + 1 < len(tokens) and tokens[index + 1].token_type == TokenType.L_PAREN:
            return "apply(...)"
    return None


def _renamed_apply(source: Source) -> str:
    """The text with each call ``apply(`` spelt ``_pply(`` for sqlglot (which reads APPLY as a join keyword); the
    name as written stays in the tokens, which is what the function check reads."""
    text = source.text
    for index, token in enumerate(source.tokens[:-1]):
        if token.text.upper() == "APPLY" and source.tokens[index + 1].token_type == TokenType.L_PAREN:
            text = text[: token.start] + "_pply" + text[token.end + 1 :]
    return text


def _parse(sql: str) -> list[exp.Expr]:
    """The statements of ``sql``; a call sqlglot finds short of arguments is parsed anyway (Trino parses it and
    refuses it in analysis: FUNCTION_NOT_FOUND, which :mod:`athena_sql.calls` reports)."""
    try:
        return [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except ParseError as exc:
        if not exc.errors or not all(_is_call_validation(str(e.get("description", ""))) for e in exc.errors):
            raise
        if not _complete(sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql)):
            raise  # a truncated text (``COALESCE(``, ``CASE WHEN``) is a syntax error, whatever sqlglot checked
    return [s for s in sqlglot.parse(sql, read=DIALECT, error_level=ErrorLevel.IGNORE) if s is not None]


def _complete(tokens: list[Token]) -> bool:
    """Whether every bracket is closed and every CASE has its END."""
    depth = 0
    cases = 0
    for token in tokens:
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1, TokenType.L_BRACKET: 1, TokenType.R_BRACKET: -1}.get(
            token.token_type, 0
        )
        cases += {TokenType.CASE: 1, TokenType.END: -1}.get(token.token_type, 0)
        if depth < 0:
            return False
    return depth == 0 and cases == 0


def _is_call_validation(description: str) -> bool:
    """Whether sqlglot's error is its own check of a function's arguments (``Required keyword: 'this' missing for
    <class 'sqlglot.expressions.temporal.DateAdd'>``), not a syntax error."""
    if description.startswith("The number of provided arguments"):
        return True
    match = re.search(r"<class '[\w.]*\.(\w+)'>", description)
    if not description.startswith(_VALIDATION) or match is None:
        return False
    kind = getattr(exp, match.group(1), None)
    operators = exp.Binary | exp.Connector | exp.Unary | exp.If | exp.Case | exp.Predicate
    return isinstance(kind, type) and issubclass(kind, exp.Func) and not issubclass(kind, operators)


def _token_refusal(sql: str, exc: TokenError) -> Diagnostic:
    """Text that does not tokenize: the likeliest cause (a ``$$`` string, an unterminated quote) where it is."""
    dollar = sql.find("$$")
    if dollar >= 0:
        line = sql.count("\n", 0, dollar) + 1
        column = dollar - (sql.rfind("\n", 0, dollar) + 1) + 1
        message = "'$' is not Trino syntax ($$...$$ strings); use '...' strings (double a quote: '')"
        return Diagnostic(line, column, "SYNTAX_ERROR", "$$", message)
    return Diagnostic(
        1, 1, "SYNTAX_ERROR", "", f"cannot be tokenized (an unterminated string or comment?): {_first(exc)}"
    )


def _parse_refusal(source: Source, exc: ParseError) -> Diagnostic:
    """sqlglot's first parse error at its line and column (sqlglot's column is that of the token's last character:
    moved to the token's first)."""
    errors = exc.errors or [{}]
    first = errors[0]
    line = int(first.get("line") or 1)
    column = int(first.get("col") or 1)
    highlight = str(first.get("highlight") or "")
    if highlight and column >= len(highlight):
        column = column - len(highlight) + 1
    description = str(first.get("description") or _first(exc))
    incomplete = _incomplete(description)
    if incomplete is not None:  # sqlglot's own words name its classes: said in the user's terms instead
        description = f"an incomplete {incomplete}"
    near = f" at '{highlight}'" if highlight else ""
    return Diagnostic(line, max(1, column), "SYNTAX_ERROR", highlight, f"does not parse as Trino{near}: {description}")


def _incomplete(description: str) -> str | None:
    """What sqlglot's ``Required keyword: 'this' missing for <class 'sqlglot.expressions.query.Where'>`` found
    incomplete, in SQL words (``WHERE clause``, ``lambda``); ``None`` for any other description."""
    match = re.search(r"Required keyword: '\w+' missing for <class '[\w.]*\.(\w+)'>", description)
    if match is None:
        return None
    name = match.group(1)
    words = {"Where": "WHERE clause", "Having": "HAVING clause", "Order": "ORDER BY", "If": "CASE WHEN ... THEN"}
    return words.get(name, "lambda" if name == "Lambda" else "expression (an operator or clause without its operand)")


def _first(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
