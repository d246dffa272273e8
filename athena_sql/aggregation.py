"""Trino's aggregation rules (io/trino/sql/analyzer/AggregationAnalyzer.java and StatementAnalyzer.java at
trinodb/trino@01e94c03, their words):

- in a query that aggregates (a GROUP BY, or an aggregate in its select list, HAVING or ORDER BY), every select
  item, HAVING and ORDER BY expression must be constant for the group: ``'x' must be an aggregate expression or
  appear in GROUP BY clause`` (EXPRESSION_NOT_AGGREGATE), naming the whole expression as Trino does;
- ``WHERE clause cannot contain aggregations, window functions or grouping operations: [count(*)]``
  (EXPRESSION_NOT_SCALAR), the same for GROUP BY;
- ``Cannot nest aggregations inside aggregation 'sum': [count(*)]`` (NESTED_AGGREGATION) and a window function
  inside an aggregation (NESTED_WINDOW);
- a lambda's body holds no aggregate, window or grouping operation (EXPRESSION_NOT_SCALAR) and no subquery
  (NOT_SUPPORTED), and an expression using a lambda's parameter is never the grouping key it spells;
- an aggregate in ORDER BY names no output alias (COLUMN_NOT_FOUND, "Invalid reference to output projection
  attribute from ORDER BY aggregation").

The lambda and ORDER BY rules follow core/trino-main/src/test/java/io/trino/sql/analyzer/TestAnalyzer.java at
trinodb/trino@009eb018a32bbc675aa442e2f38f0d702038de2b (testLambdaInAggregationContext,
testLambdaWithAggregationAndGrouping, testLambdaWithSubquery, testReferenceToOutputColumnFromOrderByAggregation,
testAggregationWithOrderBy), positions included.

A function is an aggregate when the function list says so (:mod:`athena_sql.functions`) and it has no OVER
(then it is a window function). Subqueries are their own queries; a lambda's parameters are never columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet

from sqlglot import exp

from athena_sql.diagnostics import Diagnostic
from athena_sql.functions import Function
from athena_sql.source import Source

__all__ = ["refusals"]

_QUERY = (exp.Subquery, exp.Select, exp.SetOperation, exp.Exists)


def refusals(
    statement: exp.Expr,
    source: Source,
    functions: Mapping[int, Function],
    refused: AbstractSet[int] = frozenset(),
    outer: AbstractSet[int] = frozenset(),
    stars: Mapping[int, list[str]] | None = None,
) -> list[Diagnostic]:
    """Every aggregation rule ``statement`` breaks, in each of its SELECTs (``functions``: the catalog entry of each
    call node by ``id``; ``refused``: calls already refused, which are not judged again; ``outer``: columns of an
    enclosing query, which are constant for a group: "reference to outer scope is group-invariant"; ``stars``: the
    columns each ``*`` select item selects, by ``id``, which a GROUP BY must group one by one)."""
    rules = _Rules(source, functions, refused | outer)
    rules.outer = outer
    rules.stars = stars or {}
    for select in statement.find_all(exp.Select):
        rules.select(select)
    for function in statement.find_all(exp.Lambda):
        rules.lambda_body(function)
    return rules.found


class _Rules:
    def __init__(self, source: Source, functions: Mapping[int, Function], refused: AbstractSet[int]):
        self.source = source
        self.functions = functions
        self.refused = refused
        self.outer: AbstractSet[int] = frozenset()
        self.stars: Mapping[int, list[str]] = {}
        self.origin: dict[int, exp.Expr] = {}  # a column a ``*`` selects -> that ``*`` (where it is written)
        self.found: list[Diagnostic] = []

    def refuse(self, node: exp.Expr, error: str, message: str) -> None:
        line, column = self.source.node_position(self.origin.get(id(node), node))
        self.found.append(Diagnostic(line, column, error, self.source.text_of(node), message))

    def is_aggregate(self, node: exp.Expr) -> bool:
        function = self.functions.get(id(node))
        if function is None or function.kind != "aggregate":
            return False
        parent = node.parent.parent if isinstance(node.parent, exp.Filter) else node.parent
        return not isinstance(parent, exp.Window)

    def _inside(self, node: exp.Expr) -> Iterator[exp.Expr]:
        """``node``'s subtree in this query: not into subqueries."""
        stack = [node]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(child for child in current.iter_expressions() if not isinstance(child, _QUERY))

    def scalar_only(self, node: exp.Expr, clause: str) -> None:
        found = [n for n in self._inside(node) if self.is_aggregate(n) or isinstance(n, exp.Window)]
        if found:
            shown = ", ".join(self.source.text_of(n) for n in found)
            self.refuse(
                node,
                "EXPRESSION_NOT_SCALAR",
                f"{clause} cannot contain aggregations, window functions or grouping operations: [{shown}]",
            )

    def nested(self, node: exp.Expr) -> None:
        for call in self._inside(node):
            if not self.is_aggregate(call):
                continue
            inner = [n for child in call.iter_expressions() for n in self._inside(child)]
            aggregates = [n for n in inner if self.is_aggregate(n)]
            windows = [n for n in inner if isinstance(n, exp.Window)]
            name = self.functions[id(call)].name
            if aggregates:
                shown = ", ".join(self.source.text_of(n) for n in aggregates)
                self.refuse(
                    call, "NESTED_AGGREGATION", f"Cannot nest aggregations inside aggregation '{name}': [{shown}]"
                )
            elif windows:
                shown = ", ".join(self.source.text_of(n) for n in windows)
                self.refuse(
                    call,
                    "NESTED_WINDOW",
                    f"Cannot nest window functions or row pattern measures inside aggregation '{name}': [{shown}]",
                )

    def select(self, select: exp.Select) -> None:
        where = select.args.get("where")
        if isinstance(where, exp.Where):
            self.scalar_only(where.this, "WHERE clause")
        group = select.args.get("group")
        keys = list(_grouping(group)) if isinstance(group, exp.Group) else []
        items = self.expanded(select)
        before = len(self.found)
        for key in keys:
            self.scalar_only(self.positional(key, items, "GROUP BY") or key, "GROUP BY clause")
        group_refused = len(self.found) > before  # Trino stops there: the select list is not judged against it
        order = select.args.get("order")
        for item in order.expressions if isinstance(order, exp.Order) else []:
            self.positional(item.this, items, "ORDER BY")
        if select.args.get("distinct") and isinstance(order, exp.Order):
            self.distinct_order(select, items, order)
        having = select.args.get("having")
        checked = [*items, *([having.this] if isinstance(having, exp.Having) else [])]
        for node in checked:
            self.nested(node)
        self.order_by_outputs(select, order)
        aggregates = any(self.is_aggregate(n) for node in checked for n in self._inside(node))
        order_items = [o.this for o in order.expressions] if isinstance(order, exp.Order) else []
        aggregates = aggregates or any(self.is_aggregate(n) for node in order_items for n in self._inside(node))
        if group_refused or not (isinstance(group, exp.Group) or aggregates):
            return
        aliases = {item.alias.lower(): item.this for item in select.expressions if isinstance(item, exp.Alias)}
        grouped = set()
        for key in keys:
            if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
                index = int(key.this) - 1
                if 0 <= index < len(items):
                    grouped.add(_key(items[index]))
                continue
            grouped.add(_key(key))
            if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
                grouped.add(_key(aliases[key.name.lower()]))  # lenient: a name that is also an output alias
        for node in checked:
            if not self.constant(node, grouped, frozenset()):
                self.refuse(
                    node,
                    "EXPRESSION_NOT_AGGREGATE",
                    f"'{self.source.text_of(node)}' must be an aggregate expression or appear in GROUP BY clause",
                )
        self.subquery_references(select, [*checked, *order_items], grouped)
        for node in order_items:
            if isinstance(node, exp.Literal) or (
                isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases
            ):
                continue  # an ordinal or an output column
            if not self.constant(node, grouped, frozenset(aliases)):
                self.refuse(
                    node,
                    "EXPRESSION_NOT_AGGREGATE",
                    f"'{self.source.text_of(node)}' must be an aggregate expression or appear in GROUP BY clause",
                )

    def expanded(self, select: exp.Select) -> list[exp.Expr]:
        """The select items, each ``*`` replaced by the columns it selects when every one's are known
        (TestAnalyzer.testGroupByWithWildcard: ``SELECT * FROM t1 GROUP BY 1`` groups the first column only)."""
        items = [item.this if isinstance(item, exp.Alias) else item for item in select.expressions]
        starred = [i for i in items if isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star)]
        if not starred or any(id(i) not in self.stars for i in starred):
            return items
        expanded: list[exp.Expr] = []
        for item in items:
            if id(item) not in self.stars:
                expanded.append(item)
                continue
            for name in self.stars[id(item)]:
                column = exp.column(name)
                self.origin[id(column)] = item
                expanded.append(column)
        return expanded

    def subquery_references(self, select: exp.Select, nodes: list[exp.Expr], grouped: set[str]) -> None:
        """A subquery in a grouped query's select list, HAVING or ORDER BY uses that query's columns only if they
        are grouping keys: ``Subquery uses 'u.a' which must appear in GROUP BY clause`` (EXPRESSION_NOT_AGGREGATE;
        AggregationAnalyzer.visitSubqueryExpression, TestAnalyzer.testGroupByWithSubquerySelectExpression). Judged
        where the column's query is known: a subquery right inside ``select``, and a column qualified by one of
        ``select``'s relations or, when ``select`` is the outermost query, any column of an enclosing query."""
        aliases = {r.alias_or_name.lower() for r in _relations(select)}
        outermost = select.find_ancestor(exp.Select) is None
        for node in nodes:
            for column in node.find_all(exp.Column):
                inner = column.find_ancestor(exp.Select)
                if id(column) not in self.outer or inner is None or inner is select:
                    continue
                if inner.find_ancestor(exp.Select) is not select or _key(column) in grouped:
                    continue  # a deeper subquery (the column may be an intermediate query's), or a grouping key
                if any(self.is_aggregate(a) for a in _ancestors(column, inner)):
                    continue  # inside the subquery's own aggregate
                qualifier = column.table.lower() if column.table else None
                if (qualifier in aliases) if qualifier else outermost:
                    shown = self.source.text_of(column)
                    message = f"Subquery uses '{shown}' which must appear in GROUP BY clause"
                    self.refuse(column, "EXPRESSION_NOT_AGGREGATE", message)

    def lambda_body(self, function: exp.Lambda) -> None:
        """A lambda's body holds no aggregate, window or grouping operation (EXPRESSION_NOT_SCALAR) and no subquery
        (NOT_SUPPORTED): TestAnalyzer's testLambdaWithAggregationAndGrouping and testLambdaWithSubquery."""
        self.scalar_only(function.this, "Lambda expression")
        if any(isinstance(n, _QUERY) for n in function.this.walk()):
            self.refuse(function, "NOT_SUPPORTED", "Lambda expression cannot contain subqueries")

    def order_by_outputs(self, select: exp.Select, order: exp.Expr | None) -> None:
        """An aggregate in ORDER BY names input columns only: a name that is an output alias of the select list is
        refused there (COLUMN_NOT_FOUND, "Invalid reference to output projection attribute from ORDER BY
        aggregation": TestAnalyzer's testReferenceToOutputColumnFromOrderByAggregation and
        testAggregationWithOrderBy)."""
        aliases = {item.alias.lower() for item in select.expressions if isinstance(item, exp.Alias)}
        if not isinstance(order, exp.Order) or not aliases:
            return
        for item in order.expressions:
            calls = [n for n in self._inside(item.this) if self.is_aggregate(n)]
            for call in calls:
                scope = call.parent if isinstance(call.parent, exp.Filter) else call
                for column in self._inside(scope):
                    if isinstance(column, exp.Column) and not column.table and column.name.lower() in aliases:
                        message = "Invalid reference to output projection attribute from ORDER BY aggregation"
                        self.refuse(column, "COLUMN_NOT_FOUND", f"{message} ('{column.name}' is an output alias)")

    def positional(self, key: exp.Expr, items: list[exp.Expr], clause: str) -> exp.Expr | None:
        """The select item an ordinal (``GROUP BY 2``) names; a refusal when there is none (INVALID_COLUMN_REFERENCE,
        "GROUP BY position 5 is not in select list"). ``None`` when ``key`` is not an ordinal."""
        if not (isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit()):
            return None
        index = int(key.this)
        if 1 <= index <= len(items) and not any(isinstance(i, exp.Star) for i in items):
            return items[index - 1]
        if not any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star) for i in items):
            message = f"{clause} position {index} is not in select list"
            self.refuse(key, "INVALID_COLUMN_REFERENCE", message)
        return None

    def distinct_order(self, select: exp.Select, items: list[exp.Expr], order: exp.Order) -> None:
        """``SELECT DISTINCT`` sorts only by what it selects (EXPRESSION_NOT_IN_DISTINCT)."""
        aliases = {item.alias.lower() for item in select.expressions if isinstance(item, exp.Alias)}
        selected = {_key(item) for item in items}
        if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star) for i in items):
            return
        for item in order.expressions:
            node = item.this
            if isinstance(node, exp.Literal) or _key(node) in selected:
                continue
            if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
                continue
            message = "For SELECT DISTINCT, ORDER BY expressions must appear in select list"
            self.refuse(node, "EXPRESSION_NOT_IN_DISTINCT", message)

    def constant(
        self, node: exp.Expr, grouped: set[str], bound: frozenset[str], shadowed: frozenset[str] = frozenset()
    ) -> bool:
        """Whether ``node`` is constant for a group (AggregationAnalyzer's visitor): a grouping key, an aggregate,
        a literal, or made only of such. ``shadowed``: the lambda parameters in scope; an expression using one is
        never the grouping key it spells (``y -> x + y`` with GROUP BY x + y: testLambdaInAggregationContext)."""
        key_matches = _key(node) in grouped and not (shadowed and _mentions(node, shadowed))
        if key_matches or self.is_aggregate(node) or isinstance(node, _QUERY) or id(node) in self.refused:
            return True
        if isinstance(node, exp.Filter) and self.is_aggregate(node.this):
            return True  # an aggregate's FILTER (WHERE ...) is part of the aggregate
        if isinstance(node, exp.Column):
            return node.name.lower() in bound and not node.table
        if isinstance(node, exp.Lambda):
            names = frozenset(p.name.lower() for p in node.expressions)
            return self.constant(node.this, grouped, bound | names, shadowed | names)
        if isinstance(node, exp.Window):
            parts = [c for c in node.iter_expressions() if c is not node.this]
            arguments = list(node.this.iter_expressions()) if isinstance(node.this, exp.Expr) else []
            return all(self.constant(c, grouped, bound, shadowed) for c in [*parts, *arguments])
        return all(self.constant(child, grouped, bound, shadowed) for child in node.iter_expressions())


