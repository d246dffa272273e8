"""Result tests that guard what is published (dbt's tests, run in the function on the rows it fetched): a slot
whose rows break one is committed FAILED with reason ``assertion`` and the failing counts; its rows are stored
under its slot and generation for inspection but never become LATEST, so the last good result stays published
(QuickSight SPICE keeps the old data visible when a refresh fails). Not retried: the same rows fail the same way.

A job declares them in ``job.toml`` (every key optional)::

    [assertions]
    rows_at_least = 1                                   # the result has at least this many rows
    rows_at_most = 5000                                 # ... and at most this many
    not_null = ["origin", "flights"]                    # these columns are never NULL
    unique = ["origin"]                                 # no two rows share these columns' values
    accepted_values = { origin = ["EWR", "JFK", "LGA"] }   # a column's values are among these (NULL passes)
    expressions = ["flights >= 0", "on_time_arrivals <= flights"]   # true for every row

**Row expressions** are a small part of SQL, evaluated on each row with SQL's three-valued logic (a row passes
when its expression is TRUE; NULL or FALSE fails it)::

    expression := or ; or := and ("OR" and)* ; and := not ("AND" not)* ; not := "NOT" not | predicate
    predicate  := sum [ ("=" | "<>" | "!=" | "<" | "<=" | ">" | ">=") sum
                      | "IS" ["NOT"] "NULL" | ["NOT"] "IN" "(" sum ("," sum)* ")"
                      | ["NOT"] "BETWEEN" sum "AND" sum ]
    sum := product (("+" | "-") product)* ; product := unary (("*" | "/" | "%") unary)*
    unary := "-" unary | atom ; atom := number | 'text' | TRUE | FALSE | NULL | column | "(" expression ")"

Keywords in any case; a column is a name (``flights``) or a quoted one (``"On Time"``), the result's column. Numbers
compare as numbers (a decimal column's exact text too), text as text; comparing a number with text is FALSE.
:func:`parse` raises :class:`ExpressionError` naming the position (``check`` and synth report it); nothing here
imports anything beyond the standard library (it runs in the Lambda function).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "ASSERTION_REASON",
    "AssertionFailure",
    "ExpressionError",
    "RowExpression",
    "evaluate",
    "failure_record",
    "parse",
]

#: The error type (and so the failure's error class) of a slot whose rows broke an assertion.
ASSERTION_REASON = "assertion"
_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)|'(?P<text>(?:[^']|'')*)'|\"(?P<quoted>(?:[^\"]|\"\")+)\""
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><>|!=|<=|>=|[=<>+\-*/%(),]))"
)
_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: bool(a == b),
    "<>": lambda a, b: bool(a != b),
    "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}
_KEYWORDS = frozenset({"and", "or", "not", "is", "null", "in", "between", "true", "false"})


class ExpressionError(ValueError):
    """A row expression does not parse: ``position`` (0-based character) and what was expected."""

    def __init__(self, text: str, position: int, message: str) -> None:
        super().__init__(f"{message} at character {position + 1} of {text!r}")
        self.position = position


@dataclass(frozen=True)
class _Token:
    kind: str  # number, text, column, keyword, op, end
    value: Any
    at: int


Node = tuple[Any, ...]  # ("lit", v) | ("col", name) | ("not", n) | ("and"/"or", a, b) | ("cmp", op, a, b) | ...


@dataclass(frozen=True)
class RowExpression:
    """A parsed row expression: ``text`` as written, ``columns`` it reads, and its tree."""

    text: str
    tree: Node
    columns: tuple[str, ...]

    def holds(self, row: Mapping[str, Any]) -> bool:
        """Whether the expression is TRUE for ``row`` (a missing column is NULL)."""
        return _eval(self.tree, row) is True


def parse(text: str) -> RowExpression:
    """``text`` as a :class:`RowExpression`. :raises ExpressionError: it does not parse (where, and why)."""
    parser = _Parser(text, _tokens(text))
    tree = parser.expression()
    if parser.peek().kind != "end":
        raise ExpressionError(text, parser.peek().at, f"unexpected {parser.peek().value!r}")
    return RowExpression(text, tree, tuple(dict.fromkeys(parser.columns)))


def _tokens(text: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            at = position + len(text[position:]) - len(text[position:].lstrip())
            raise ExpressionError(text, at, f"unexpected {text[at]!r}")
        at = match.start(match.lastgroup or 0)
        if match.group("number") is not None:
            tokens.append(_Token("number", Decimal(match.group("number")), at))
        elif match.group("text") is not None:
            tokens.append(_Token("text", match.group("text").replace("''", "'"), at))
        elif match.group("quoted") is not None:
            tokens.append(_Token("column", match.group("quoted").replace('""', '"'), at))
        elif match.group("word") is not None:
            word = match.group("word")
            lowered = word.lower()
            tokens.append(_Token("keyword", lowered, at) if lowered in _KEYWORDS else _Token("column", lowered, at))
        else:
            tokens.append(_Token("op", match.group("op"), at))
        position = match.end()
    tokens.append(_Token("end", "end of the expression", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text, self.tokens, self.index = text, tokens, 0
        self.columns: list[str] = []

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self, kind: str, *values: str) -> _Token | None:
        token = self.peek()
        if token.kind == kind and (not values or token.value in values):
            self.index += 1
            return token
        return None

    def need(self, kind: str, value: str) -> None:
        if self.take(kind, value) is None:
            raise ExpressionError(self.text, self.peek().at, f"expected {value!r}, got {self.peek().value!r}")

    def expression(self) -> Node:
        node = self.conjunction()
        while self.take("keyword", "or"):
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.take("keyword", "and"):
            node = ("and", node, self.negation())
        return node

    def negation(self) -> Node:
        if self.take("keyword", "not"):
            return ("not", self.negation())
        return self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        op = self.take("op", *_COMPARISONS)
        if op is not None:
            return ("cmp", op.value, left, self.sum())
        if self.take("keyword", "is"):
            negated = self.take("keyword", "not") is not None
            self.need("keyword", "null")
            return ("not", ("isnull", left)) if negated else ("isnull", left)
        negated = self.take("keyword", "not") is not None
        if self.take("keyword", "in"):
            self.need("op", "(")
            items = [self.sum()]
            while self.take("op", ","):
                items.append(self.sum())
            self.need("op", ")")
            node: Node = ("in", left, tuple(items))
        elif self.take("keyword", "between"):
            low = self.sum()
            self.need("keyword", "and")
            node = ("between", left, low, self.sum())
        elif negated:
            raise ExpressionError(self.text, self.peek().at, "expected IN or BETWEEN after NOT")
        else:
            return left
        return ("not", node) if negated else node

    def sum(self) -> Node:
        node = self.product()
        while (op := self.take("op", "+", "-")) is not None:
            node = ("arith", op.value, node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while (op := self.take("op", "*", "/", "%")) is not None:
            node = ("arith", op.value, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.take("op", "-"):
            return ("arith", "-", ("lit", Decimal(0)), self.unary())
        return self.atom()

    def atom(self) -> Node:
        token = self.peek()
        if token.kind in ("number", "text"):
            self.index += 1
            return ("lit", token.value)
        if token.kind == "keyword" and token.value in ("true", "false", "null"):
            self.index += 1
            return ("lit", {"true": True, "false": False, "null": None}[token.value])
        if token.kind == "column":
            self.index += 1
            self.columns.append(token.value)
            return ("col", token.value)
        if self.take("op", "("):
            node = self.expression()
            self.need("op", ")")
            return node
        raise ExpressionError(self.text, token.at, f"expected a value or a column, got {token.value!r}")


def _value(value: Any) -> Any:
    """A row value as the expressions compare it: numbers (and numeric text: decimals) as Decimal, else as is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return Decimal(value)
        except InvalidOperation:
            return value
    return value


