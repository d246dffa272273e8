"""Trino's regular expressions (Joni, Java's syntax) for the local engine: patterns as Python's ``re`` reads them,
the functions DuckDB's RE2 cannot answer as Trino does, and Java's replacement strings.

Sources: functions/regexp.md and ``JoniRegexpFunctions.java`` / ``JoniRegexpReplaceLambdaFunction.java`` (trinodb/trino
at 03d8e5abc686c5c4a9f96ca14db07e2aed880174 and 19a0b3068a06422f155df75556c276a82a881509): after an empty match the
search moves one code point on; ``$n`` reads as many digits as name an existing group; ``${name}`` a named group;
``\\x`` is ``x``; a group past the pattern's is INVALID_FUNCTION_ARGUMENT.

:func:`python_pattern` translates a Java pattern for ``re`` (ASCII classes, as Java's ``\\d \\w \\s \\b``; ``(?<n>``
named groups; ``\\z``) and returns None for what ``re`` reads differently (``\\p{..}``, ``\\Q..\\E``, ``&&`` in a class,
``\\h \\R \\X \\G \\Z \\v \\e \\c \\x{..} \\0``, a case-insensitive flag: regexp.md says Trino's ``(?i)`` is
Unicode-aware): the caller keeps DuckDB's RE2 for those, or refuses.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from sqlglot import exp

from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import TrinoType

__all__ = [
    "NotReproduced",
    "may_match_empty",
    "python_pattern",
    "re2_rewrite",
    "regexp_extract",
    "regexp_extract_all",
    "regexp_like",
    "regexp_parts",
    "regexp_position",
    "regexp_replace",
    "regexp_split",
    "replacement_tokens",
    "rewrite_regexp",
]

#: Escapes whose meaning differs between Java and Python's ``re`` (or that ``re`` lacks).
_UNLIKE: Final = re.compile(r"\\[pPQEhHRXGZvVeck]|\\x\{|\\0|&&|\(\?[a-zA-Z]*[dux]")
_INLINE_FLAGS: Final = re.compile(r"\(\?[imsx]+\)")
_ASSERTIONS: Final = re.compile(r"\\[bBAZz]|[$^]|\(\?<?[=!]")
#: The assertions (and lookarounds without nested groups) removed to judge whether the rest may match ''.
_ASSERTIONS_STRIPPED: Final = re.compile(r"(?<!\\)(?:\\[bBAZz]|[$^])|\(\?<?[=!][^()]*\)")


@functools.lru_cache(maxsize=256)
def python_pattern(pattern: str) -> re.Pattern[str] | None:
    """`pattern` (Java's syntax) compiled for Python's ``re``; None when ``re`` would read it differently.

    :raises ValueError: the pattern is not valid (Trino: INVALID_FUNCTION_ARGUMENT)."""
    escaped = re.sub(r"\\\\", "", pattern)  # \\ is a literal backslash: not the start of an escape
    if _UNLIKE.search(escaped) or re.search(r"\[[^\]]*\[", escaped):  # nested classes: Java's union
        return None
    if re.search(r"\(\?[a-z]*i", escaped):  # regexp.md: (?i) is Unicode-aware; re's is ASCII-only with re.ASCII
        return None
    translated = re.sub(r"(?<!\\)\(\?<(?![=!])", "(?P<", pattern).replace(r"\z", r"\Z")
    flags = _INLINE_FLAGS.search(translated)
    if flags is not None and flags.start() > 0:  # Java: from there on; re: only at the start
        if not re.fullmatch(r"(?:\^|\\A)*", translated[: flags.start()]):
            return None
        translated = flags.group(0) + translated[: flags.start()] + translated[flags.end() :]
    try:
        return re.compile(translated, re.ASCII)
    except re.error as exc:
        raise ValueError(f"Invalid regular expression: {exc}") from None


def may_match_empty(pattern: re.Pattern[str]) -> bool:
    """Whether `pattern` may match an empty string somewhere (then RE2's global replace differs from Java's)."""
    if pattern.fullmatch("") is not None:
        return True
    if _ASSERTIONS.search(pattern.pattern) is None:
        return False
    # without its zero-width assertions, can the rest match ''? ('\\s+$' cannot: RE2 answers as Java does)
    rest = _ASSERTIONS_STRIPPED.sub("", pattern.pattern)
    try:
        return re.compile(rest, pattern.flags).fullmatch("") is not None
    except re.error:
        return True


def _compiled(pattern: str) -> re.Pattern[str]:
    compiled = python_pattern(pattern)
    if compiled is None:
        raise ValueError(f"pattern not reproduced locally: {pattern}")
    return compiled


def _matches(source: str, pattern: re.Pattern[str], start: int = 0) -> list[re.Match[str]]:
    """Trino's successive matches from `start` (after an empty match, one code point on; Python's finditer agrees)."""
    return list(pattern.finditer(source, start))


def regexp_position(source: str, pattern: str, start: int, occurrence: int) -> int:
    """regexp_position: the 1-based position of the `occurrence`-th match from `start`, or -1."""
    if start < 1:
        raise ValueError("start position cannot be smaller than 1")
    if occurrence < 1:
        raise ValueError("occurrence cannot be smaller than 1")
    if start > len(source):
        return -1
    found = _matches(source, _compiled(pattern), start - 1)
    return found[occurrence - 1].start() + 1 if len(found) >= occurrence else -1


def regexp_like(source: str, pattern: str) -> bool:
    """regexp_like: whether `pattern` matches somewhere in `source`."""
    return _compiled(pattern).search(source) is not None


def regexp_extract(source: str, pattern: str, group: int) -> str | None:
    """regexp_extract: `group` of the first match; NULL without a match or when the group took no part."""
    match = _compiled(pattern).search(source)
    return None if match is None else match.group(group)


def regexp_extract_all(source: str, pattern: str, group: int) -> list[str | None]:
    """regexp_extract_all: `group` of each match (NULL where it took no part)."""
    return [match.group(group) for match in _matches(source, _compiled(pattern))]


def regexp_split(source: str, pattern: str) -> list[str]:
    """regexp_split: the pieces between Trino's successive matches (empty ones included; groups are not pieces)."""
    pieces: list[str] = []
    position = 0
    for match in _matches(source, _compiled(pattern)):
        pieces.append(source[position : match.start()])
        position = match.end()
    pieces.append(source[position:])
    return pieces


