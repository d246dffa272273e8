"""What a check says about a query: refusals (Athena would fail the query) and what it could not decide.

Positions are 1-based lines and columns of the text the user wrote (``query.sql``, named ``:parameters`` and all),
so that ``path:line:column`` opens the right place in an editor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CheckResult", "Diagnostic", "Unchecked"]


@dataclass(frozen=True)
class Diagnostic:
    """One construct Athena refuses.

    ``error_class``: Athena's (Trino's) error name where known (``SYNTAX_ERROR``, ``TYPE_MISMATCH``,
    ``FUNCTION_NOT_FOUND``, ``MISSING_GROUP_BY`` ..., as in Trino's ``StandardErrorCode``), else ``SYNTAX_ERROR``;
    ``construct``: the text refused (``event_ts::date``); ``message``: what is wrong and, where it helps, the fix.
    """

    line: int
    column: int
    error_class: str
    construct: str
    message: str

    def located(self, path: str) -> str:
        """``path:line:column: ERROR_CLASS: message`` (one line)."""
        return f"{path}:{self.line}:{self.column}: {self.error_class}: {self.message}"


@dataclass(frozen=True)
class Unchecked:
    """A construct the check could not judge (it counts as not refused): ``reason`` says why. ``kind``:
    ``"table"`` for a table whose columns the check was not given (so no name or type in it was checked),
    ``"construct"`` for anything else."""

    line: int
    column: int
    construct: str
    reason: str
    kind: str = "construct"

    def located(self, path: str) -> str:
        return f"{path}:{self.line}:{self.column}: not checked: {self.construct}: {self.reason}"


@dataclass(frozen=True)
class CheckResult:
    """Everything one check found: ``refusals`` in text order (empty: Athena would accept what was checked), and
    ``output_types``: the Trino type text of each result column, in order (``varchar(5)``, ``decimal(3,1)``; ``None``
    for a column whose type the check did not derive; empty when the columns are not known: a ``*``, a set
    operation, a refused statement; not compared: two results are equal when they refuse and note the same)."""

    refusals: tuple[Diagnostic, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()
    output_types: tuple[str | None, ...] = field(default=(), compare=False)

    @property
    def refused(self) -> bool:
        return bool(self.refusals)
