"""Which tables, columns and filters a query reads (pure sqlglot), for :mod:`.scan`'s ``DataScannedInBytes``.

- **Scans** (:func:`find_scans`, pure sqlglot): every place a SELECT reads a data table directly (each
  FROM/JOIN source in a sqlglot scope), with the columns it references (select list, WHERE, GROUP BY,
  ORDER BY, HAVING, windows, join conditions and USING, correlated references from subqueries; ``*`` or
  ``t.*``: all columns; ``count(*)``: none; ``r.a``, a field of a row column: all of ``r``) and the number of times the query runs it (a CTE read twice is
  scanned twice, as Trino inlines CTEs; an unused CTE is never scanned). An unqualified column that more than
  one source could hold is counted for every data table that has it (an over-estimate).
- **Pruning** uses only the top-level AND conjuncts of the WHERE of the SELECT that reads the table, and
  only when the table is not on the nullable side of an outer join. A conjunct on partition columns only is
  evaluated by DuckDB on each partition's values: partitions where it is not true are dropped. A conjunct
  ``column <op> constant`` (=, <, <=, >, >=, BETWEEN, IN of constants; either operand order; a constant is
  any expression without columns, subqueries, random or unknown functions, folded by DuckDB) on a data column drops a
  row group whose ``stats_min_value``/``stats_max_value`` (cast to the column's type) prove it false for
  every row. No statistics, a NaN count that is not 0 (floating point), a nested column, ``OR``, ``NOT``,
  ``IS NULL``, ``<>``, a function of the column: no pruning. Pruning never drops data the query needs.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

__all__ = ["RangeFilter", "Scan", "TableSchema", "conjuncts", "find_scans"]

logger = logging.getLogger(__name__)

#: Functions whose value changes per row or per call: a conjunct using one never prunes.
_VOLATILE: Final = (exp.Rand, exp.Randn, exp.Randstr, exp.Shuffle, exp.Uuid, exp.Anonymous)
_FLIPPED: Final[dict[type[exp.Expr], type[exp.Expr]]] = {
    exp.EQ: exp.EQ,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
}


# --------------------------------------------------------------------------------------------------
# Scans: which tables, columns and filters a query reads (pure sqlglot)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableSchema:
    """The columns of a table (lowercase): data columns (in the files) and partition columns (in the paths)."""

    data: frozenset[str]
    partition: frozenset[str] = frozenset()

    @property
    def columns(self) -> frozenset[str]:
        return self.data | self.partition


@dataclass(frozen=True)
class RangeFilter:
    """``column <op> constant``: `keep` is true (or NULL) for a row group that may hold a matching row, in
    terms of ``__min`` and ``__max`` (the row group's statistics)."""

    column: str
    keep: exp.Expr


@dataclass(frozen=True)
class Scan:
    """One direct read of a data table by a SELECT (one FROM/JOIN source)."""

    table: str
    alias: str
    columns: frozenset[str] | None  # referenced columns (lowercase, partition ones included); None: all
    partition_filters: tuple[exp.Expr, ...] = ()  # conjuncts on partition columns only, unqualified
    range_filters: tuple[RangeFilter, ...] = ()
    count: int = 1  # how many times the query runs this scan


def find_scans(tree: exp.Expr, tables: Mapping[str, TableSchema]) -> list[Scan]:
    """The scans of the data tables `tables` (lowercase names) in the bound, normalized query `tree`.

    Never raises on SQL it cannot analyse: it then returns one scan per table of all columns without
    pruning (an over-estimate).
    """
    try:
        return _find_scans(tree, tables)
    except (SqlglotError, AttributeError) as exc:  # e.g. OptimizeError "Alias already used"
        logger.warning("scan accounting: cannot analyse the query (%s); counting whole tables", exc)
        names = {t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() in tables}
        return [Scan(table=name, alias=name, columns=None) for name in sorted(names)]


def _find_scans(tree: exp.Expr, tables: Mapping[str, TableSchema]) -> list[Scan]:
    scopes = list(traverse_scope(tree))
    if not scopes:
        return []
    counts = _scope_counts(scopes)
    referenced: dict[tuple[int, str], set[str] | None] = {}
    for scope in scopes:
        for alias, (_, source) in scope.selected_sources.items():
            if _data_table(source, tables):
                referenced[(id(scope), alias)] = set()

    def reference(name: str, qualifier: str, scope: Scope) -> None:
        for owner, alias in _resolve(name, qualifier, scope, tables):
            columns = referenced.get((id(owner), alias), None)
            if columns is not None:
                columns.add(name)

    def reference_all(scope: Scope, qualifier: str) -> None:
        for alias in scope.selected_sources:
            if (not qualifier or alias == qualifier) and (id(scope), alias) in referenced:
                referenced[(id(scope), alias)] = None

    for scope in scopes:
        for column in _own_columns(scope):
            reference(*_column_reference(column, scope), scope)
        for node in scope.walk():
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                reference_all(scope, node.table)
            elif isinstance(node, exp.Star) and not isinstance(node.parent, (exp.AggFunc, exp.Column)):
                reference_all(scope, "")  # SELECT *, and db.t.* (a Dot): every source of the scope
        for join in scope.expression.args.get("joins") or ():
            for identifier in join.args.get("using") or ():
                reference(identifier.name.lower(), "", scope)

    scans = []
    for scope in scopes:
        for alias, (_, source) in scope.selected_sources.items():
            table = _data_table(source, tables)
            if table is None:
                continue
            partition_filters, range_filters = _filters(scope, alias, tables, tables[table])
            scans.append(
                Scan(
                    table=table,
                    alias=alias,
                    columns=_frozen(referenced[(id(scope), alias)]),
                    partition_filters=partition_filters,
                    range_filters=range_filters,
                    count=counts[id(scope)],
                )
            )
    return scans


def _frozen(columns: set[str] | None) -> frozenset[str] | None:
    return None if columns is None else frozenset(columns)


def _data_table(source: object, tables: Mapping[str, TableSchema]) -> str | None:
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
        name = source.name.lower()
        return name if name in tables else None
    return None


def _scope_counts(scopes: list[Scope]) -> dict[int, int]:
    """How many times each scope runs: the root once, a CTE once per reference (transitively), unused: 0.

    ``traverse_scope`` yields children (and CTEs) before their parents, so the reverse is parents first.
    """
    counts: dict[int, int] = defaultdict(int)
    counts[id(scopes[-1])] = 1
    for scope in reversed(scopes):
        runs = counts[id(scope)]
        children = (
            *scope.subquery_scopes,
            *scope.derived_table_scopes,
            *scope.udtf_scopes,
            *scope.set_operation_scopes,
        )
        for child in children:
            counts[id(child)] += runs
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope) and source.is_cte:
                counts[id(source)] += runs
    return counts