def regexp_parts(source: str, pattern: str) -> dict[str, list[str] | list[list[str | None]]]:
    """For regexp_replace with a lambda: ``parts`` the n+1 unmatched pieces, ``groups`` the n matches' groups."""
    parts: list[str] = []
    groups: list[list[str | None]] = []
    position = 0
    for match in _matches(source, _compiled(pattern)):
        parts.append(source[position : match.start()])
        groups.append(list(match.groups()))
        position = match.end()
    parts.append(source[position:])
    return {"parts": parts, "groups": groups}


class NotReproduced(Exception):
    """A replacement the local engine does not reproduce (RE2 names groups 0..9 only)."""


def replacement_tokens(text: str, pattern: re.Pattern[str]) -> tuple[str | int, ...]:
    """A Java replacement as literal text and group numbers: ``$1``, ``$12`` (as many digits as name a group),
    ``${name}``, ``\\x`` (x). :raises ValueError: Trino's "Illegal replacement sequence" (INVALID_FUNCTION_ARGUMENT)."""
    registers = pattern.groups + 1
    out: list[str | int] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 == len(text):
                raise ValueError(f"Illegal replacement sequence: {text}")
            out.append(text[index + 1])
            index += 2
        elif char == "$":
            index += 1
            if index == len(text):
                raise ValueError(f"Illegal replacement sequence: {text}")
            if text[index] == "{":
                end = text.find("}", index)
                name = text[index + 1 : end if end >= 0 else len(text)]
                if name not in pattern.groupindex:
                    raise ValueError(f"Illegal replacement sequence: unknown group {{ {name} }}")
                out.append(pattern.groupindex[name])
                index = end + 1 if end >= 0 else len(text)
                continue
            if text[index] not in "0123456789":
                raise ValueError(f"Illegal replacement sequence: {text}")
            group = int(text[index])
            if group >= registers:
                raise ValueError(f"Illegal replacement sequence: unknown group {group}")
            index += 1
            while index < len(text) and text[index] in "0123456789" and group * 10 + int(text[index]) < registers:
                group, index = group * 10 + int(text[index]), index + 1
            out.append(group)
        else:
            out.append(char)
            index += 1
    return tuple(out)