def _relations(select: exp.Select) -> list[exp.Expr]:
    """The FROM items of ``select`` (its FROM and JOINs)."""
    from_ = select.args.get("from_")
    items = [from_.this] if isinstance(from_, exp.From) else []
    return [*items, *(join.this for join in select.args.get("joins") or [])]


def _ancestors(node: exp.Expr, stop: exp.Expr) -> Iterator[exp.Expr]:
    """``node``'s ancestors up to (not including) ``stop``."""
    parent = node.parent
    while parent is not None and parent is not stop:
        yield parent
        parent = parent.parent


def _mentions(node: exp.Expr, names: frozenset[str]) -> bool:
    """Whether ``node`` uses one of ``names`` unqualified (a lambda parameter: an identifier, or a column sqlglot
    did not recognise as the parameter)."""
    for child in node.walk():
        if isinstance(child, exp.Column) and not child.table and child.name.lower() in names:
            return True
        bare = isinstance(child, exp.Identifier) and not isinstance(child.parent, exp.Column | exp.Alias | exp.Table)
        if bare and child.name.lower() in names:
            return True
    return False


def _grouping(group: exp.Group) -> Iterator[exp.Expr]:
    """Every grouping expression: plain ones, and those inside GROUPING SETS, ROLLUP and CUBE."""
    sets = (exp.GroupingSets, exp.Rollup, exp.Cube)
    items = [*group.expressions]
    for key in ("grouping_sets", "rollup", "cube"):
        items.extend(group.args.get(key) or [])
    for item in items:
        if not isinstance(item, sets):
            yield item
            continue
        for element in item.expressions:
            if isinstance(element, exp.Tuple):
                yield from element.expressions
            elif isinstance(element, exp.Paren):
                yield element.this
            else:
                yield element


def _key(node: exp.Expr) -> str:
    """A grouping key's identity: its Trino SQL without relation qualifiers, lowercase."""

    def unqualified(n: exp.Expr) -> exp.Expr:
        return exp.column(n.name) if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star) else n

    return node.copy().transform(unqualified).sql(dialect="trino").lower()
