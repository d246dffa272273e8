"""Trino's special forms, whose grammar is their own (not a function call's): the special date/time values and
``LISTAGG``. Judged on the tokens, as :mod:`athena_sql.syntax` judges other syntax, against
core/trino-grammar/src/main/antlr4/io/trino/grammar/sql/SqlBase.g4 at trinodb/trino@0157c179f00350f8679258317e706524532e5a5b
(``primaryExpression``: ``#specialDateTimeFunction``, ``#currentUser`` ..., ``#listagg``); every refusal is a
``SYNTAX_ERROR`` (Trino's ParsingException). CURRENT_DATE, LISTAGG and the others are reserved words
(docs/src/main/sphinx/language/reserved.md), so none of them is ever read as a function's name. Also the typed
literals Trino's analyzer refuses (INVALID_LITERAL): :func:`literals`.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator

from sqlglot.tokenizer_core import Token, TokenType

from athena_sql.diagnostics import Diagnostic
from athena_sql.source import Source

__all__ = ["listagg", "literals", "refusal", "special_values"]


def refusal(source: Source, token: Token, construct: str, message: str) -> Diagnostic:
    line, column = source.token_position(token)
    return Diagnostic(line, column, "SYNTAX_ERROR", construct, message)


#: Trino's special date/time functions and session values (``primaryExpression``: ``name=CURRENT_DATE``,
#: ``name=CURRENT_TIMESTAMP (LPAREN precision=INTEGER_VALUE RPAREN)?``, ``name=CURRENT_USER`` ...): reserved words,
#: never function calls; those of ``_WITH_PRECISION`` may take an integer precision in brackets.
_WITH_PRECISION = frozenset({"CURRENT_TIME", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"})
_SPECIAL_VALUES = _WITH_PRECISION | {
    "CURRENT_DATE",
    "CURRENT_USER",
    "CURRENT_CATALOG",
    "CURRENT_SCHEMA",
    "CURRENT_PATH",
}


def special_values(source: Source) -> Iterator[Diagnostic]:
    """``CURRENT_DATE()``, ``current_timestamp()``: brackets after a special value, which Trino's grammar allows
    only around an integer precision (``current_timestamp(3)``) and never after CURRENT_DATE or CURRENT_USER."""
    tokens = source.tokens
    for index, token in enumerate(tokens[:-1]):
        name = token.text.upper()
        if token.token_type == TokenType.IDENTIFIER or name not in _SPECIAL_VALUES:
            continue
        if tokens[index + 1].token_type != TokenType.L_PAREN:
            continue
        if index > 0 and tokens[index - 1].token_type == TokenType.DOT:
            continue  # a qualified name, not the special value
        inner = tokens[index + 2 : index + 4]
        precision = len(inner) == 2 and inner[0].text.isdigit() and inner[1].token_type == TokenType.R_PAREN
        if name in _WITH_PRECISION and precision:
            continue
        fix = f"{name}() is not Trino syntax; write {name} without brackets"
        if name in _WITH_PRECISION:
            fix = f"{name}(...) takes only an integer precision in Trino; write {name} or {name}(3)"
        yield refusal(source, token, f"{source.raw(token)}(", fix)


def listagg(source: Source) -> Iterator[Diagnostic]:
    """``LISTAGG([DISTINCT] x [, 'separator'] [ON OVERFLOW ...]) WITHIN GROUP (ORDER BY ...) [FILTER (...)]``: the
    separator is a string literal when given (TestListagg.testListaggQueryIncorrectSyntax: ``listagg(value, 123)``
    is refused, "Expecting: <string>"), and WITHIN GROUP is required (``listagg(value, ',')`` alone is refused,
    "Expecting: 'WITHIN'"); trinodb/trino@3f2f6685, core/trino-main/src/test/java/io/trino/sql/query/TestListagg.java.
    """
    tokens = source.tokens
    for index, token in enumerate(tokens[:-1]):
        if token.token_type == TokenType.IDENTIFIER or token.text.upper() != "LISTAGG":
            continue  # "listagg" quoted is an ordinary name
        if tokens[index + 1].token_type != TokenType.L_PAREN:
            continue
        depth, position, separator = 0, index + 1, None
        while position < len(tokens):
            kind = tokens[position].token_type
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
            if depth == 0:
                break
            if depth == 1 and kind == TokenType.COMMA and separator is None:
                separator = position + 1
            position += 1
        if separator is not None and separator < len(tokens):
            following = tokens[separator + 1] if separator + 1 < len(tokens) else None
            closes = following is not None and (
                following.token_type == TokenType.R_PAREN or following.text.upper() == "ON"
            )
            if tokens[separator].token_type != TokenType.STRING or not closes:
                shown = source.raw(tokens[separator])
                message = (
                    f"listagg's separator must be a string literal (got {shown}): listagg(x, ',') WITHIN GROUP (...)"
                )
                yield refusal(source, tokens[separator], shown, message)
        within = [t.text.upper() for t in tokens[position + 1 : position + 3]]
        if position < len(tokens) and within != ["WITHIN", "GROUP"]:
            message = "listagg needs WITHIN GROUP (ORDER BY ...) in Trino: listagg(x, ',') WITHIN GROUP (ORDER BY x)"
            yield refusal(source, token, "LISTAGG(...)", message)


#: ``TIMESTAMP 'yyyy-mm-dd hh:mm[:ss[.f...]] zone'``: the zone part of a timestamp literal.
_TIMESTAMP_ZONE = re.compile(r"^\s*\d{4}-\d{1,2}-\d{1,2}[ T]\d{1,2}:\d{1,2}(:\d{1,2}(\.\d+)?)?\s+(?P<zone>\S+)\s*$")
_OFFSET = re.compile(r"^((utc|gmt|ut)?[+-]\d{1,2}(:?\d{2})?|(utc|gmt|ut)[+-]\d{1,2}:\d{2})$", re.IGNORECASE)


def literals(source: Source) -> Iterator[Diagnostic]:
    """A timestamp literal whose time zone Trino does not know (``TIMESTAMP '2012-10-31 01:00:00 PT'``:
    INVALID_LITERAL, TestAnalyzer.testLiteral at trinodb/trino@009eb018; a zone is a UTC offset or a zone ID of
    the tz database, io/trino/spi/type/TimeZoneKey.java). Not judged when this system has no tz database."""
    known = {zone.lower() for zone in zoneinfo.available_timezones()} | {"utc", "gmt", "ut", "z"}
    if len(known) < 10:
        return
    tokens = source.tokens
    for index, token in enumerate(tokens[:-1]):
        literal = tokens[index + 1]
        if token.text.upper() != "TIMESTAMP" or literal.token_type != TokenType.STRING:
            continue
        match = _TIMESTAMP_ZONE.match(literal.text)
        zone = match.group("zone") if match else None
        if zone is None or _OFFSET.match(zone) or zone.lower() in known:
            continue
        line, column = source.token_position(token)
        message = (
            f"'{literal.text}' is not a valid TIMESTAMP literal: unknown time zone '{zone}'"
            " (use a zone ID such as America/Los_Angeles, or an offset such as -08:00)"
        )
        yield Diagnostic(line, column, "INVALID_LITERAL", f"TIMESTAMP '{literal.text}'", message)
