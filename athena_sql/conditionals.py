"""The typing rules of the conditional forms (CASE, IF, COALESCE, NULLIF) and the common-type rule they share with
IN: what Trino's ExpressionAnalyzer (io/trino/sql/analyzer/ExpressionAnalyzer.java: visitSearchedCaseExpression,
visitSimpleCaseExpression, visitIfExpression, visitCoalesceExpression, visitNullIfExpression, coerceToSingleType at
trinodb/trino@029c93b6) derives and refuses, in its words. Merged into :data:`athena_sql.rules.RULES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from athena_sql.scopes import Scope
from athena_sql.types import BOOLEAN, TrinoType, common_super_type

if TYPE_CHECKING:
    from athena_sql.typecheck import _Typer as Typer

__all__ = ["RULES", "TYPE_MISMATCH", "common", "known", "single_type"]

TYPE_MISMATCH = "TYPE_MISMATCH"


def known(kind: TrinoType | None) -> bool:
    return kind is not None and not kind.is_unknown


def single_type(
    typer: Typer, node: exp.Expr, kinds: list[TrinoType], what: str, token: TokenType | None = None
) -> TrinoType | None:
    """The common type of ``kinds`` or a refusal (ExpressionAnalyzer.coerceToSingleType's words)."""
    common: TrinoType | None = kinds[0] if kinds else None
    for kind in kinds[1:]:
        if common is None:
            break
        following = common_super_type(common, kind)
        if following is None:
            distinct = list(dict.fromkeys(str(k) for k in kinds))
            where = typer.source.operator_position(node, (token,)) if token else typer.source.node_position(node)
            typer.refuse(
                where,
                TYPE_MISMATCH,
                what,
                f"{what} must be the same type or coercible to a common type. Cannot find common type between"
                f" {common} and {kind}, all types (without duplicates): [{', '.join(distinct)}]",
            )
            return None
        common = following
    return common


def _case(typer: Typer, node: exp.Case, scope: Scope) -> TrinoType | None:
    operand = node.args.get("this")
    operand_type = typer.expr(operand, scope) if isinstance(operand, exp.Expr) else None
    results: list[TrinoType | None] = []
    for when in node.args.get("ifs") or []:
        condition = typer.expr(when.this, scope)
        if operand is None and known(condition) and condition != BOOLEAN:
            typer.refuse(
                when.this,
                TYPE_MISMATCH,
                "CASE WHEN",
                f"CASE WHEN clause must evaluate to a boolean (actual: {condition})",
            )
        if operand_type is not None and condition is not None and common_super_type(operand_type, condition) is None:
            typer.refuse(
                when.this,
                TYPE_MISMATCH,
                "CASE",
                f"CASE operand type does not match WHEN clause operand type: {operand_type} vs {condition}",
            )
        results.append(typer.expr(when.args["true"], scope))
    default = node.args.get("default")
    if isinstance(default, exp.Expr):
        results.append(typer.expr(default, scope))
    return common(typer, node, results, "All CASE results")


def common(typer: Typer, node: exp.Expr, kinds: list[TrinoType | None], what: str) -> TrinoType | None:
    if any(k is None for k in kinds):
        return None
    return single_type(typer, node, [k for k in kinds if k is not None], what)


def _if(typer: Typer, node: exp.If, scope: Scope) -> TrinoType | None:
    condition = typer.expr(node.this, scope)
    if known(condition) and condition != BOOLEAN:
        typer.refuse(node.this, TYPE_MISMATCH, "IF", f"IF condition must evaluate to a boolean (actual: {condition})")
    branches = [node.args.get("true"), node.args.get("false")]
    kinds = [typer.expr(b, scope) for b in branches if isinstance(b, exp.Expr)]
    return common(typer, node, kinds, "IF results")


def _coalesce(typer: Typer, node: exp.Coalesce, scope: Scope) -> TrinoType | None:
    kinds = [typer.expr(node.this, scope), *(typer.expr(e, scope) for e in node.expressions)]
    return common(typer, node, kinds, "All COALESCE operands")


def _nullif(typer: Typer, node: exp.Nullif, scope: Scope) -> TrinoType | None:
    first, second = typer.expr(node.this, scope), typer.expr(node.expression, scope)
    if first is not None and second is not None and common_super_type(first, second) is None:
        typer.refuse(node, TYPE_MISMATCH, "NULLIF", f"Types are not comparable with NULLIF: {first} vs {second}")
    return first


#: The typing rules of this module, merged into :data:`athena_sql.rules.RULES`.
RULES: dict[type[exp.Expr], Callable[..., TrinoType | None]] = {
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Nullif: _nullif,
}
