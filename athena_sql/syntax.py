"""Syntax that is not Trino's, found in the tokens (sqlglot's parser accepts other dialects' syntax and rewrites it:
``x::date`` becomes a cast, ``ILIKE`` a node of its own, ``GROUP BY ALL`` a flag).

Each rule is checked against Trino's grammar, core/trino-grammar/src/main/antlr4/io/trino/grammar/sql/SqlBase.g4
at trinodb/trino@0157c179f00350f8679258317e706524532e5a5b (``querySpecification``, ``queryNoWith``, ``predicate``,
``valueExpression``, ``primaryExpression``, ``interval``, the lexer's operators and literals), and every refusal is
a ``SYNTAX_ERROR`` (Trino's ``ParsingException``), or ``TYPE_NOT_FOUND`` for a type name Trino does not have.
Checked and **not** refused because Trino has them: ``LIMIT ALL``, ``GROUP BY ALL a, b`` (a set quantifier before
grouping elements), ``FETCH FIRST n ROWS ONLY``, ``OFFSET n`` before ``LIMIT``, ``U&'...'``, ``X'...'``, ``!=``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlglot.tokenizer_core import Token, TokenType

from athena_sql import forms
from athena_sql.diagnostics import Diagnostic
from athena_sql.source import Source

__all__ = ["CLAUSE_TOKENS", "JOIN_TOKENS", "syntax_refusals", "trailing_comma"]

SYNTAX_ERROR = "SYNTAX_ERROR"
#: A comma may not come right before these (Trino refuses ``SELECT a, FROM``, ``GROUP BY a,`` ...).
CLAUSE_TOKENS = frozenset(
    {
        TokenType.FROM,
        TokenType.WHERE,
        TokenType.GROUP_BY,
        TokenType.HAVING,
        TokenType.ORDER_BY,
        TokenType.LIMIT,
        TokenType.OFFSET,
        TokenType.FETCH,
        TokenType.UNION,
        TokenType.INTERSECT,
        TokenType.EXCEPT,
        TokenType.WINDOW,
        TokenType.R_PAREN,
        TokenType.R_BRACKET,
        TokenType.SEMICOLON,
        TokenType.SELECT,
        TokenType.COMMA,  # an empty item: ``a,, b``
    }
)
#: Join keywords: a comma before them is a trailing one unless they start a function call (``left(x, 1)``).
JOIN_TOKENS = frozenset(
    {TokenType.JOIN, TokenType.LEFT, TokenType.RIGHT, TokenType.FULL, TokenType.INNER, TokenType.CROSS}
)
#: What may end a clause (after ``GROUP BY ALL``: nothing to group by).
_CLAUSE_END = frozenset(
    {
        TokenType.HAVING,
        TokenType.ORDER_BY,
        TokenType.LIMIT,
        TokenType.OFFSET,
        TokenType.FETCH,
        TokenType.UNION,
        TokenType.INTERSECT,
        TokenType.EXCEPT,
        TokenType.WINDOW,
        TokenType.R_PAREN,
        TokenType.SEMICOLON,
    }
)
#: Trino's interval fields (``intervalField``): singular only.
_INTERVAL_FIELDS = frozenset({"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"})
#: Tokens that start a query (after ``ANY (``, ``EXCEPT (``: a subquery, which Trino allows).
_QUERY_START = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.VALUES, TokenType.TABLE, TokenType.L_PAREN})
#: Tokens after which ``[`` starts a bare list (``IN [1, 2]``, ``SELECT [1]``); after anything else (a name,
#: ``)``, ``]``, ``ARRAY``) it is a subscript or an array constructor.
_BEFORE_BARE_LIST = frozenset(
    {
        TokenType.COMMA,
        TokenType.L_PAREN,
        TokenType.SELECT,
        TokenType.EQ,
        TokenType.NEQ,
        TokenType.LT,
        TokenType.LTE,
        TokenType.GT,
        TokenType.GTE,
        TokenType.PLUS,
        TokenType.DASH,
        TokenType.STAR,
        TokenType.SLASH,
        TokenType.MOD,
        TokenType.DPIPE,
        TokenType.IN,
        TokenType.THEN,
        TokenType.ELSE,
        TokenType.WHEN,
        TokenType.ARROW,
        TokenType.AND,
        TokenType.OR,
        TokenType.NOT,
        TokenType.ALIAS,
    }
)
#: Operators of other dialects: token type -> (what to say, the Trino way).
_FOREIGN_OPERATORS: dict[TokenType, str] = {
    TokenType.DCOLON: "'::' casts are not Trino syntax; use CAST(x AS type)",
    TokenType.ILIKE: "ILIKE is not Trino syntax; use lower(x) LIKE lower(pattern) or regexp_like(x, '(?i)...')",
    TokenType.TILDE: "'~' (regular expression match) is not a Trino operator; use regexp_like(x, pattern)",
    TokenType.IRLIKE: "'~*' is not a Trino operator; use regexp_like(x, '(?i)pattern')",
    TokenType.RLIKE: "RLIKE/REGEXP is not Trino syntax; use regexp_like(x, pattern)",
    TokenType.SIMILAR_TO: "SIMILAR TO is not Trino syntax; use regexp_like(x, pattern)",
    TokenType.GLOB: "GLOB is not Trino syntax; use LIKE (with % and _) or regexp_like(x, pattern)",
    TokenType.CARET: "'^' is not a Trino operator; use power(x, y) (bitwise_xor(x, y) for XOR)",
    TokenType.PIVOT: "PIVOT is not Trino syntax; aggregate per value with count_if/sum(CASE ...) or a FILTER",
    TokenType.UNPIVOT: "UNPIVOT is not Trino syntax; use CROSS JOIN UNNEST(ARRAY[...], ARRAY[...]) AS t(name, value)",
    TokenType.NULLSAFE_EQ: "'<=>' is not a Trino operator; use a IS NOT DISTINCT FROM b",
    TokenType.DARROW: "'->>' is not a Trino operator; use json_extract_scalar(json, '$.key')",
    TokenType.DAMP: "'&&' is not a Trino operator; use AND, or arrays_overlap(a, b) for arrays",
    TokenType.PARAMETER: "'@' operators (@>, <@) are not Trino's; use contains(array, x) or cardinality(...)",
    TokenType.L_BRACE: "'{...}' literals are not Trino syntax; use MAP(ARRAY[keys], ARRAY[values]) or ROW(...)",
}
#: Type names of other dialects in CAST (Trino: ``Unknown type``, TYPE_NOT_FOUND).
_FOREIGN_TYPES = {
    "text": "varchar",
    "string": "varchar",
    "int4": "integer",
    "int8": "bigint",
    "int64": "bigint",
    "float4": "real",
    "float8": "double",
    "hugeint": "decimal(38,0)",
    "datetime": "timestamp",
    "timestamptz": "timestamp with time zone",
    "bytea": "varbinary",
    "blob": "varbinary",
    "jsonb": "json",
    "utinyint": "smallint",
    "usmallint": "integer",
    "uinteger": "bigint",
    "ubigint": "decimal(20,0)",
    "uhugeint": "decimal(38,0)",
}


def _refusal(source: Source, token: Token, construct: str, message: str, error: str = SYNTAX_ERROR) -> Diagnostic:
    line, column = source.token_position(token)
    return Diagnostic(line, column, error, construct, message)


def trailing_comma(source: Source) -> Token | None:
    """The first comma followed by a clause keyword, a closing bracket, another comma or the end of the query."""
    tokens = source.tokens
    for index, token in enumerate(tokens):
        if token.token_type != TokenType.COMMA:
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is None or following.token_type in CLAUSE_TOKENS:
            return token
        if following.token_type in JOIN_TOKENS:
            after = tokens[index + 2] if index + 2 < len(tokens) else None
            if after is None or after.token_type != TokenType.L_PAREN:
                return token
    return None


def syntax_refusals(source: Source) -> list[Diagnostic]:
    """Every construct of ``source`` that Trino's grammar refuses, in text order."""
    found = list(_token_rules(source))
    comma = trailing_comma(source)
    if comma is not None:
        found.append(_refusal(source, comma, ",", "trailing comma (Trino refuses it; remove the last ',')"))
    return sorted(found, key=lambda d: (d.line, d.column))