def re2_rewrite(tokens: tuple[str | int, ...]) -> str:
    """The tokens as an RE2 rewrite string (``\\1``; a backslash doubled). :raises NotReproduced: a group past 9."""
    if any(isinstance(token, int) and token > 9 for token in tokens):
        raise NotReproduced("regexp_replace with a reference to a group past the ninth")
    return "".join(f"\\{token}" if isinstance(token, int) else token.replace("\\", "\\\\") for token in tokens)


def regexp_replace(source: str, pattern: str, replacement: str) -> str:
    """regexp_replace with Java's matching (empty matches next to a match count, as Joni's)."""
    compiled = _compiled(pattern)
    tokens = replacement_tokens(replacement, compiled)

    def expand(match: re.Match[str]) -> str:
        return "".join(token if isinstance(token, str) else (match.group(token) or "") for token in tokens)

    return compiled.sub(expand, source)


_PATTERNED: Final = (
    exp.RegexpLike,
    exp.RegexpExtract,
    exp.RegexpExtractAll,
    exp.RegexpReplace,
    exp.RegexpSplit,
    exp.RegexpCount,
)


def _failure(value: exp.Expr, message: str, kind: str = "VARCHAR") -> exp.Expr:
    """Trino's run-time INVALID_FUNCTION_ARGUMENT for each row whose `value` is not NULL."""
    quoted = message.replace("'", "''")
    return duck(
        f"CASE WHEN _a IS NOT NULL THEN CAST(error('INVALID_FUNCTION_ARGUMENT: {quoted}') AS {kind}) END", _a=value
    )