def _eval(node: Node, row: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "col":
        return _value(_column(row, node[1]))
    if kind == "not":
        inner = _eval(node[1], row)
        return None if inner is None else not inner
    if kind in ("and", "or"):
        left, right = _eval(node[1], row), _eval(node[2], row)
        if kind == "and":
            return False if False in (left, right) else (None if None in (left, right) else True)
        return True if True in (left, right) else (None if None in (left, right) else False)
    if kind == "isnull":
        return _eval(node[1], row) is None
    if kind == "cmp":
        return _compare(node[1], _eval(node[2], row), _eval(node[3], row))
    if kind == "in":
        left = _eval(node[1], row)
        found = [_compare("=", left, _eval(item, row)) for item in node[2]]
        return True if True in found else (None if None in found else False)
    if kind == "between":
        value, low, high = (_eval(part, row) for part in node[1:])
        low_ok, high_ok = _compare(">=", value, low), _compare("<=", value, high)
        return False if False in (low_ok, high_ok) else (None if None in (low_ok, high_ok) else True)
    left, right = _eval(node[2], row), _eval(node[3], row)  # arith
    if not isinstance(left, Decimal) or not isinstance(right, Decimal):
        return None
    op = node[1]
    if op in ("/", "%") and right == 0:
        return None
    return {"+": left + right, "-": left - right, "*": left * right, "/": left / right, "%": left % right}[op]


def _column(row: Mapping[str, Any], name: str) -> Any:
    """The row's value of column ``name`` (any case; NULL when the row has no such column)."""
    if name in row:
        return row[name]
    return next((value for key, value in row.items() if key.lower() == name.lower()), None)


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, Decimal) != isinstance(right, Decimal) or isinstance(left, bool) != isinstance(right, bool):
        return False  # a number against text (or a boolean): never equal, never ordered
    try:
        return _COMPARISONS[op](left, right)
    except TypeError:
        return False