def _own_columns(scope: Scope) -> Iterator[exp.Column]:
    """The columns written in this scope (not in nested ones), without ORDER BY references to output names."""
    expression = scope.expression
    output_names = set(expression.named_selects) if isinstance(expression, exp.Select) else set()
    for node in scope.walk():
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            continue
        if not node.table and node.name in output_names:
            order = node.find_ancestor(exp.Order, exp.Select)
            if isinstance(order, exp.Order) and order.parent is expression:
                continue  # ORDER BY an output column: no extra read
        yield node


def _column_reference(column: exp.Column, scope: Scope) -> tuple[str, str]:
    """(column name, source qualifier or "") of a column expression.

    ``a.b`` is column ``b`` of source ``a`` when some scope has a source ``a``, else field ``b`` of column ``a``
    (a row/struct); ``t.a.b`` is column ``a`` of source ``t`` (field ``b``).
    """
    parts = [part.name for part in column.parts]
    if len(parts) > 1 and _source_in_scope(parts[0], scope):
        return parts[1].lower(), parts[0]
    return parts[0].lower(), ""


def _source_in_scope(alias: str, scope: Scope | None) -> bool:
    while scope is not None:
        if alias in scope.selected_sources:
            return True
        scope = scope.parent
    return False


def _resolve(
    name: str, qualifier: str, scope: Scope | None, tables: Mapping[str, TableSchema]
) -> list[tuple[Scope, str]]:
    """The (scope, source alias) pairs a column may refer to: the innermost scope with a candidate first.

    An unqualified column goes to every source of that scope that has (or may have) it: an over-estimate
    when it is ambiguous, never a miss.
    """
    while scope is not None:
        sources = scope.selected_sources
        if qualifier:
            if qualifier in sources:
                return [(scope, qualifier)]
        else:
            found = [alias for alias, (node, source) in sources.items() if _may_hold(node, source, name, tables)]
            if found:
                return [(scope, alias) for alias in found]
        scope = scope.parent
    return []


