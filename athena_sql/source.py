"""The user's query text, its tokens and where things stand in it (1-based lines and columns of that text).

sqlglot's Trino tokenizer finds the tokens (strings and comments are single tokens or none, so nothing inside them
is ever judged); sqlglot's parse tree carries, for identifiers, literals and function names, the character offsets
of their tokens (``meta``), from which every tree node gets a position: its first token, or for an operator the
operator's own token, as Trino reports them (Trino's ``line 1:49: Cannot apply operator ...`` points at the
operator: io/trino/sql/parser/AstBuilder.java builds them with ``getLocation(context.operator)``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

__all__ = ["Source"]


@dataclass
class Source:
    """``text`` (the user's query) and its ``tokens``; positions are computed from character offsets."""

    text: str
    tokens: Sequence[Token]
    _line_starts: list[int] = field(init=False, repr=False)
    _token_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._line_starts = [0] + [index + 1 for index, char in enumerate(self.text) if char == "\n"]
        self._token_starts = [token.start for token in self.tokens]

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column), both 1-based, of the character at ``offset``."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def token_position(self, token: Token) -> tuple[int, int]:
        return self.position(token.start)

    def raw(self, token: Token) -> str:
        """The token as written (quotes included: ``'abc'``, ``"name"``)."""
        return self.text[token.start : token.end + 1]

    def token_at(self, offset: int) -> int | None:
        """The index of the token starting at ``offset``, if any."""
        index = bisect_right(self._token_starts, offset) - 1
        if index >= 0 and self.tokens[index].start == offset:
            return index
        return None

    def locate_placeholders(self, tree: exp.Expr) -> None:
        """Give each ``:name`` node of ``tree`` the offsets of its tokens (sqlglot keeps none for placeholders),
        matching the n-th node named ``name`` to the n-th ``:name`` of the text."""
        written: dict[str, list[tuple[Token, Token]]] = {}
        for index, token in enumerate(self.tokens[:-1]):
            following = self.tokens[index + 1]
            if token.token_type == TokenType.COLON and following.start == token.end + 1:
                written.setdefault(following.text.lower(), []).append((token, following))
        seen: dict[str, int] = {}
        for node in tree.find_all(exp.Placeholder):
            name = str(node.name).lower()
            occurrence = seen.get(name, 0)
            seen[name] = occurrence + 1
            if occurrence < len(written.get(name, [])):
                colon, word = written[name][occurrence]
                line, column = self.position(colon.start)
                node.meta.update(line=line, col=column, start=colon.start, end=word.end)

    def token_index_of(self, offset: int) -> int:
        """The index of the token holding the character at ``offset`` (the last one starting at or before it)."""
        return max(0, bisect_right(self._token_starts, offset) - 1)

    # --- tree nodes ---------------------------------------------------------------------------------------
    def span(self, node: exp.Expr) -> tuple[int, int] | None:
        """(first, last) character offsets known in ``node``'s subtree (from the tokens sqlglot recorded)."""
        starts: list[int] = []
        ends: list[int] = []
        for child in _walk(node):
            meta = child.meta if child.meta else None
            if meta and "start" in meta and "end" in meta:
                starts.append(int(meta["start"]))
                ends.append(int(meta["end"]))
        if not starts:
            return None
        return min(starts), max(ends)

    def node_offset(self, node: exp.Expr) -> int | None:
        """The offset of ``node``'s first token: its first known token, moved back over opening brackets and
        keywords (``CAST (``, ``CASE WHEN``, ``INTERVAL``, ``DATE``) that sqlglot keeps no offset for."""
        span = self.span(node)
        if span is None:
            return None
        index = self.token_at(span[0])
        if index is None:
            return span[0]
        for step in _LEADING.get(type(node), ()):
            if index == 0 or self.tokens[index - 1].text.upper() not in step:
                break
            index -= 1
        if isinstance(node, exp.Lambda) and index > 0 and node.expressions:
            # ``(x, y) -> ...``: its parameters' bracket (not the bracket of a call around ``x -> ...``)
            last = node.expressions[-1].meta.get("end") if node.expressions[-1].meta else None
            after = self.token_index_of(int(last)) + 1 if last is not None else None
            if after is not None and after < len(self.tokens) and self.tokens[after].token_type == TokenType.R_PAREN:
                index -= 1
        return self.tokens[index].start

    def node_position(self, node: exp.Expr, fallback: tuple[int, int] = (1, 1)) -> tuple[int, int]:
        offset = self.node_offset(node)
        return fallback if offset is None else self.position(offset)

    def operator_position(self, node: exp.Expr, kinds: Iterable[TokenType]) -> tuple[int, int]:
        """The position of a binary operator's token (``>=`` of ``a >= b``): the last token of ``kinds`` before the
        right operand's first token (after the left operand's last known one), else the first after the left
        operand; the node's first token when neither is known."""
        wanted = frozenset(kinds)
        left, right = node.args.get("this"), node.args.get("expression")
        left_span = self.span(left) if isinstance(left, exp.Expr) else None
        right_offset = self.node_offset(right) if isinstance(right, exp.Expr) else None
        floor = self.token_index_of(left_span[1]) if left_span is not None else -1
        if right_offset is not None:
            index = self.token_index_of(right_offset) - 1
            while index > floor:
                if self.tokens[index].token_type in wanted:
                    return self.position(self.tokens[index].start)
                index -= 1
        if left_span is not None:
            for token in self.tokens[floor + 1 :]:
                if token.token_type in wanted:
                    return self.position(token.start)
        return self.node_position(node)

    def text_of(self, node: exp.Expr) -> str:
        """``node`` as written: from its first token to its last known one, extended over the closing brackets
        that balance it (sqlglot keeps no offsets for ``)``); sqlglot's Trino SQL when no offset is known."""
        offset = self.node_offset(node)
        span = self.span(node)
        if offset is None or span is None:
            return node.sql(dialect="trino")
        first = self.token_at(offset)
        last = bisect_right(self._token_starts, span[1]) - 1
        if first is None or last < first:
            return node.sql(dialect="trino")
        depth = 0
        for token in self.tokens[first : last + 1]:
            depth += _DEPTH.get(token.token_type, 0)
        while depth > 0 and last + 1 < len(self.tokens):
            last += 1
            depth += _DEPTH.get(self.tokens[last].token_type, 0)
        return self.text[offset : self.tokens[last].end + 1]


def _walk(node: exp.Expr) -> Iterable[exp.Expr]:
    yield from node.walk()


_DEPTH = {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1, TokenType.L_BRACKET: 1, TokenType.R_BRACKET: -1}
#: The tokens before a node's first known token that belong to it, nearest first, one token per step (each step
#: the texts it may be): ``CAST (`` before a cast's operand, ``CASE WHEN`` before a condition, ``DATE`` before a
#: typed literal's string.
_TYPED_LITERALS = frozenset({"DATE", "TIMESTAMP", "TIME", "DECIMAL", "REAL", "DOUBLE", "JSON", "CHAR", "VARCHAR"})
_LEADING: dict[type[exp.Expr], tuple[frozenset[str], ...]] = {
    exp.Cast: (frozenset({"("}) | _TYPED_LITERALS, frozenset({"CAST"})),
    exp.TryCast: (frozenset({"("}), frozenset({"TRY_CAST"})),
    exp.Case: (frozenset({"WHEN", "CASE"}), frozenset({"CASE"})),
    exp.Interval: (frozenset({"INTERVAL"}),),
    exp.Paren: (frozenset({"("}),),
    exp.Array: (frozenset({"["}), frozenset({"ARRAY"})),
}
