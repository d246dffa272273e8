"""The typing rule of each kind of expression (operators, predicates, conditionals, constructors, calls): what
Trino's ExpressionAnalyzer (io/trino/sql/analyzer/ExpressionAnalyzer.java) derives and
refuses, in its words as Trino's tests and users quote them (e.g. ``Cannot apply operator: timestamp(3) < varchar(19)``,
TYPE_MISMATCH, trinodb/trino#7334); the error classes are io/trino/spi/StandardErrorCode.java's at trinodb/trino@029c93b6. Used by :mod:`athena_sql.typecheck` (``typer``: its expression typer and reporter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from athena_sql import calls, conditionals, functions, ordering
from athena_sql.conditionals import known as _known
from athena_sql.conditionals import single_type as _single_type
from athena_sql.scopes import Scope
from athena_sql.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    INTERVAL_DAY,
    INTERVAL_MONTH,
    VARCHAR,
    TrinoType,
    common_super_type,
    decimal_of,
    decimal_result,
)

if TYPE_CHECKING:
    from athena_sql.typecheck import _Typer as Typer

__all__ = ["RULES", "arithmetic", "call", "comparison", "concatenation"]

TYPE_MISMATCH = "TYPE_MISMATCH"


def comparison(typer: Typer, node: exp.Expr, scope: Scope, operator: str, token: TokenType) -> TrinoType:
    left, right = typer.expr(node.this, scope), typer.expr(node.expression, scope)
    typer.note_underived(node, (node.this, node.expression), operator)
    ordered = operator in ("<", "<=", ">", ">=")
    unordered = [t for t in (left, right) if ordered and t is not None and not ordering.orderable(t)]
    if unordered or (left is not None and right is not None and common_super_type(left, right) is None):
        where = typer.source.operator_position(node, (token,))
        hint = _hint(left, right, _parameter(node)) if left is not None and right is not None else ""
        message = f"Cannot apply operator: {left or '?'} {operator} {right or '?'}{hint}"
        if unordered:
            message = f"Type {unordered[0]} is not orderable, and therefore cannot be used with {operator}"
        typer.refuse(where, TYPE_MISMATCH, typer.source.text_of(node), message)
    return BOOLEAN


def _parameter(node: exp.Expr) -> str | None:
    """The name of the ``:parameter`` operand of a binary ``node``, if one is."""
    for operand in (node.args.get("this"), node.args.get("expression")):
        if isinstance(operand, exp.Placeholder):
            return str(operand.name)
    return None


def _hint(left: TrinoType, right: TrinoType, parameter: str | None = None) -> str:
    """The fix for the likeliest mistakes: a varchar (an uncast window parameter, a quoted number) against a
    timestamp, date or number (``parameter``: the name of the varchar operand when it is a parameter)."""
    for a, b in ((left, right), (right, left)):
        if b.is_string and (a.is_temporal or a.is_numeric):
            target = "timestamp" if a.name.startswith("timestamp") else a.name.split("(")[0]
            if a.is_temporal:
                examples = {"timestamp": "CAST(:window_start AS timestamp)", "date": "CAST(:window_first_date AS date)"}
                example = (
                    f"CAST(:{parameter} AS {target})" if parameter else examples.get(target, f"CAST('...' AS {target})")
                )
                return f" (Trino does not convert varchar implicitly: CAST the varchar AS {target}, e.g. {example})"
            return f" (compare with a number, or CAST the varchar AS {target})"
    return ""


def _arithmetic_type(operator: str, left: TrinoType, right: TrinoType) -> tuple[bool, TrinoType | None]:
    """(allowed, result type) of ``left operator right`` (Trino's arithmetic and date/time operators)."""
    if left.is_unknown or right.is_unknown:
        return True, right if left.is_unknown else left
    if left.is_numeric and right.is_numeric:
        exact = [decimal_of(t) for t in (left, right)]
        if "decimal" in (left.name, right.name) and exact[0] and exact[1]:  # decimal.md's rules
            return True, TrinoType("decimal", decimal_result(operator, exact[0], exact[1]))
        return True, common_super_type(left, right)
    if operator in "+-":
        if left.is_temporal and right.is_interval:
            return True, left
        if operator == "+" and left.is_interval and right.is_temporal:
            return True, right
        if left.is_interval and right.is_interval and left.name == right.name:
            return True, left
        common = common_super_type(left, right) if left.is_temporal and right.is_temporal else None
        if operator == "-" and common is not None and common.name.startswith("timestamp"):
            return True, INTERVAL_DAY  # a date coerces to a timestamp (TypeCoercion): subtract(timestamp, timestamp)
        if operator == "-" and left.name == right.name and left.name in ("date", "time"):
            return True, INTERVAL_DAY  # date: as timestamp(0) - timestamp(0); time(p) - time(p) (TimeOperators)
    if operator in "*/" and left.is_interval and right.is_numeric:
        return True, left
    if operator == "*" and left.is_numeric and right.is_interval:
        return True, right
    return False, None


def arithmetic(typer: Typer, node: exp.Expr, scope: Scope, operator: str, token: TokenType) -> TrinoType | None:
    left, right = typer.expr(node.this, scope), typer.expr(node.expression, scope)
    typer.note_underived(node, (node.this, node.expression), operator)
    if left is None or right is None:
        return None
    exact = all(t.is_integer or t.name == "decimal" for t in (left, right))  # double: Infinity/NaN, no error
    constant = _literal(node.this) is not None and _constant_zero(node.expression)
    if operator in "/%" and exact and constant and not in_try(node):
        where = typer.source.operator_position(node, (token,))
        typer.refuse(where, "DIVISION_BY_ZERO", typer.source.text_of(node), "Division by zero")
    allowed, result = _arithmetic_type(operator, left, right)
    if not allowed:
        where = typer.source.operator_position(node, (token,))
        hint = ""
        if left.name == "date" and right.is_numeric:
            hint = f" (use date_add('day', {'-' if operator == '-' else ''}n, d) or d {operator} INTERVAL 'n' DAY)"
        elif left.is_string or right.is_string:
            hint = " (Trino has no arithmetic on varchar: CAST it to a number; concatenate with ||)"
        typer.refuse(
            where, TYPE_MISMATCH, typer.source.text_of(node), f"Cannot apply operator: {left} {operator} {right}{hint}"
        )
    return result


def _literal(node: exp.Expr) -> exp.Literal | None:
    """The literal ``node`` is (``0``, ``INTEGER '0'``, ``CAST('0' AS integer)``), else ``None``."""
    while isinstance(node, exp.Cast | exp.Paren):
        node = node.this
    return node if isinstance(node, exp.Literal) else None


def in_try(node: exp.Expr) -> bool:
    """Whether ``node`` is inside ``TRY(...)``, which turns its evaluation errors into NULL."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Try):
            return True
        parent = parent.parent
    return False


def _constant_zero(node: exp.Expr) -> bool:
    literal = _literal(node)
    try:
        return literal is not None and int(literal.this) == 0
    except ValueError:
        return False


def concatenation(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType | None:
    """``a || b`` is Trino's ``concat(a, b)`` (AstBuilder.visitConcatenation): strings, arrays or varbinary."""
    left, right = typer.expr(node.this, scope), typer.expr(node.expression, scope)
    typer.note_underived(node, (node.this, node.expression), "||")
    if left is None or right is None:
        return None
    if all(t.is_unknown or t.is_string for t in (left, right)):
        return VARCHAR
    if left.name == "array" or right.name == "array":
        result = ordering.array_concatenation(left, right)
        if result is not None:
            return result
    if all(t.is_unknown or t.name == "varbinary" for t in (left, right)):
        return TrinoType("varbinary")
    where = typer.source.operator_position(node, (TokenType.DPIPE,))
    number = next((t for t in (left, right) if not t.is_string and not t.is_unknown), left)
    typer.refuse(
        where,
        "FUNCTION_NOT_FOUND",
        typer.source.text_of(node),
        f"Unexpected parameters ({left}, {right}) for function concat. Expected: concat(varchar), concat(array(E)),"
        f" concat(E, array(E)), concat(array(E), E), concat(varbinary) (CAST the {number} AS varchar)",
    )
    return None


def call(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType | None:
    """A function call: its arguments typed (lambdas with their parameters' types), then judged by
    :func:`athena_sql.calls.judge`."""
    written = calls.find_call(typer.source, node)
    if ordering.unnest_call(typer, node):
        return None
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in ("ALL", "ANY", "SOME") and node.expressions:
        return typer.expr(node.expressions[0], scope)  # x < ALL (VALUES ...): the subquery's column type
    if written is None or written.name in SYNTAX_NAMES:
        for child in node.iter_expressions():
            if isinstance(child, exp.Lambda):  # its body still judged, its parameters of unknown type
                typer.expr(child.this, scope.with_lambdas({p.name.lower(): None for p in child.expressions}))
            typer.expr(child, scope)
        return None
    arguments = calls.argument_nodes(typer.source, node, written)
    types: list[TrinoType | None] = []
    for position, argument in enumerate(arguments):
        if argument is None or isinstance(argument, exp.Var):
            types.append(calls.token_type(typer.source, written.arguments[position]))
            continue
        if isinstance(argument, exp.Lambda):
            names = [p.name.lower() for p in argument.expressions]
            expected = calls.lambda_arity(written.name, position)
            if expected is not None and expected != len(names):
                typer.refuse(
                    argument,
                    "INVALID_PARAMETER_USAGE",
                    typer.source.text_of(argument),
                    f"Expected a lambda that takes {expected} argument(s) but got {len(names)}",
                )
            bound = calls.lambda_parameter_types(written.name, position, types)
            parameters = [bound[i] if i < len(bound) else None for i in range(len(names))]
            body = typer.expr(argument.this, scope.with_lambdas(dict(zip(names, parameters, strict=True))))
            types.append(calls.function_type(parameters, body))
        elif argument is not None and not isinstance(argument, exp.Star):
            types.append(typer.expr(argument, scope))
        else:
            types.append(None)
    for child in node.iter_expressions():  # what the written arguments did not cover (an ORDER BY, a unit)
        if id(child) not in typer.types and not isinstance(child, exp.Lambda):
            typer.expr(child, scope)
    keys = calls.SPECIAL_OPERANDS.get(type(node)) if written.special else None
    if keys:  # SUBSTRING(s FROM i [FOR n]), OVERLAY(s PLACING r FROM i [FOR n]): typed as their argument lists
        operands = [node.args[key] for key in keys if node.args.get(key) is not None]
        types = [typer.expr(o, scope) if isinstance(o, exp.Expr) else None for o in operands]
    result, function = calls.judge(
        typer.source,
        written,
        types,
        lambda where, error, construct, message: typer.refuse(where, error, construct, message),
    )
    if function is not None:
        typer.analysis.functions[id(node)] = function
        if function.kind == "aggregate":
            ordering.aggregate_order(typer, node)
        over = node.parent
        while isinstance(over, exp.Filter | exp.IgnoreNulls | exp.RespectNulls):  # f(x) IGNORE NULLS OVER (...)
            over = over.parent
        if function.kind == "window" and not isinstance(over, exp.Window):
            message = f"Window function {function.name} requires an OVER clause"
            typer.refuse(written.name_index, "MISSING_OVER", typer.source.text_of(node), message)
    else:
        typer.analysis.refused_calls.add(id(node))
    return result


#: Names before a bracket that are syntax, not functions (ROW(...), GROUPING(...), EXISTS (...)).
SYNTAX_NAMES = frozenset({"row", "grouping", "exists", "array", "values", "unnest", "lateral", "in"})


def name_check(typer: Typer, node: exp.Expr) -> None:
    """A node sqlglot models with a rule of its own (``nvl(a, b)`` becomes a COALESCE) still has its name as
    written judged against the function list."""
    written = calls.find_call(typer.source, node)
    if written is None or written.name in SYNTAX_NAMES or functions.lookup(written.name) is not None:
        return
    where = written.name_index
    construct = typer.source.raw(typer.source.tokens[where])
    typer.refuse(where, "FUNCTION_NOT_FOUND", construct, calls.not_found(written.name))
    typer.analysis.refused_calls.add(id(node))


def _between(typer: Typer, node: exp.Between, scope: Scope) -> TrinoType:
    value, low, high = (typer.expr(node.args[k], scope) for k in ("this", "low", "high"))
    typer.note_underived(node, tuple(node.args[k] for k in ("this", "low", "high")), "BETWEEN")
    if value is not None and low is not None and high is not None:
        common = common_super_type(value, low)
        if common is None or common_super_type(common, high) is None:
            where = typer.source.operator_position(node, (TokenType.BETWEEN,))
            typer.refuse(
                where,
                TYPE_MISMATCH,
                "BETWEEN",
                f"Cannot check if {value} is BETWEEN {low} and {high}{_hint(value, low if common is None else high)}",
            )
    return BOOLEAN


def _in(typer: Typer, node: exp.In, scope: Scope) -> TrinoType:
    value = typer.expr(node.this, scope)
    query = node.args.get("query")
    kinds = [typer.expr(item, scope) for item in node.expressions]
    if isinstance(query, exp.Expr):
        kinds.append(typer.expr(query, scope))
    known = [value, *kinds]
    if all(k is not None for k in known):
        _single_type(typer, node, [k for k in known if k is not None], "IN value and list items", TokenType.IN)
    return BOOLEAN


def _like(typer: Typer, node: exp.Like, scope: Scope) -> TrinoType:
    value, pattern = typer.expr(node.this, scope), typer.expr(node.expression, scope)
    for kind, side in ((value, "Left side of LIKE expression"), (pattern, "Pattern for LIKE expression")):
        if _known(kind) and kind is not None and not kind.is_string:
            where = typer.source.operator_position(node, (TokenType.LIKE,))
            typer.refuse(where, TYPE_MISMATCH, "LIKE", f"{side} must evaluate to a varchar (actual: {kind})")
    return BOOLEAN


def _logical(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType:
    terms = [node.this] if isinstance(node, exp.Not) else [node.this, node.expression]
    what = "Value of logical NOT expression" if isinstance(node, exp.Not) else "Logical expression term"
    for term in terms:
        kind = typer.expr(term, scope)
        if _known(kind) and kind != BOOLEAN:
            typer.refuse(term, TYPE_MISMATCH, what, f"{what} must evaluate to a boolean (actual: {kind})")
    return BOOLEAN


def _interval(typer: Typer, node: exp.Interval, scope: Scope) -> TrinoType:
    unit = node.args.get("unit")
    text = unit.sql(dialect="trino").upper() if isinstance(unit, exp.Expr) else ""
    return INTERVAL_MONTH if text.startswith(("YEAR", "MONTH")) else INTERVAL_DAY


def _at_time_zone(typer: Typer, node: exp.AtTimeZone, scope: Scope) -> TrinoType | None:
    value = typer.expr(node.this, scope)
    zone = node.args.get("zone")
    if isinstance(zone, exp.Expr):
        typer.expr(zone, scope)
    if value is None or value.is_unknown:
        return None
    if value.name in ("timestamp", "timestamp with time zone"):
        return TrinoType("timestamp with time zone", value.parameters)
    if value.name in ("time", "time with time zone"):
        return TrinoType("time with time zone", value.parameters)
    typer.refuse(
        node.this,
        TYPE_MISMATCH,
        "AT TIME ZONE",
        f"Type of value must be a time or timestamp with or without time zone (actual {value})",
    )
    return None


def _extract(typer: Typer, node: exp.Extract, scope: Scope) -> TrinoType:
    value = typer.expr(node.expression, scope)
    if _known(value) and value is not None and not (value.is_temporal or value.is_interval):
        typer.refuse(
            node.expression,
            TYPE_MISMATCH,
            "EXTRACT",
            f"Type of argument to extract must be DATE, TIME, TIMESTAMP, or INTERVAL (actual {value})",
        )
    return BIGINT


def _array(typer: Typer, node: exp.Array, scope: Scope) -> TrinoType | None:
    kinds = [typer.expr(e, scope) for e in node.expressions]
    if not kinds:
        return TrinoType("array", (), (TrinoType("unknown"),))
    element = conditionals.common(typer, node, kinds, "All ARRAY elements")
    return TrinoType("array", (), (element,)) if element is not None else None


def _bracket(typer: Typer, node: exp.Bracket, scope: Scope) -> TrinoType | None:
    base = typer.expr(node.this, scope)
    for index in node.expressions:
        typer.expr(index, scope)
    if base is not None and base.name in ("array", "map") and base.children:
        return base.children[-1]
    index = node.expressions[0] if len(node.expressions) == 1 else None
    if base is not None and base.name == "row" and isinstance(index, exp.Literal) and index.is_int:
        # a row's field by its position (language/types.md, ROW: ``x[1]`` the first); sqlglot holds the index
        # 0-based (the Trino dialect's INDEX_OFFSET of 1 taken off)
        position = int(index.this) + 1
        return base.children[position - 1] if 1 <= position <= len(base.children) else None
    return None


def _dereference(typer: Typer, node: exp.Dot, scope: Scope) -> TrinoType | None:
    """``value.field`` of a value that is not a column (a lambda's parameter ``s.sum``, ``(row).x``): the row field's
    type (language/types.md, ROW: "Field values are accessed with field reference operator ``.``")."""
    base = typer.expr(node.this, scope)
    field = node.expression
    if not isinstance(field, exp.Identifier):
        typer.expr(field, scope)
        return None
    if base is not None and base.name == "row" and field.name.lower() in base.fields:
        return base.children[base.fields.index(field.name.lower())]
    return None


def _row(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType | None:
    kinds = [typer.expr(e, scope) for e in node.expressions]
    if any(k is None for k in kinds):
        return None
    return TrinoType("row", (), tuple(k for k in kinds if k is not None), tuple("" for _ in kinds))


def _boolean_children(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType:
    for child in node.iter_expressions():
        typer.expr(child, scope)
    return BOOLEAN


def _first_child(typer: Typer, node: exp.Expr, scope: Scope) -> TrinoType | None:
    kinds = [typer.expr(child, scope) for child in node.iter_expressions()]
    return kinds[0] if kinds else None


def _filter(typer: Typer, node: exp.Filter, scope: Scope) -> TrinoType | None:
    where = node.args.get("expression")
    if isinstance(where, exp.Where):
        typer.condition(where.this, scope, "FILTER clause")
    kind = typer.expr(node.this, scope)
    ordering.window_filter(typer, node)
    function = typer.analysis.functions.get(id(node.this))
    if function is not None and function.kind != "aggregate":
        message = f"Filter is only valid for aggregation functions ({function.name} is not one)"
        typer.refuse(node.this, "FUNCTION_NOT_AGGREGATE", typer.source.text_of(node), message)
    return kind


RULES: dict[type[exp.Expr], Callable[..., TrinoType | None]] = {
    exp.Between: _between,
    exp.In: _in,
    exp.Like: _like,
    exp.And: _logical,
    exp.Or: _logical,
    exp.Not: _logical,
    exp.Interval: _interval,
    exp.AtTimeZone: _at_time_zone,
    exp.Extract: _extract,
    exp.Array: _array,
    exp.Bracket: _bracket,
    exp.Dot: _dereference,
    exp.Struct: _row,
    exp.Tuple: _row,
    exp.Is: _boolean_children,
    exp.Exists: _boolean_children,
    exp.Distinct: _first_child,
    exp.Neg: _first_child,
    exp.Escape: _first_child,
    exp.Filter: _filter,
    exp.CurrentDate: lambda typer, node, scope: DATE,
    exp.CurrentTimestamp: lambda typer, node, scope: TrinoType("timestamp with time zone", (3,)),
    exp.CurrentTime: lambda typer, node, scope: TrinoType("time with time zone", (3,)),
    exp.Localtimestamp: lambda typer, node, scope: TrinoType("timestamp", (3,)),
    **ordering.RULES,
    **conditionals.RULES,
}
