"""What Trino refuses about ordering and about the parts of a call that are not its arguments: an ``ORDER BY`` of a
type that has no order, an aggregate's ``ORDER BY`` beside ``DISTINCT``, ``FILTER`` on a window, ``||`` of arrays
without a common element type, and ``UNNEST`` written as a function.

Sources (trinodb/trino@009eb018a32bbc675aa442e2f38f0d702038de2b, core/trino-main/src/test/java/io/trino/sql/analyzer/
TestAnalyzer.java, with the analyzer it tests, ExpressionAnalyzer.java and StatementAnalyzer.java):

- ``testAggregationWithOrderBy``: ``array_agg(DISTINCT x ORDER BY y)`` is EXPRESSION_NOT_IN_DISTINCT ("For aggregate
  function with DISTINCT, ORDER BY expressions must appear in arguments"), ``array_agg(x ORDER BY x)`` of a map is
  TYPE_MISMATCH;
- ``testQuantifiedComparisonExpression``: ``map(...) < ALL (VALUES map(...))`` is TYPE_MISMATCH (a map has equality
  but no order: io/trino/spi/type/MapType.java is comparable, not orderable);
- ``testInvalidAggregationFilter``: ``sum(x) FILTER (WHERE ...) OVER (...)`` is NOT_SUPPORTED;
- core/trino-main/src/test/java/io/trino/type/TestArrayOperators.java (``testArrayToArrayConcat``, trinodb/trino@004dbce9):
  ``ARRAY[ARRAY[1]] || ARRAY[ARRAY[true], ARRAY[false]]`` matches no ``concat`` (FUNCTION_NOT_FOUND);
- ``testNullTreatment``: IGNORE/RESPECT NULLS on anything but a value window function is NULL_TREATMENT_NOT_ALLOWED;
- docs/src/main/sphinx/language/reserved.md (trinodb/trino@0e380280): UNNEST is a reserved word, so
  ``SELECT unnest(a)`` does not parse (SYNTAX_ERROR); UNNEST is a relation, written in FROM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from athena_sql.scopes import Scope
from athena_sql.types import TrinoType, common_super_type

if TYPE_CHECKING:
    from athena_sql.typecheck import _Typer as Typer

__all__ = [
    "RULES",
    "aggregate_order",
    "array_concatenation",
    "null_treatment",
    "orderable",
    "unnest_call",
    "window_filter",
]


def orderable(kind: TrinoType) -> bool:
    """Whether Trino orders values of ``kind``: not a map, nor an array or row holding one (the types without an order
    that the check derives)."""
    if kind.name == "map":
        return False
    return all(orderable(child) for child in kind.children)


def aggregate_order(typer: Typer, call: exp.Expr) -> None:
    """An aggregate's ``ORDER BY`` (``array_agg(x ORDER BY y)``): each key orderable, and with DISTINCT each key one
    of the arguments."""
    order = call.args.get("this")
    if not isinstance(order, exp.Order):
        return
    distinct = order.this if isinstance(order.this, exp.Distinct) else None
    arguments = {_key(a) for a in distinct.expressions} if distinct is not None else set()
    sort_keys(typer, order)
    for item in order.expressions:
        key = item.this if isinstance(item, exp.Ordered) else item
        if distinct is not None and _key(key) not in arguments:
            typer.refuse(
                key,
                "EXPRESSION_NOT_IN_DISTINCT",
                typer.source.text_of(key),
                "For aggregate function with DISTINCT, ORDER BY expressions must appear in arguments",
            )


def sort_keys(typer: Typer, order: exp.Expr) -> None:
    """A query's or a window's ``ORDER BY``: each key of an orderable type (``ORDER BY m`` of a map: TYPE_MISMATCH,
    "Type map(...) is not orderable, and therefore cannot be used in ORDER BY")."""
    if not isinstance(order, exp.Order):
        return
    for item in order.expressions:
        key = item.this if isinstance(item, exp.Ordered) else item
        kind = typer.types.get(id(key))
        if kind is not None and not orderable(kind):
            message = f"Type {kind} is not orderable, and therefore cannot be used in ORDER BY"
            typer.refuse(key, "TYPE_MISMATCH", typer.source.text_of(key), message)


def window_filter(typer: Typer, node: exp.Filter) -> None:
    """``agg(x) FILTER (WHERE ...) OVER (...)``: Trino has no FILTER on a window function (NOT_SUPPORTED)."""
    if isinstance(node.parent, exp.Window):
        message = "FILTER is not yet supported for window functions; use CASE WHEN inside the function instead"
        typer.refuse(node, "NOT_SUPPORTED", typer.source.text_of(node.parent), message)


def array_concatenation(left: TrinoType, right: TrinoType) -> TrinoType | None:
    """The result of ``left || right`` when one side is an array (Trino's ``concat(array(E), ...)``,
    ``concat(E, array(E))``, ``concat(array(E), E)``), ``None`` when no form matches (their element types have no
    common super type)."""
    both = common_super_type(left, right) if left.name == right.name == "array" else None
    if both is not None:
        return both
    for array, element in ((left, right), (right, left)):
        if array.name == "array" and array.children:
            common = common_super_type(array.children[0], element)
            if common is not None:
                return TrinoType("array", (), (common,))
    return None


def unnest_call(typer: Typer, node: exp.Expr) -> bool:
    """``SELECT unnest(a)``: UNNEST outside FROM (Trino's parser refuses the reserved word there). True when
    refused."""
    if not isinstance(node, exp.Unnest) or isinstance(node.parent, exp.From | exp.Join | exp.Lateral):
        return False
    message = "UNNEST is not a function in Trino: it is a relation, written in FROM (CROSS JOIN UNNEST(a) AS t(x))"
    typer.refuse(node, "SYNTAX_ERROR", typer.source.text_of(node), message)
    return True


def _key(node: exp.Expr) -> str:
    """An expression's identity for DISTINCT: its Trino SQL, columns unqualified (``f.carrier`` is ``carrier``)."""

    def unqualified(n: exp.Expr) -> exp.Expr:
        return exp.column(n.name) if isinstance(n, exp.Column) and not isinstance(n.this, exp.Star) else n

    return node.copy().transform(unqualified).sql(dialect="trino").lower()


#: The value window functions, the only ones that take IGNORE NULLS / RESPECT NULLS (functions/window.md).
_VALUE_WINDOW_FUNCTIONS = frozenset({"lead", "lag", "first_value", "last_value", "nth_value"})


def null_treatment(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType | None:
    """``f(x) IGNORE NULLS`` / ``RESPECT NULLS``: only for the value window functions (NULL_TREATMENT_NOT_ALLOWED,
    TestAnalyzer.testNullTreatment: ``count() RESPECT NULLS OVER ()``)."""
    kind = typer.expr(node.this, scope)
    function = typer.analysis.functions.get(id(node.this))
    if function is not None and function.name not in _VALUE_WINDOW_FUNCTIONS:
        message = (
            f"Cannot specify null treatment clause for non-value window function {function.name}"
            " (only lead, lag, first_value, last_value and nth_value take IGNORE/RESPECT NULLS)"
        )
        typer.refuse(node.this, "NULL_TREATMENT_NOT_ALLOWED", typer.source.text_of(node), message)
    return kind


#: The typing rules of this module, merged into :data:`athena_sql.rules.RULES`.
RULES: dict[type[exp.Expr], Callable[..., TrinoType | None]] = {
    exp.RespectNulls: null_treatment,
    exp.IgnoreNulls: null_treatment,
}