def _token_rules(source: Source) -> Iterator[Diagnostic]:
    tokens = source.tokens
    limit_depth: int | None = None
    depth = 0
    skip: set[int] = set()
    in_pattern = False  # MATCH_RECOGNIZE's PATTERN (...) has quantifiers {n,m} of its own
    for index, token in enumerate(tokens):
        if index in skip:
            continue
        kind = token.token_type
        in_pattern = in_pattern or token.text.upper() == "MATCH_RECOGNIZE"
        before = tokens[index - 1] if index > 0 else None
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        after2 = tokens[index + 2] if index + 2 < len(tokens) else None
        upper = token.text.upper()
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if limit_depth is not None and depth < limit_depth:
                limit_depth = None
        if kind == TokenType.L_BRACE and in_pattern:
            continue
        if kind in _FOREIGN_OPERATORS:
            construct = _around(source, before, token, after)
            yield _refusal(source, token, construct, _FOREIGN_OPERATORS[kind])
        elif kind == TokenType.LIKE and token.text == "~~":
            yield _refusal(source, token, _around(source, before, token, after), "'~~' is not Trino syntax; use LIKE")
        elif kind == TokenType.NOT and token.text == "!" and after is not None and after.start == token.end + 1:
            if after.token_type in (TokenType.LIKE, TokenType.TILDE):
                skip.add(index + 1)
                shown, fix = ("!~~", "NOT LIKE") if after.text == "~~" else ("!~", "NOT regexp_like(x, pattern)")
                yield _refusal(source, token, shown, f"'{shown}' is not a Trino operator; use {fix}")
            else:
                yield _refusal(source, token, "!", "'!' is not a Trino operator; use NOT (or <>/!= for inequality)")
        elif kind == TokenType.NOT and token.text == "!":
            yield _refusal(
                source, token, _around(source, None, token, after), "'!' is not a Trino operator; use NOT (or <>/!=)"
            )
        elif kind == TokenType.EQ and token.text == "==":
            yield _refusal(source, token, "==", "'==' is not a Trino operator; use =")
        elif kind == TokenType.STAR and after is not None and after.token_type == TokenType.STAR:
            if after.start == token.end + 1:
                yield _refusal(source, token, "**", "'**' is not a Trino operator; use power(x, y)")
        elif kind == TokenType.ORDER_BY and after is not None and after.token_type == TokenType.ALL:
            yield _refusal(
                source, token, "ORDER BY ALL", "ORDER BY ALL is not Trino syntax; list the sort keys or ordinals"
            )
        elif kind in (TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT) and _words(tokens, index + 1, "BY NAME"):
            yield _refusal(
                source,
                token,
                f"{upper} BY NAME",
                f"{upper} BY NAME is not Trino syntax; select the same columns in the same order on both sides",
            )
        elif kind == TokenType.FROM and index == 0:
            yield _refusal(
                source, token, "FROM ...", "a query starting with FROM is not Trino syntax; start with SELECT"
            )
        elif kind == TokenType.USING and after is not None and after.text.upper() == "SAMPLE":
            yield _refusal(
                source, token, "USING SAMPLE", "USING SAMPLE is not Trino syntax; use TABLESAMPLE BERNOULLI (percent)"
            )
        elif kind == TokenType.SLASH and after is not None and after.token_type == TokenType.SLASH:
            if after.start == token.end + 1:
                yield _refusal(
                    source, token, "//", "'//' is not a Trino operator; '/' on integers already truncates (7 / 2 = 3)"
                )
        elif kind == TokenType.UNKNOWN and token.text == "`":
            if before is None or before.token_type != TokenType.UNKNOWN or before.text != "`":
                yield _refusal(
                    source,
                    token,
                    "`",
                    "backquoted identifiers are not supported; use double quotes to quote identifiers",
                )
        elif kind == TokenType.VAR and token.text.startswith("$"):
            yield _refusal(
                source,
                token,
                token.text[:20],
                "'$' is not Trino syntax ($$...$$ strings, $1 parameters); use '...' strings (double a quote: '')",
            )
        elif (
            kind == TokenType.VAR
            and upper in ("E", "B", "N", "R")
            and after is not None
            and after.token_type == TokenType.STRING
            and after.start == token.end + 1
        ):
            yield _refusal(
                source,
                token,
                source.raw(token) + source.raw(after),
                f"{upper}'...' string literals are not Trino syntax; use '...' (U&'...' for Unicode escapes)",
            )
        elif kind == TokenType.GROUP_BY and after is not None and after.token_type == TokenType.ALL:
            if after2 is None or after2.token_type in _CLAUSE_END:
                yield _refusal(
                    source,
                    token,
                    "GROUP BY ALL",
                    "GROUP BY ALL is not Trino syntax; list the grouping expressions or their ordinals (GROUP BY 1, 2)",
                )
        elif kind == TokenType.INTERVAL and after is not None:
            yield from _interval(source, token, after, after2, tokens[index + 3] if index + 3 < len(tokens) else None)
        elif kind == TokenType.VAR and upper == "QUALIFY" and _starts_clause(before, after):
            yield _refusal(
                source,
                token,
                "QUALIFY",
                "QUALIFY is not Trino syntax; filter on the window function in an outer query",
            )
        elif kind == TokenType.VAR and upper == "TOP" and before is not None and before.token_type == TokenType.SELECT:
            yield _refusal(source, token, "TOP", "SELECT TOP n is not Trino syntax; use LIMIT n")
        elif kind == TokenType.STAR and after is not None and after.text.upper() in ("EXCLUDE", "REPLACE", "RENAME"):
            yield _refusal(
                source,
                after,
                f"* {after.text}",
                f"SELECT * {after.text.upper()} is not Trino syntax; list the columns you want",
            )
        elif (
            kind == TokenType.STAR
            and after is not None
            and after.token_type == TokenType.EXCEPT
            and after2 is not None
            and after2.token_type == TokenType.L_PAREN
            and index + 3 < len(tokens)
            and tokens[index + 3].token_type not in _QUERY_START
        ):
            yield _refusal(
                source, after, "* EXCEPT (...)", "SELECT * EXCEPT (columns) is not Trino syntax; list the columns"
            )
        elif kind == TokenType.DISTINCT and after is not None and after.token_type == TokenType.ON:
            yield _refusal(
                source,
                token,
                "DISTINCT ON",
                "DISTINCT ON is not Trino syntax; use row_number() OVER (PARTITION BY ...) in a subquery",
            )
        elif kind == TokenType.IS and after is not None:
            target = after2 if after.token_type == TokenType.NOT and after2 is not None else after
            if target.token_type in (TokenType.TRUE, TokenType.FALSE) or target.text.upper() == "UNKNOWN":
                yield _refusal(
                    source,
                    token,
                    f"IS {target.text.upper()}",
                    f"IS [NOT] {target.text.upper()} is not Trino syntax; use the boolean itself,"
                    f" = {target.text.lower()}, or IS [NOT] DISTINCT FROM",
                )
        elif (
            kind in (TokenType.ANY, TokenType.SOME, TokenType.ALL)
            and before is not None
            and before.token_type in _COMPARISONS
            and after is not None
            and after.token_type == TokenType.L_PAREN
            and after2 is not None
            and after2.token_type not in _QUERY_START
        ):
            yield _refusal(
                source,
                token,
                f"{upper}(...)",
                f"{upper} needs a subquery in Trino; for an array use contains(array, x) (or any_match/all_match)",
            )
        elif kind == TokenType.L_BRACKET and (before is None or before.token_type in _BEFORE_BARE_LIST):
            yield _refusal(source, token, "[...]", "a bare [...] list is not Trino syntax; use ARRAY[...]")
        elif kind == TokenType.LIMIT:
            limit_depth = depth
            if (
                after is not None
                and after.token_type == TokenType.NUMBER
                and after2 is not None
                and after2.token_type == TokenType.COMMA
            ):
                yield _refusal(
                    source,
                    token,
                    "LIMIT offset, count",
                    "LIMIT offset, count is not Trino syntax; use OFFSET offset LIMIT count",
                )
        elif kind == TokenType.OFFSET and limit_depth is not None and limit_depth == depth:
            yield _refusal(
                source, token, "LIMIT ... OFFSET", "OFFSET comes before LIMIT in Trino: ... OFFSET m LIMIT n"
            )
        elif (
            kind == TokenType.VAR and upper == "EXTRACT" and after is not None and after.token_type == TokenType.L_PAREN
        ):
            field = after2.text.upper() if after2 is not None else ""
            if after2 is not None and field not in _EXTRACT_FIELDS:
                yield _refusal(source, after2, f"EXTRACT({after2.text} ...)", f"Invalid EXTRACT field: {after2.text}")
        if kind == TokenType.SELECT and limit_depth == depth:
            limit_depth = None
    yield from _cast_types(source)
    yield from forms.special_values(source)
    yield from forms.listagg(source)


