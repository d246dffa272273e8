"""``SELECT prefix.*``: the columns of a relation, or the fields of a row, as Trino's StatementAnalyzer
(``analyzeSelectAllColumns``) expands them.

The prefix names a relation of the query (its alias, else the table's name) or, when none, an expression of row
type; anything else is refused: ``Unable to resolve reference foo`` (TABLE_NOT_FOUND) for a prefix that is neither,
a column that is not a row included (``SELECT non_row.* FROM (VALUES ('true', 1)) t(non_row, b)``); a subquery
without an alias names no relation, so ``SELECT t.a FROM (SELECT t.* FROM (VALUES 1) t(a))`` cannot resolve
``t.a`` (COLUMN_NOT_FOUND). Source: core/trino-main/src/test/java/io/trino/sql/analyzer/TestAnalyzer.java
(``testSelectAllColumns``) at trinodb/trino@009eb018a32bbc675aa442e2f38f0d702038de2b.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from athena_sql.scopes import Columns, Scope

if TYPE_CHECKING:
    from athena_sql.typecheck import _Typer as Typer

__all__ = ["qualified_star"]


def qualified_star(typer: Typer, item: exp.Column, scope: Scope) -> Columns | None:
    """The columns ``item`` (``t.*``) selects; ``None`` when they cannot be known (a multi-part prefix, a relation
    or a column whose type is not known), after refusing a prefix that names nothing with columns."""
    prefix = item.args.get("table")
    if not isinstance(prefix, exp.Identifier) or item.args.get("db") or item.args.get("catalog"):
        return None
    relation = scope.relation_named(prefix.name)
    if relation is not None:
        return dict(relation.columns) if relation.columns is not None else None
    if not scope.knows_every_column():
        return None  # the prefix may be a column of a relation whose columns are not known
    found, kind = scope.resolve(prefix.name, None)
    if found and kind is None:
        return None
    if found and kind is not None and kind.name == "row":
        return {(name or f"_col{i}").lower(): child for i, (name, child) in enumerate(zip(kind.fields, kind.children))}
    what = (
        f"{prefix.name} is a column of type {kind}, not a row or a relation" if found else "no relation has that name"
    )
    message = f"Unable to resolve reference {prefix.name} ({what})"
    typer.refuse(item, "TABLE_NOT_FOUND", typer.source.text_of(item), message)
    return None
