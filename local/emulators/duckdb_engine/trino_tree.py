"""Helpers of the Trino rewrites (:mod:`.trino_semantics`, :mod:`.trino_functions`): the refusal, DuckDB templates,
literal text."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

__all__ = ["Refused", "athena_only", "duck", "literal_text"]


class Refused(Exception):
    """The local engine cannot answer as Athena would: ``error_code`` (Trino's) and a one-line ``message``."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def athena_only(construct: str) -> Refused:
    """The one line for a construct Athena runs and the local engine cannot reproduce faithfully."""
    return Refused("NOT_SUPPORTED", f"runs on Athena only: {construct}; the check validated it")


def duck(template: str, **operands: exp.Expr) -> exp.Expr:
    """A DuckDB expression from `template` whose identifiers ``_a``, ``_b``, ... are replaced by `operands`."""
    tree = sqlglot.parse_one(template, read="duckdb")
    for column in list(tree.find_all(exp.Column)):
        if not column.table and column.name in operands:
            column.replace(operands[column.name].copy())
    return tree


def literal_text(node: exp.Expr | None) -> str | None:
    """The text of a string literal (None when `node` is not one)."""
    return node.this if isinstance(node, exp.Literal) and node.is_string else None