def _cast_types(source: Source) -> Iterator[Diagnostic]:
    """``CAST(x AS text)``: a type name Trino does not have (``Unknown type: text``, TYPE_NOT_FOUND)."""
    tokens = source.tokens
    depth_of_cast: list[int] = []
    depth = 0
    for index, token in enumerate(tokens):
        if (
            token.text.upper() in ("CAST", "TRY_CAST")
            and index + 1 < len(tokens)
            and tokens[index + 1].token_type == TokenType.L_PAREN
        ):
            depth_of_cast.append(depth + 1)
        elif token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            if depth_of_cast and depth_of_cast[-1] == depth:
                depth_of_cast.pop()
            depth -= 1
        elif token.token_type == TokenType.ALIAS and depth_of_cast and depth_of_cast[-1] == depth:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following is not None and source.raw(following).lower() in _FOREIGN_TYPES:
                name = source.raw(following).lower()
                yield _refusal(
                    source,
                    following,
                    name,
                    f"Unknown type: {name} (Trino's is {_FOREIGN_TYPES[name]})",
                    error="TYPE_NOT_FOUND",
                )


def _interval(
    source: Source, token: Token, value: Token, unit: Token | None, unit2: Token | None
) -> Iterator[Diagnostic]:
    """Trino's ``interval``: ``INTERVAL [+|-] 'string' field [TO field]`` with a singular field."""
    if value.token_type in (TokenType.PLUS, TokenType.DASH):
        value, unit = unit, unit2  # type: ignore[assignment]
        if value is None:
            return
    if value.token_type == TokenType.NUMBER:
        shown = f"INTERVAL {value.text}" + (f" {unit.text}" if unit is not None else "")
        field = unit.text.upper().rstrip("S") if unit is not None else "DAY"
        yield _refusal(source, token, shown, f"INTERVAL needs a quoted value in Trino: INTERVAL '{value.text}' {field}")
    elif value.token_type == TokenType.STRING and (unit is None or unit.text.upper() not in _INTERVAL_FIELDS):
        words = value.text.split()
        if unit is not None and unit.text.upper().rstrip("S") in _INTERVAL_FIELDS:
            hint = f"INTERVAL '{value.text}' {unit.text.upper().rstrip('S')} (the field is singular)"
        elif len(words) == 2 and words[1].upper().rstrip("S") in _INTERVAL_FIELDS:
            hint = f"INTERVAL '{words[0]}' {words[1].upper().rstrip('S')}"
        else:
            hint = "INTERVAL '1' DAY (YEAR, MONTH, DAY, HOUR, MINUTE or SECOND)"
        shown = f"INTERVAL '{value.text}'" + (f" {unit.text}" if unit is not None else "")
        yield _refusal(source, token, shown, f"not a Trino interval; write {hint}")