def _may_hold(node: Any, source: object, name: str, tables: Mapping[str, TableSchema]) -> bool:
    """Whether a source may have column `name` (True when it cannot be known)."""
    if isinstance(source, exp.Table):
        table = _data_table(source, tables)
        return table is None or name in tables[table].columns
    aliases = [c.lower() for c in getattr(node, "alias_column_names", None) or ()]
    if not aliases and isinstance(source, Scope) and isinstance(source.expression.parent, exp.CTE):
        aliases = [c.lower() for c in source.expression.parent.alias_column_names]
    if aliases:
        return name in aliases
    query = source.expression if isinstance(source, Scope) else None
    if isinstance(query, exp.Query) and not query.is_star:
        return name in {n.lower() for n in query.named_selects}
    return True


def _filters(
    scope: Scope, alias: str, tables: Mapping[str, TableSchema], schema: TableSchema
) -> tuple[tuple[exp.Expr, ...], tuple[RangeFilter, ...]]:
    """The WHERE conjuncts of `scope` that may prune the scan of source `alias` (see the module docstring)."""
    select = scope.expression
    if not isinstance(select, exp.Select):
        return (), ()
    where = select.args.get("where")
    if where is None or _nullable(select, alias):
        return (), ()
    partition_filters: list[exp.Expr] = []
    range_filters: list[RangeFilter] = []
    for conjunct in conjuncts(where.this):
        if any(isinstance(n, (exp.Query, exp.Subquery, exp.AggFunc, exp.Window, *_VOLATILE)) for n in conjunct.walk()):
            continue
        columns = list(conjunct.find_all(exp.Column))
        references = [_column_reference(c, scope) for c in columns]
        if not columns or any(
            c.name.lower() != name or _resolve(name, qualifier, scope, tables) != [(scope, alias)]
            for c, (name, qualifier) in zip(columns, references, strict=True)
        ):
            continue  # no column, a field of a row column, or a column of another source (or ambiguous)
        names = {name for name, _ in references}
        if names <= schema.partition:
            unqualified = conjunct.copy()
            for column in list(unqualified.find_all(exp.Column)):
                column.replace(exp.column(column.name.lower(), quoted=True))
            partition_filters.append(unqualified)
        elif len(columns) == 1 and names <= schema.data:
            keep = _range_keep(conjunct, columns[0])
            if keep is not None:
                range_filters.append(RangeFilter(columns[0].name.lower(), keep))
    return tuple(partition_filters), tuple(range_filters)


def conjuncts(condition: exp.Expr) -> Iterator[exp.Expr]:
    """The top-level AND operands of `condition`, parentheses removed."""
    condition = condition.unnest()
    if isinstance(condition, exp.And):
        yield from conjuncts(condition.this)
        yield from conjuncts(condition.expression)
    else:
        yield condition


def _nullable(select: exp.Select, alias: str) -> bool:
    """Whether source `alias` is on the nullable side of an outer join (or not found as a plain source)."""
    sides = [(join.side or "").upper() for join in select.args.get("joins") or ()]
    from_ = select.args.get("from_")
    if from_ is not None and from_.this.alias_or_name == alias:
        return any(side in ("RIGHT", "FULL") for side in sides)
    for position, join in enumerate(select.args.get("joins") or ()):
        if join.this.alias_or_name == alias:
            return sides[position] in ("LEFT", "FULL") or any(s in ("RIGHT", "FULL") for s in sides[position + 1 :])
    return True


def _range_keep(conjunct: exp.Expr, column: exp.Column) -> exp.Expr | None:
    """The keep condition of ``column <op> constant`` over ``__min``/``__max``, or None for other shapes."""
    low, high = exp.column("__min"), exp.column("__max")

    def contains(value: exp.Expr) -> exp.Expr:
        return exp.and_(
            exp.LTE(this=low.copy(), expression=value.copy()), exp.GTE(this=high.copy(), expression=value.copy())
        )

    if type(conjunct) in _FLIPPED:
        left, right = conjunct.this.unnest(), conjunct.expression.unnest()
        if left is column:
            op, value = type(conjunct), right
        elif right is column:
            op, value = _FLIPPED[type(conjunct)], left
        else:
            return None
        if op is exp.EQ:
            return contains(value)
        bound = low if op in (exp.LT, exp.LTE) else high
        return op(this=bound, expression=value.copy())
    if isinstance(conjunct, exp.Between) and conjunct.this.unnest() is column and not conjunct.args.get("symmetric"):
        return exp.and_(
            exp.GTE(this=high, expression=conjunct.args["low"].copy()),
            exp.LTE(this=low, expression=conjunct.args["high"].copy()),
        )
    if (
        isinstance(conjunct, exp.In)
        and conjunct.this.unnest() is column
        and conjunct.expressions
        and not any(conjunct.args.get(k) for k in ("query", "unnest", "field"))
    ):
        return exp.or_(*(contains(value) for value in conjunct.expressions))
    return None