def rewrite_regexp(node: exp.Expr, varchar: TrinoType) -> tuple[TrinoType, exp.Expr | None] | None:
    """The regexp calls handled here (None: not handled): a literal pattern Java's syntax rejects fails each row
    (INVALID_FUNCTION_ARGUMENT); regexp_extract(_all) of a group past the pattern's fails; regexp_replace with Java's
    replacement and, where RE2 matches differently (a pattern that may match empty) or with a lambda, Python's
    ``re``; regexp_position. :raises Refused: what the local engine does not reproduce."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == "regexp_position":
        return _position(node)
    if not isinstance(node, _PATTERNED):
        return None
    text = literal_text(node.expression)
    if text is None:
        if isinstance(node, exp.RegexpReplace) and isinstance(node.args.get("replacement"), exp.Lambda):
            raise athena_only("regexp_replace with a lambda and a pattern that is not a literal")
        return None
    try:
        compiled = python_pattern(text)
    except ValueError as exc:
        kind = {exp.RegexpLike: "BOOLEAN", exp.RegexpCount: "BIGINT"}.get(type(node), "VARCHAR")
        kind = "VARCHAR[]" if isinstance(node, (exp.RegexpExtractAll, exp.RegexpSplit)) else kind
        return (TrinoType(kind.lower().replace("[]", "")) if "[]" not in kind else TrinoType("array")), _failure(
            node.this, str(exc), kind
        )
    if compiled is None:  # RE2 (DuckDB's) as before: the rules of trino_functions
        if isinstance(node, exp.RegexpReplace) and isinstance(node.args.get("replacement"), exp.Lambda):
            raise athena_only("regexp_replace with a lambda and a pattern the local engine reads differently")
        if not isinstance(node, exp.RegexpReplace):
            node.set("expression", _re2(text))
        return None
    if isinstance(node, (exp.RegexpExtract, exp.RegexpExtractAll)):
        group = node.args.get("group")
        kind = "VARCHAR[]" if isinstance(node, exp.RegexpExtractAll) else "VARCHAR"
        shown = varchar if kind == "VARCHAR" else TrinoType("array")
        if isinstance(group, exp.Neg) and isinstance(group.this, exp.Literal) and group.this.is_int:
            return shown, _failure(node.this, "Group cannot be negative", kind)
        if isinstance(group, exp.Literal) and group.is_int and int(group.this) > compiled.groups:
            message = f"Pattern has {compiled.groups} groups. Cannot access group {group.this}"
            return shown, _failure(node.this, message, kind)
        if (
            _re2_lacks(text)
            or isinstance(group, exp.Literal)
            and group.is_int
            and int(group.this) > 0
            and _optional_groups(text)
        ):
            # a group that took no part in a match is NULL in Trino, '' in RE2: Python's re tells them apart
            function = "trino_regexp_extract_all" if kind == "VARCHAR[]" else "trino_regexp_extract"
            call = duck(f"{function}(_a, _p, _g)", _a=node.this, _p=node.expression, _g=group or exp.Literal.number(0))
            return shown, call
        node.set("expression", _re2(text))
        return None
    if isinstance(node, exp.RegexpReplace):
        return varchar, _replace(node, text, compiled)
    if isinstance(node, exp.RegexpCount):  # sqlglot's translation counts 0 for '' (Trino: every position)
        function = "trino_regexp_extract_all(_a, _p, 0)" if _re2_lacks(text) else "regexp_extract_all(_a, _p)"
        pattern = node.expression if _re2_lacks(text) else _re2(text)
        return TrinoType("bigint"), duck(f"CAST(len({function}) AS BIGINT)", _a=node.this, _p=pattern)
    if isinstance(node, exp.RegexpSplit) and (may_match_empty(compiled) or _re2_lacks(text)):  # RE2 drops empty pieces
        return TrinoType("array"), duck("trino_regexp_split(_a, _p)", _a=node.this, _p=node.expression)
    if isinstance(node, exp.RegexpLike) and _re2_lacks(text):
        return TrinoType("boolean"), duck("trino_regexp_like(_a, _p)", _a=node.this, _p=node.expression)
    node.set("expression", _re2(text))
    return None


def _re2_lacks(pattern: str) -> bool:
    """Whether `pattern` uses what RE2 lacks and Java and Python's re have: lookaround, atomic groups, possessive
    quantifiers, back references (DuckDB would fail the query)."""
    if re.search(r"\\[1-9]|\\k<", re.sub(r"\\\\", "", pattern)):
        return True
    plain = re.sub(r"\[[^\]]*\]", "C", re.sub(r"\\.", "E", pattern))
    return re.search(r"\(\?<?[=!]|\(\?>|[*+?}]\+", plain) is not None


def _optional_groups(pattern: str) -> bool:
    """Whether a group of `pattern` may take no part in a match (an alternative, an optional group)."""
    return "|" in pattern or re.search(r"\)(?:[?*]|\{0)", pattern) is not None


def _re2(text: str) -> exp.Expr:
    """A Java pattern as an RE2 literal (``(?<name>`` is RE2's ``(?P<name>``)."""
    return exp.Literal.string(re.sub(r"(?<!\\)\(\?<(?![=!])", "(?P<", text))


def _replace(node: exp.RegexpReplace, text: str, compiled: re.Pattern[str]) -> exp.Expr:
    replacement = node.args.get("replacement")
    if isinstance(replacement, exp.Lambda):
        return _replace_lambda(node, replacement, compiled.groups)
    if isinstance(replacement, exp.Null):
        return duck("CAST(NULL AS VARCHAR)")
    rewrite = "" if replacement is None else literal_text(replacement)
    if rewrite is None:
        raise athena_only("regexp_replace with a replacement that is not a literal")
    try:
        tokens = replacement_tokens(rewrite, compiled)
    except ValueError as exc:
        return _failure(node.this, str(exc))
    if may_match_empty(compiled) or _re2_lacks(text):  # RE2 skips an empty match next to a match; Java does not
        call = "trino_regexp_replace(_a, _p, _r)"
        return duck(call, _a=node.this, _p=exp.Literal.string(text), _r=exp.Literal.string(rewrite))
    try:
        converted = re2_rewrite(tokens)
    except NotReproduced as exc:
        raise athena_only(str(exc)) from None
    return duck("regexp_replace(_a, _p, _r, 'g')", _a=node.this, _p=_re2(text), _r=exp.Literal.string(converted))


def _replace_lambda(node: exp.RegexpReplace, function: exp.Lambda, groups_count: int) -> exp.Expr:
    """regexp_replace(s, p, x -> f(x)): the unmatched pieces and f of each match's groups, joined; a NULL from f
    makes the result NULL (JoniRegexpReplaceLambdaFunction); ``x[k]`` past the pattern's groups fails each match
    (INVALID_FUNCTION_ARGUMENT, AbstractTestRegexpFunctions.testRegexpReplaceLambda)."""
    if len(function.expressions) != 1:
        raise Refused("TYPE_MISMATCH", "regexp_replace takes a lambda of one argument (the groups)")
    name = function.expressions[0].name
    holder = exp.Paren(this=function.this.copy())  # the body may itself be replaced (x -> x[1])
    for subscript in list(holder.find_all(exp.Bracket)):
        if subscript.this.name != name or isinstance(subscript.this, exp.Column) and subscript.this.table:
            continue
        index = subscript.expressions[0] if len(subscript.expressions) == 1 else None
        negative = isinstance(index, exp.Neg)
        digits = index.this if negative and index is not None else index
        if not (isinstance(digits, exp.Literal) and digits.is_int):
            raise athena_only("regexp_replace with a lambda subscript that is not a literal")
        position = (-int(digits.this) if negative else int(digits.this)) + (0 if subscript.args.get("offset") else 1)
        if position < 1 or position > groups_count:
            message = (
                "SQL array indices start at 1"
                if position < 1
                else f"Array subscript must be less than or equal to array length: {position} > {groups_count}"
            )
            subscript.replace(duck(f"CAST(error('INVALID_FUNCTION_ARGUMENT: {message}') AS VARCHAR)"))
    groups = duck("struct_extract(trino_r, 'groups')[trino_i]")
    for reference in list(holder.find_all(exp.Identifier, exp.Column)):
        if reference.name == name and (
            isinstance(reference, exp.Column) or not isinstance(reference.parent, exp.Column)
        ):
            if isinstance(reference, exp.Column) and reference.table:
                continue
            reference.replace(groups.copy())
    # the Python function runs once per row: its answer is bound to trino_r by a lambda over a one-element list
    template = (
        "CASE WHEN _a IS NOT NULL THEN list_transform([trino_regexp_parts(_a, _p)], lambda trino_r:"
        " list_reduce(list_concat([struct_extract(trino_r, 'parts')[1]],"
        " list_transform(range(1, len(struct_extract(trino_r, 'parts'))), lambda trino_i: CAST(_f AS VARCHAR)"
        " || struct_extract(trino_r, 'parts')[trino_i + 1])), lambda trino_x, trino_y: trino_x || trino_y))[1] END"
    )
    return duck(template, _a=node.this, _p=node.expression, _f=holder.this)


def _position(node: exp.Anonymous) -> tuple[TrinoType, exp.Expr]:
    """regexp_position(s, p[, start[, occurrence]]) on Python's ``re`` (integer)."""
    args = list(node.expressions)
    if len(args) < 2 or len(args) > 4:
        return TrinoType("integer"), None  # type: ignore[return-value]
    text = literal_text(args[1])
    if text is None:
        raise athena_only("regexp_position with a pattern that is not a literal")
    try:
        compiled = python_pattern(text)
    except ValueError as exc:
        return TrinoType("integer"), _failure(args[0], str(exc), "INTEGER")
    if compiled is None:
        raise athena_only("regexp_position with a pattern Java and the local engine read differently")
    start = args[2] if len(args) > 2 else exp.Literal.number(1)
    occurrence = args[3] if len(args) > 3 else exp.Literal.number(1)
    call = duck("trino_regexp_position(_a, _p, _s, _o)", _a=args[0], _p=args[1], _s=start, _o=occurrence)
    return TrinoType("integer"), call