def _words(tokens: Sequence[Token], index: int, words: str) -> bool:
    """Whether the tokens from ``index`` spell ``words`` (``BY NAME``)."""
    expected = words.split()
    found = [t.text.upper() for t in tokens[index : index + len(expected)]]
    return found == expected


def _starts_clause(before: Token | None, after: Token | None) -> bool:
    """Whether a word stands where a clause keyword would (not a name: ``AS qualify``, ``t.qualify``, ``qualify,``)."""
    if before is None or after is None:
        return False
    if before.token_type in (TokenType.ALIAS, TokenType.DOT, TokenType.COMMA, TokenType.SELECT):
        return False
    return after.token_type not in (TokenType.COMMA, TokenType.FROM, TokenType.R_PAREN, TokenType.DOT, TokenType.EQ)


def _around(source: Source, before: Token | None, token: Token, after: Token | None) -> str:
    parts = [source.raw(t) for t in (before, token, after) if t is not None]
    return "".join(parts) if token.token_type == TokenType.DCOLON else " ".join(parts)


_COMPARISONS = frozenset({TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE})
#: Trino's EXTRACT fields (io/trino/sql/tree/Extract.java's Field, aliases included).
_EXTRACT_FIELDS = frozenset(
    {
        "YEAR",
        "QUARTER",
        "MONTH",
        "WEEK",
        "DAY",
        "DAY_OF_MONTH",
        "DAY_OF_WEEK",
        "DOW",
        "DAY_OF_YEAR",
        "DOY",
        "YEAR_OF_WEEK",
        "YOW",
        "HOUR",
        "MINUTE",
        "SECOND",
        "TIMEZONE_MINUTE",
        "TIMEZONE_HOUR",
    }
)