@dataclass(frozen=True)
class AssertionFailure:
    """One assertion the rows broke: its name (``not_null dest``), how many rows fail it (the result's row count
    for the row-count assertions) and a detail for people."""

    assertion: str
    failing: int
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"assertion": self.assertion, "failing": self.failing, "detail": self.detail}


def _key(value: Any) -> str:
    """A value as equality sees it: numbers by value (``2``, ``2.0`` and ``'2.00'`` are one), text as text."""
    compared = _value(value)
    return f"n:{compared.normalize()}" if isinstance(compared, Decimal) else repr(compared)


def evaluate(spec: Any, rows: Sequence[Mapping[str, Any]]) -> list[AssertionFailure]:
    """The assertions of ``spec`` (an ``AssertionsSpec``: the keys above) that ``rows`` break, in the order above
    (empty: every one holds)."""
    failures: list[AssertionFailure] = []
    count = len(rows)
    if spec.rows_at_least is not None and count < spec.rows_at_least:
        failures.append(AssertionFailure(f"rows_at_least {spec.rows_at_least}", count, f"{count} row(s)"))
    if spec.rows_at_most is not None and count > spec.rows_at_most:
        failures.append(AssertionFailure(f"rows_at_most {spec.rows_at_most}", count, f"{count} row(s)"))
    for column in spec.not_null:
        nulls = sum(1 for row in rows if row.get(column) is None)
        if nulls:
            failures.append(AssertionFailure(f"not_null {column}", nulls, f"{nulls} row(s) with {column} NULL"))
    if spec.unique:
        seen: set[tuple[str, ...]] = set()
        duplicates = 0
        for row in rows:
            key = tuple(_key(row.get(column)) for column in spec.unique)
            duplicates += key in seen
            seen.add(key)
        if duplicates:
            name = ", ".join(spec.unique)
            failures.append(AssertionFailure(f"unique {name}", duplicates, f"{duplicates} row(s) repeat a ({name})"))
    for column, accepted in spec.accepted_values.items():
        allowed = {_key(value) for value in accepted}
        bad = [row.get(column) for row in rows if row.get(column) is not None and _key(row.get(column)) not in allowed]
        if bad:
            shown = ", ".join(sorted({repr(v) for v in bad})[:5])
            failures.append(
                AssertionFailure(f"accepted_values {column}", len(bad), f"{len(bad)} row(s) with other values: {shown}")
            )
    for text in spec.expressions:
        expression = parse(text)
        failing = sum(1 for row in rows if not expression.holds(row))
        if failing:
            failures.append(AssertionFailure(f"expression {text}", failing, f"{failing} row(s) where it is not true"))
    return failures


def failure_record(failures: Sequence[AssertionFailure], row_count: int) -> dict[str, Any]:
    """The error object a FAILED ``assertion`` slot records (``athena_refresh.failures`` reads it)."""
    names = "; ".join(f"{f.assertion}: {f.detail}" for f in failures)
    return {
        "type": ASSERTION_REASON,
        "error_message": f"{len(failures)} assertion(s) failed on {row_count} row(s): {names}",
        "assertions": [f.as_dict() for f in failures],
        "failing_rows": max((f.failing for f in failures), default=0),
        "row_count": row_count,
        "retryable": False,
    }
