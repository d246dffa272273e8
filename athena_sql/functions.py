"""The function list of Athena engine version 3, kept as data (``functions.toml``), with its source and date.

Shape of ``functions.toml``::

    [source]                      # where the list comes from, and when it was taken
    trino_release = "..."         # the pinned Trino release whose docs define the functions
    trino_commit = "..."          # the commit of trinodb/trino whose list.md was read
    trino_docs = "docs/src/main/sphinx/functions/"
    athena_differences = "https://docs.aws.amazon.com/athena/latest/ug/engine-versions-reference-0003.html"
    retrieved = "YYYY-MM-DD"

    [source.pages]                # the commit each topic page was read at (page name -> commit)

    [functions.<name>]            # lowercase name
    kind = "scalar" | "aggregate" | "window" | "table"   # every aggregate is also usable as a window function
    form = "call" | "special" | "niladic"                # default "call"; see Function.form
    signatures = ["<name>(<type>, ...) -> <type>", ...]  # as Trino's docs write them (whitespace normalized)
    doc = "functions/math.md"     # the doc page, relative to trino_docs' parent
    listed = false                # optional: documented on a topic page but absent from list.md
    min_arguments = 2             # optional: a documented lower bound the signatures do not show
    notes = "..."                 # optional

    [athena]
    not_supported = ["<name>", ...]      # Trino functions Athena engine v3 does not have (documented)
    additions = []                       # Athena-only functions (none documented)
    max_arguments = 127                  # "Functions cannot take more than 127 parameters"
    [athena.why]                         # name -> the reason and its source, for every not_supported name
    [athena.changed]                     # name -> a documented engine v3 behaviour change
    [athena.unverified]                  # name -> why Athena's support is undocumented (kept in the catalog)

Source: Trino's docs (docs/src/main/sphinx/functions/list.md and the topic pages' ``:::{function}`` and
``:::{data}`` directives) at the commits named in ``[source]``; Athena's differences at
https://docs.aws.amazon.com/athena/latest/ug/engine-versions-reference-0003.html. Athena may lag or lead the pinned
release. Raises :class:`FunctionCatalogError` when the file is malformed (ours, not the user's).
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "CATALOG_PATH",
    "Function",
    "FunctionCatalogError",
    "Signature",
    "catalog",
    "lookup",
    "max_arguments",
    "not_supported",
    "parse_signature",
    "source",
    "suggestions",
]

CATALOG_PATH = Path(__file__).with_name("functions.toml")
Kind = Literal["scalar", "aggregate", "window", "table"]
Form = Literal["call", "special", "niladic"]
_KINDS = ("scalar", "aggregate", "window", "table")
_FORMS = ("call", "special", "niladic")
_SIGNATURE = re.compile(
    r"^\s*(?P<name>[a-z_][a-z0-9_]*)\s*\((?P<arguments>.*)\)\s*(?:->\s*(?P<returns>.+?))?\s*$", re.IGNORECASE
)


class FunctionCatalogError(Exception):
    """``functions.toml`` is malformed: ``path`` and what is wrong."""


@dataclass(frozen=True)
class Signature:
    """One documented form: ``arguments`` as Trino's docs write each one (``x``, ``bigint``, ``array(T)``,
    ``value ...``), optional ones (``lead(x[, offset [, default_value]])``) included; ``returns`` the documented
    result (``bigint``, ``[same as input]``, empty when the docs give none); ``text`` the line."""

    arguments: tuple[str, ...]
    returns: str
    text: str

    @property
    def arities(self) -> frozenset[int] | None:
        """The argument counts this form allows (optional ``[, ...]`` groups expanded); ``None`` when variadic."""
        match = _SIGNATURE.match(self.text)
        inner = match.group("arguments") if match else ""
        counts: set[int] = set()
        for variant in _expand_optional(inner):
            arguments = _split_arguments(variant)
            if any("..." in argument for argument in arguments):
                return None
            counts.add(len(arguments))
        return frozenset(counts)


@dataclass(frozen=True)
class Function:
    """One function Athena engine v3 has: its lowercase ``name``, ``kind``, documented signatures and doc page.

    ``form``: ``"call"`` an ordinary ``name(args)`` call; ``"special"`` a form Trino parses with its own syntax
    (``CAST(x AS t)``, ``EXTRACT(f FROM x)``, ``IF``, ``COALESCE``, ``TRY``, ``POSITION(a IN b)``, the SQL/JSON
    functions, row pattern navigation), so its arguments are not an ordinary list; ``"niladic"`` written without
    parentheses (``current_date``, ``localtimestamp``, ``current_user``). ``listed`` is false for a function its
    topic page documents but list.md (read at an older commit) does not. ``unverified`` is empty when Athena's
    support follows from its docs, else why it does not (newer than the pin, or undocumented by Athena).
    ``changed`` is Athena's documented behaviour change for it (empty when none); ``min_arguments`` a documented
    lower bound on the argument count (0 when the signatures say it all).
    """

    name: str
    kind: Kind
    signatures: tuple[Signature, ...]
    doc: str
    form: Form = "call"
    listed: bool = True
    notes: str = ""
    unverified: str = ""
    changed: str = ""
    min_arguments: int = 0

    @property
    def windowable(self) -> bool:
        """Usable with ``OVER``: window functions and every aggregate ("All aggregate functions can be used as
        window functions by adding the OVER clause", functions/window.md)."""
        return self.kind in ("aggregate", "window")

    @property
    def arities(self) -> frozenset[int] | None:
        """The argument counts the signatures allow; ``None`` when one is variadic or none is documented."""
        if not self.signatures:
            return None
        counts: set[int] = set()
        for signature in self.signatures:
            allowed = signature.arities
            if allowed is None:
                return None
            counts |= allowed
        return frozenset(counts)

    def accepts(self, count: int) -> bool | None:
        """Whether a call with ``count`` arguments matches a documented form; ``None`` when the docs cannot say
        (no signature, or a special form). Variadic forms accept any count from ``min_arguments`` up to
        Athena's limit (:func:`max_arguments`)."""
        if self.form == "special" or not self.signatures:
            return None
        if count < self.min_arguments or count > max_arguments():
            return False
        allowed = self.arities
        return True if allowed is None else count in allowed


def parse_signature(text: str) -> Signature:
    """``"abs(x) -> [same as input]"`` -> Signature(("x",), "[same as input]"); raises FunctionCatalogError."""
    match = _SIGNATURE.match(text)
    if match is None:
        raise FunctionCatalogError(f"{CATALOG_PATH.name}: not a signature: {text!r}")
    longest = _expand_optional(match.group("arguments"))[-1]
    return Signature(_split_arguments(longest), (match.group("returns") or "").strip(), text)


def _expand_optional(text: str) -> list[str]:
    """``"x[, offset [, d]]"`` -> ``["x", "x, offset", "x, offset, d"]``: each top-level ``[...]`` group whose
    content starts with a comma is optional (brackets elsewhere, as in ``array<[same as x]>``, are kept)."""
    start = _optional_group(text)
    if start is None:
        return [text]
    depth, end = 0, len(text)
    for index in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[index], 0)
        if depth == 0:
            end = index
            break
    head, body, tail = text[:start], text[start + 1 : end], text[end + 1 :]
    variants = [head + tail] + [head + inner + tail for inner in _expand_optional(body)]
    expanded: list[str] = []
    for variant in variants:
        expanded.extend(option for option in _expand_optional(variant) if option not in expanded)
    return expanded


