"""The one table format of every report of the benchmarks (:mod:`bench.report`, :mod:`bench.cost_report`,
:mod:`bench.scaling_report`): Markdown, padded so it reads as plain text too. Imports nothing of the benchmarks."""

from __future__ import annotations


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with padded columns (readable as plain text too).

    ``headers`` are the column titles; each row holds one cell per header, already formatted. Returns the lines
    joined with newlines, without a trailing one.
    """
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
