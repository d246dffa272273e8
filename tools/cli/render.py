"""The one renderer of what the commands print: tables (``rich``), JSON and CSV of rows and columns, and the plain
padded and Markdown tables of the demo's and the benchmarks' reports.

Every cell becomes a :class:`rich.text.Text` (:func:`text`), never markup: a value such as ``[mobile, tablet]``
prints as written (rich would read it as a style tag and print nothing), and control characters and bidi
overrides are made visible (:func:`printable`), so data never drives the terminal. A console (:func:`console_for`)
reads no markup and highlights nothing: off a terminal (a pipe, a file) it has a fixed width, so the output does
not depend on where it goes. Imports only the standard library and ``rich``: ``local/`` and ``bench/`` use it too.
"""

from __future__ import annotations

import csv
import io
import json
import math
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

_BIDI_CONTROLS = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def printable(value: str) -> str:
    """``value`` with control characters (ANSI escapes among them) and bidi overrides made visible (``\\x1b``)."""
    if value.isprintable():
        return value
    out = []
    for char in value:
        if unicodedata.category(char) == "Cc" or ord(char) in _BIDI_CONTROLS:
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


def text(value: Any, *, style: str = "") -> Text:
    """A cell: ``value`` as it is when it is a :class:`~rich.text.Text`, else its ``str`` made printable; never
    read as markup."""
    if isinstance(value, Text):
        return value
    return Text(printable(str(value)), style=style)


#: A double in a table cell shows this many digits after the point at most (JSON and CSV keep the value whole).
DISPLAY_DECIMALS = 4


def display_float(value: float) -> str:
    """A double for people: at most :data:`DISPLAY_DECIMALS` digits after the point, trailing zeros dropped but
    one (``12.3457``, ``3.0``); very large or very small magnitudes in exponent form (``1.23457e+18``,
    ``1.5e-07``); Trino's names for the non-finite values (``NaN``, ``Infinity``, ``-Infinity``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    magnitude = abs(value)
    if magnitude >= 1e15 or 0 < magnitude < 10**-DISPLAY_DECIMALS:
        return f"{value:.6g}"
    shown = f"{value:.{DISPLAY_DECIMALS}f}".rstrip("0")
    return shown + "0" if shown.endswith(".") else shown


def data_cell(value: Any, *, none: str = "NULL") -> Text:
    """A cell of query data: ``None`` as ``none`` (``NULL`` dimmed), booleans ``true``/``false``, doubles rounded
    for display (:func:`display_float`), nested values as compact JSON."""
    if value is None:
        return Text(none, style="dim" if none == "NULL" else "")
    if isinstance(value, bool):
        return Text("true" if value else "false")
    if isinstance(value, float):
        return Text(display_float(value))
    if isinstance(value, (dict, list)):
        return text(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    return text(value)


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]] = (),
    *,
    right: Collection[str] = (),
    fold: Collection[str] | bool = (),
    **options: Any,
) -> Table:
    """A ``rich`` table of ``columns`` (left-justified but those in ``right``; ``fold``: the columns, or all,
    whose long cells wrap onto more lines instead of being cut) holding ``rows`` (one cell per column, each
    through :func:`text`). ``options`` go to :class:`rich.table.Table` (``title``, ``caption``, ``show_lines``)."""
    made = Table(**options)
    for name in columns:
        folds = fold is True or (not isinstance(fold, bool) and name in fold)
        made.add_column(
            text(name), justify="right" if name in right else "left", overflow="fold" if folds else "ellipsis"
        )
    for row in rows:
        add_row(made, *row)
    return made


def add_row(made: Table, *cells: Any, style: str | None = None) -> None:
    """One more row of ``made``, each cell through :func:`text` (``style``: the whole row's, e.g. ``bold``)."""
    made.add_row(*(text(cell) for cell in cells), style=style)


def console_for(out: TextIO, *, width: int = 160, soft_wrap: bool = False) -> Console:
    """A console writing to ``out``: no markup, no highlighting. On a terminal, the terminal's width; elsewhere
    ``width`` columns, and with ``soft_wrap`` lines as long as their text (a table as wide as its data)."""
    terminal = out.isatty()
    return Console(
        file=out,
        width=None if terminal else width,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=soft_wrap and not terminal,
    )


def print_json(out: TextIO, document: Any, *, indent: int | None = 2, ensure_ascii: bool = False) -> None:
    """``document`` as JSON text and a newline (NaN and infinities refused: they are not JSON)."""
    out.write(json.dumps(document, indent=indent, ensure_ascii=ensure_ascii, allow_nan=False) + "\n")


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, lineterminator: str = "\r\n") -> str:
    """CSV (RFC 4180 quoting; ``lineterminator`` ends each line): a header row of ``columns``, then ``rows``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=lineterminator)
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


Align = Literal["<", ">"]


def padded_line(cells: Sequence[tuple[Any, int, Align]], *, separator: str = "  ") -> str:
    """One line of a plain-text table: each ``(value, width, align)`` padded to at least ``width`` characters,
    left (``<``) or right (``>``), joined by ``separator``."""
    return separator.join(f"{value!s:{align}{width}}" for value, width, align in cells)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with padded columns (readable as plain text too).

    ``headers`` are the column titles; each row holds one cell per header, already formatted. Returns the lines
    joined with newlines, without a trailing one.
    """
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


__all__ = [
    "add_row",
    "console_for",
    "csv_text",
    "data_cell",
    "display_float",
    "markdown_table",
    "padded_line",
    "print_json",
    "printable",
    "table",
    "text",
]