def _optional_group(text: str) -> int | None:
    for match in re.finditer(r"\[", text):
        if text[match.end() :].lstrip().startswith(","):
            return match.start()
    return None


def _split_arguments(text: str) -> tuple[str, ...]:
    """Top-level comma split (``map(K, V), x`` is two arguments)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "([<":
            depth += 1
        elif char in ")]>":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return tuple(parts)


def _entry(name: str, entry: Mapping[str, Any], unverified: str, changed: str) -> Function:
    kind = entry.get("kind", "scalar")
    if kind not in _KINDS:
        raise FunctionCatalogError(f"{CATALOG_PATH.name}: functions.{name}: unknown kind {kind!r}")
    form = entry.get("form", "call")
    if form not in _FORMS:
        raise FunctionCatalogError(f"{CATALOG_PATH.name}: functions.{name}: unknown form {form!r}")
    signatures = tuple(parse_signature(text) for text in entry.get("signatures", []))
    for signature in signatures:
        written = _SIGNATURE.match(signature.text)
        if written is None or written.group("name").lower() != name:
            raise FunctionCatalogError(f"{CATALOG_PATH.name}: functions.{name}: signature of another name")
    return Function(
        name,
        kind,
        signatures,
        entry.get("doc", ""),
        form,
        bool(entry.get("listed", True)),
        entry.get("notes", ""),
        unverified,
        changed,
        int(entry.get("min_arguments", 0)),
    )


@functools.cache
def _load() -> tuple[Mapping[str, Function], Mapping[str, Any], Mapping[str, str], int]:
    try:
        data = tomllib.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FunctionCatalogError(f"{CATALOG_PATH}: {exc}") from exc
    athena = data.get("athena", {})
    why = dict(athena.get("why", {}))
    unsupported = {name: why.get(name, "") for name in athena.get("not_supported", [])}
    unverified = dict(athena.get("unverified", {}))
    changed = dict(athena.get("changed", {}))
    known = data.get("functions", {})
    for table, names in (("not_supported", unsupported), ("unverified", unverified), ("changed", changed)):
        for name in names:
            if name not in known:
                raise FunctionCatalogError(f"{CATALOG_PATH.name}: athena.{table}: {name} is not a Trino function")
    functions: dict[str, Function] = {}
    for name, entry in known.items():
        if name not in unsupported:
            functions[name] = _entry(name, entry, unverified.get(name, ""), changed.get(name, ""))
    limit = int(athena.get("max_arguments", 127))
    return (
        MappingProxyType(functions),
        MappingProxyType(dict(data.get("source", {}))),
        MappingProxyType(unsupported),
        limit,
    )


def catalog() -> Mapping[str, Function]:
    """Every function Athena engine v3 has (Trino's list minus Athena's not-supported ones), by lowercase name."""
    return _load()[0]


def source() -> Mapping[str, Any]:
    """The ``[source]`` table: the pinned Trino release and commit, Athena's differences page, the date."""
    return _load()[1]


def not_supported() -> Mapping[str, str]:
    """Trino functions Athena engine v3 does not have: lowercase name -> the reason and its source."""
    return _load()[2]


def max_arguments() -> int:
    """The most arguments Athena engine v3 allows in one call (127, engine-versions-reference-0003.html)."""
    return _load()[3]


def lookup(name: str) -> Function | None:
    """The function ``name`` (any case), or ``None`` when Athena engine v3 has no such function."""
    return catalog().get(name.lower())


def suggestions(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` known names closest to ``name`` (for "did you mean")."""
    return difflib.get_close_matches(name.lower(), list(catalog()), n=n, cutoff=0.6)
