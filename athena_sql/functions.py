"""The function list of Athena engine version 3, kept as data (``functions.toml``), with its source and date.

Shape of ``functions.toml``::

    [source]                      # where the list comes from, and when it was taken
    trino_release = "..."         # the pinned Trino release whose docs define the functions
    trino_commit = "..."          # the commit of trinodb/trino read
    trino_docs = "docs/src/main/sphinx/functions/"
    athena_differences = "https://docs.aws.amazon.com/athena/latest/ug/engine-versions-reference-0003.html"
    retrieved = "YYYY-MM-DD"

    [functions.<name>]            # lowercase name
    kind = "scalar" | "aggregate" | "window"
    signatures = ["<name>(<type>, ...) -> <type>", ...]   # as Trino's docs write them
    doc = "functions/math.md"     # the doc page, relative to trino_docs

    [athena]
    not_supported = ["<name>", ...]   # Trino functions Athena engine v3 documents as not supported

Raises :class:`FunctionCatalogError` when the file is malformed (ours, not the user's).
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
    "source",
    "suggestions",
]

CATALOG_PATH = Path(__file__).with_name("functions.toml")
Kind = Literal["scalar", "aggregate", "window"]
_SIGNATURE = re.compile(
    r"^\s*(?P<name>[a-z_][a-z0-9_]*)\s*\((?P<arguments>.*)\)\s*(?:->\s*(?P<returns>.+?))?\s*$", re.IGNORECASE
)


class FunctionCatalogError(Exception):
    """``functions.toml`` is malformed: ``path`` and what is wrong."""


@dataclass(frozen=True)
class Signature:
    """One documented form: ``arguments`` as Trino's docs write each one (``x``, ``bigint``, ``array(T)``,
    ``value ...``), ``returns`` the documented result (``bigint``, ``[same as input]``), ``text`` the line."""

    arguments: tuple[str, ...]
    returns: str
    text: str


@dataclass(frozen=True)
class Function:
    """One function Athena engine v3 has: its lowercase ``name``, ``kind``, documented signatures and doc page."""

    name: str
    kind: Kind
    signatures: tuple[Signature, ...]
    doc: str

    @property
    def arities(self) -> frozenset[int] | None:
        """The argument counts the signatures allow; ``None`` when one is variadic (``...``)."""
        counts: set[int] = set()
        for signature in self.signatures:
            if any("..." in argument for argument in signature.arguments):
                return None
            counts.add(len(signature.arguments))
        return frozenset(counts)


def parse_signature(text: str) -> Signature:
    """``"abs(x) -> [same as input]"`` -> Signature(("x",), "[same as input]"); raises FunctionCatalogError."""
    match = _SIGNATURE.match(text)
    if match is None:
        raise FunctionCatalogError(f"{CATALOG_PATH.name}: not a signature: {text!r}")
    return Signature(_split_arguments(match.group("arguments")), (match.group("returns") or "").strip(), text)


def _split_arguments(text: str) -> tuple[str, ...]:
    """Top-level comma split (``map(K, V), x`` is two arguments)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
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


@functools.cache
def _load() -> tuple[Mapping[str, Function], Mapping[str, Any]]:
    try:
        data = tomllib.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise FunctionCatalogError(f"{CATALOG_PATH}: {exc}") from exc
    unsupported = set(data.get("athena", {}).get("not_supported", []))
    functions: dict[str, Function] = {}
    for name, entry in data.get("functions", {}).items():
        if name in unsupported:
            continue
        kind = entry.get("kind", "scalar")
        if kind not in ("scalar", "aggregate", "window"):
            raise FunctionCatalogError(f"{CATALOG_PATH.name}: functions.{name}: unknown kind {kind!r}")
        signatures = tuple(parse_signature(text) for text in entry.get("signatures", []))
        functions[name] = Function(name, kind, signatures, entry.get("doc", ""))
    return MappingProxyType(functions), MappingProxyType(dict(data.get("source", {})))


def catalog() -> Mapping[str, Function]:
    """Every function Athena engine v3 has (Trino's list minus Athena's not-supported ones), by lowercase name."""
    return _load()[0]


def source() -> Mapping[str, Any]:
    """The ``[source]`` table: the pinned Trino release and commit, Athena's differences page, the date."""
    return _load()[1]


def lookup(name: str) -> Function | None:
    """The function ``name`` (any case), or ``None`` when Athena engine v3 has no such function."""
    return catalog().get(name.lower())


def suggestions(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` known names closest to ``name`` (for "did you mean")."""
    return difflib.get_close_matches(name.lower(), list(catalog()), n=n, cutoff=0.6)
