"""Canonical placeholder names for DynamoDB requests: what a refactor may rename without changing a request.

A request's meaning does not depend on what its ``ExpressionAttributeNames`` (``#x``) and
``ExpressionAttributeValues`` (``:x``) placeholders are called, only on what they stand for and where they
appear. :func:`normalise_request` renames them, in every *scope* of a request, by order of first appearance
across the scope's expression strings, read in :data:`EXPRESSION_KEYS` order: names ``#n0, #n1, ...``,
values ``:v0, :v1, ...``. Both the expressions and the two maps are rewritten. A scope is any mapping that
holds an expression string or one of the two maps: the request itself, each ``TransactItems`` entry's
``Put``/``Update``/``Delete``/``ConditionCheck``, each table of a ``BatchGetItem``'s ``RequestItems``.

The expressions are rewritten through :func:`tokenize`, a lexer over the expression grammar's tokens
(placeholders, identifiers, numbers, operators, whitespace), so ``#a`` never matches inside ``#ab`` and the
text between placeholders (whitespace, clause order, parentheses) is kept byte for byte: those are part of
what a refactor must keep. A placeholder defined in a map but used by no expression (AWS rejects such a
request; ``test_slotlock_request_shape`` checks it) is named after the used ones, ``#n_unused0, ...`` in the
order of its original names, so it still shows in a comparison. Nothing else of the request is touched.

Grammar: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeNames.html
(``#`` then one or more alphanumerics or underscores; values the same with ``:``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: The expression strings of one scope, in the order their placeholders are numbered.
EXPRESSION_KEYS = (
    "ConditionExpression",
    "UpdateExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)
NAMES = "ExpressionAttributeNames"
VALUES = "ExpressionAttributeValues"
#: Keys whose values are DynamoDB data or already-renamed maps: never walked for scopes.
DATA_KEYS = frozenset({NAMES, VALUES, *EXPRESSION_KEYS, "Item", "Key", "Keys", "ExclusiveStartKey"})

#: Token kinds, tried in this order at each position (longest operators first).
_TOKEN_PATTERNS = (
    ("name", r"#[A-Za-z0-9_]+"),
    ("value", r":[A-Za-z0-9_]+"),
    ("ident", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("number", r"[0-9]+"),
    ("op", r"<>|<=|>=|[=<>(),.\[\]+\-]"),
    ("space", r"\s+"),
)
_LEXER = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _TOKEN_PATTERNS))


class ExpressionSyntaxError(ValueError):
    """A character no token of the expression grammar starts with (e.g. a lone ``#``)."""


@dataclass(frozen=True)
class Token:
    kind: str  # name | value | ident | number | op | space
    text: str


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression``, in order; their texts joined give back ``expression`` exactly.

    Raises :class:`ExpressionSyntaxError` at a character that starts no token (a ``#`` or ``:`` not followed by
    a placeholder character, a quote: DynamoDB expressions have no literals).
    """
    tokens: list[Token] = []
    position = 0
    while position < len(expression):
        match = _LEXER.match(expression, position)
        if match is None:
            raise ExpressionSyntaxError(f"no token at {position} of {expression!r}: {expression[position:][:20]!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append(Token(kind, match.group()))
        position = match.end()
    return tokens


def _placeholders(tokens: list[Token], kind: str) -> Iterator[str]:
    return (token.text for token in tokens if token.kind == kind)


def _canonical(order: list[str], defined: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """Original placeholder -> canonical name: used ones by first appearance, then the unused defined ones."""
    renames: dict[str, str] = {}
    for original in order:
        renames.setdefault(original, f"{prefix}{len(renames)}")
    unused = sorted(name for name in defined if name not in renames)
    for number, original in enumerate(unused):
        renames[original] = f"{prefix}_unused{number}"
    return renames


def _is_scope(mapping: Mapping[str, Any]) -> bool:
    return any(key in mapping for key in (*EXPRESSION_KEYS, NAMES, VALUES))


def normalise_scope(scope: Mapping[str, Any]) -> dict[str, Any]:
    """One scope (a mapping holding expressions and/or placeholder maps) with canonical placeholder names; the
    maps in canonical order. Its other keys are returned as they are (:func:`normalise_request` walks them)."""
    tokens = {key: tokenize(scope[key]) for key in EXPRESSION_KEYS if isinstance(scope.get(key), str)}
    names_used: list[str] = []
    values_used: list[str] = []
    for key in EXPRESSION_KEYS:
        if key in tokens:
            names_used.extend(_placeholders(tokens[key], "name"))
            values_used.extend(_placeholders(tokens[key], "value"))
    names = _canonical(names_used, scope.get(NAMES) or {}, "#n")
    values = _canonical(values_used, scope.get(VALUES) or {}, ":v")
    renames = {**names, **values}
    result = dict(scope)
    for key, key_tokens in tokens.items():
        result[key] = "".join(renames.get(token.text, token.text) for token in key_tokens)
    for key, canonical in ((NAMES, names), (VALUES, values)):
        if key in scope:
            defined = scope[key]
            result[key] = {new: defined[old] for old, new in canonical.items() if old in defined}
    return result


def normalise_request(request: Any) -> Any:
    """``request`` (an operation's parameters, as sent) with every scope's placeholders renamed canonically.

    Lists and mappings are walked and each scope (a mapping holding an expression or a placeholder map) renamed;
    DynamoDB data (:data:`DATA_KEYS`: items, keys, attribute values, attribute names) is never walked, so an
    attribute that happens to be called ``UpdateExpression`` is left alone. The input is not modified.
    """
    if isinstance(request, list):
        return [normalise_request(item) for item in request]
    if not isinstance(request, Mapping):
        return request
    scope = normalise_scope(request) if _is_scope(request) else dict(request)
    return {key: value if key in DATA_KEYS else normalise_request(value) for key, value in scope.items()}
