"""The one table format of every report of the benchmarks (:mod:`bench.report`, :mod:`bench.cost_report`,
:mod:`bench.scaling_report`): Markdown, padded so it reads as plain text too (:func:`tools.cli.render.markdown_table`,
the renderer every command uses). Imports nothing of the benchmarks."""

from __future__ import annotations

from tools.cli.render import markdown_table as table

__all__ = ["table"]
