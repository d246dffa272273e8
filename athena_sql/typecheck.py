"""Types of every expression of a query, derived as Trino's analyzer derives them, and the refusals they lead to.

Derived: columns (from ``tables``: the job's source schema), parameters (the literal text Athena binds:
``'2013-01-01 00:00:00'`` is a varchar(19)), literals (:func:`athena_sql.types.literal_number`, ``'abc'``
varchar(3), typed literals ``DATE '...'``), casts, operators and function results (:mod:`athena_sql.calls`).
Refused (io/trino/sql/analyzer/ExpressionAnalyzer.java and StatementAnalyzer.java, in the words Trino's tests and
users quote, TestAnalyzer.java among them): a comparison, BETWEEN or IN without a common super type, arithmetic without an operator
(``date - integer``, ``varchar + integer``), ``||`` of anything but strings, arrays or varbinary (``concat``),
LIKE on a non-string, a non-boolean WHERE/HAVING/JOIN ON/AND/OR/NOT/CASE WHEN, AT TIME ZONE and EXTRACT of a
non-temporal value, CASE/COALESCE/IF results and ARRAY elements without a common type.

A type that cannot be derived is ``None``, and nothing that depends on it is refused.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from athena_sql import ordering, rules, stars, types
from athena_sql.diagnostics import Diagnostic, Unchecked
from athena_sql.functions import Function
from athena_sql.scopes import Columns, Relation, Scope
from athena_sql.source import Source
from athena_sql.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    UNKNOWN,
    TrinoType,
    literal_number,
    parse_type,
)

__all__ = ["Analysis", "analyze"]

TYPE_MISMATCH = "TYPE_MISMATCH"
_COMPARISONS: dict[type[exp.Expr], tuple[str, TokenType]] = {
    exp.EQ: ("=", TokenType.EQ),
    exp.NEQ: ("<>", TokenType.NEQ),
    exp.GT: (">", TokenType.GT),
    exp.GTE: (">=", TokenType.GTE),
    exp.LT: ("<", TokenType.LT),
    exp.LTE: ("<=", TokenType.LTE),
    exp.NullSafeEQ: ("IS NOT DISTINCT FROM", TokenType.IS),
    exp.NullSafeNEQ: ("IS DISTINCT FROM", TokenType.IS),
}
_ARITHMETIC: dict[type[exp.Expr], tuple[str, TokenType]] = {
    exp.Add: ("+", TokenType.PLUS),
    exp.Sub: ("-", TokenType.DASH),
    exp.Mul: ("*", TokenType.STAR),
    exp.Div: ("/", TokenType.SLASH),
    exp.Mod: ("%", TokenType.MOD),
}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$", re.IGNORECASE)


@dataclass
class Analysis:
    """What :func:`analyze` found: ``refusals``, ``unchecked``, and the catalog entry of each function call node
    (``id(node)`` -> :class:`Function`, for the aggregation rules) and the calls refused as unknown."""

    refusals: list[Diagnostic] = field(default_factory=list)
    unchecked: list[Unchecked] = field(default_factory=list)
    functions: dict[int, Function] = field(default_factory=dict)
    #: ``id(node)`` of calls already refused (unknown function): not judged again by the aggregation rules
    refused_calls: set[int] = field(default_factory=set)
    #: ``id(node)`` of columns of an enclosing query (a correlated subquery's): constant for its groups
    outer_columns: set[int] = field(default_factory=set)
    #: The statement's result columns' types, in order (``None``: one not derived); empty when not known (a ``*``,
    #: a set operation)
    output_types: tuple[TrinoType | None, ...] = ()
    #: ``id(node)`` of each ``*`` / ``t.*`` select item -> the names of the columns it selects, when known
    stars: dict[int, list[str]] = field(default_factory=dict)


def analyze(
    statement: exp.Expr, source: Source, *, tables: Mapping[str, Mapping[str, str]], parameters: Mapping[str, str]
) -> Analysis:
    """Type ``statement`` (a parsed query of ``source``) against ``tables`` and ``parameters`` (as in
    :func:`athena_sql.analyzer.check_query`)."""
    typer = _Typer(source, tables, parameters)
    typer.query(statement, Scope())
    if isinstance(statement, exp.Select) and not any(
        isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star) for item in statement.expressions
    ):
        typer.analysis.output_types = tuple(typer.types.get(id(item)) for item in statement.expressions)
    return typer.analysis


class _Typer:
    def __init__(self, source: Source, tables: Mapping[str, Mapping[str, str]], parameters: Mapping[str, str]):
        self.source = source
        self.tables = {name.lower(): columns for name, columns in tables.items()}
        self.parameters = parameters
        self.analysis = Analysis()
        self.types: dict[int, TrinoType | None] = {}
        self.reported: set[str] = set()

    # --- reporting -------------------------------------------------------------------------------------------
    def refuse(self, where: exp.Expr | int | tuple[int, int], error: str, construct: str, message: str) -> None:
        if isinstance(where, tuple):
            line, column = where
        elif isinstance(where, int):
            line, column = self.source.token_position(self.source.tokens[where])
        else:
            line, column = self.source.node_position(where)
        self.analysis.refusals.append(Diagnostic(line, column, error, construct, message))

    def note(self, node: exp.Expr, construct: str, reason: str, *, kind: str = "construct") -> None:
        if construct in self.reported:
            return
        self.reported.add(construct)
        line, column = self.source.node_position(node)
        self.analysis.unchecked.append(Unchecked(line, column, construct, reason, kind))

    # --- queries ---------------------------------------------------------------------------------------------
    def query(self, node: exp.Expr, scope: Scope) -> Columns | None:
        """The output columns of a query node (``None``: not known), typing everything inside it."""
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            scope = Scope(scope.relations, dict(scope.ctes), scope.parent, scope.lambdas)
            for cte in with_.expressions:
                columns = self.query(cte.this, scope.child())
                scope.ctes[cte.alias_or_name.lower()] = _renamed(columns, cte.args.get("alias"))
        if isinstance(node, exp.Subquery):
            return self.query(node.this, scope)
        if isinstance(node, exp.SetOperation):
            left = self.query(node.left, scope)
            self.query(node.right, scope)
            return left
        if isinstance(node, exp.Select):
            return self.select(node, scope)
        if isinstance(node, exp.Values):
            return self.values(node, scope)
        self.note(node, type(node).__name__, "not analyzed")
        return None

    def values(self, node: exp.Values, scope: Scope) -> Columns | None:
        rows = node.expressions
        first = [self.expr(v, scope) for v in rows[0].expressions] if rows and isinstance(rows[0], exp.Tuple) else []
        for row in rows[1:]:
            self.expr(row, scope)
        return _renamed({f"_col{i}": t for i, t in enumerate(first)}, node.args.get("alias"))

    def select(self, node: exp.Select, outer: Scope) -> Columns | None:
        # ``outer``: the scope this SELECT is nested in (for a subquery, a child scope whose parent is the enclosing
        # query's): the SELECT's own names come first, then the enclosing query's (correlation)
        scope = Scope(ctes=dict(outer.ctes), parent=outer if outer.relations else outer.parent)
        from_ = node.args.get("from_")
        joins = node.args.get("joins") or []
        items = ([from_.this] if isinstance(from_, exp.From) else []) + [j.this for j in joins]
        for item in items:
            scope.relations.append(self.relation(item, scope))
        for join in joins:
            scope.using.update(c.name.lower() for c in join.args.get("using") or [] if isinstance(c, exp.Expr))
        for join in joins:
            on = join.args.get("on")
            if isinstance(on, exp.Expr):
                self.condition(on, scope, "JOIN ON clause")
        outputs: Columns = {}
        for index, item in enumerate(node.expressions):
            if isinstance(item, exp.Star) and not items:
                self.refuse(item, "COLUMN_NOT_FOUND", "*", "SELECT * not allowed in queries without FROM clause")
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star):
                expanded = (
                    scope.all_columns() if isinstance(item, exp.Star) else stars.qualified_star(self, item, scope)
                )
                if expanded is None:
                    return self._rest(node, scope, None)
                self.analysis.stars[id(item)] = list(expanded)
                outputs.update(expanded)
                continue
            kind = self.expr(item, scope)
            outputs[_output_name(index, item)] = kind
        return self._rest(node, scope, outputs)

    def _rest(self, node: exp.Select, scope: Scope, outputs: Columns | None) -> Columns | None:
        for item in node.expressions:
            self.expr(item, scope)
        where = node.args.get("where")
        if isinstance(where, exp.Where):
            self.condition(where.this, scope, "WHERE clause")
        group = node.args.get("group")
        if isinstance(group, exp.Group):
            for item in group.expressions:
                self.expr(item, scope)
        having = node.args.get("having")
        if isinstance(having, exp.Having):
            self.condition(having.this, scope, "HAVING clause")
        scope.outputs = dict(outputs or {})
        order = node.args.get("order")
        if isinstance(order, exp.Order):
            for item in order.expressions:
                self.expr(item, scope)
            ordering.sort_keys(self, order)
        return outputs

    def relation(self, item: exp.Expr, scope: Scope) -> Relation:
        alias = item.alias_or_name.lower() if isinstance(item, exp.Expr) else ""
        if isinstance(item, exp.Table):
            name = item.name.lower()
            if not item.db and name in scope.ctes:
                return Relation(alias, _renamed(scope.ctes[name], item.args.get("alias")))
            if name in self.tables:
                columns: Columns = {}
                for column, text in self.tables[name].items():
                    columns[column.lower()] = parse_type(text)
                    if columns[column.lower()] is None:
                        self.note(
                            item,
                            f"{name}.{column.lower()}",
                            f"its type {text!r} is not one the check knows: what uses it was not type-checked",
                        )
                return Relation(alias, _renamed(columns, item.args.get("alias")))
            shown = ".".join(part for part in (item.catalog, item.db, item.name) if part)
            self.note(item, shown, "its columns are not known: their names and types were not checked", kind="table")
            return Relation(alias, None)
        if isinstance(item, exp.Subquery):
            return Relation(alias, _renamed(self.query(item.this, scope.child()), item.args.get("alias")))
        if isinstance(item, exp.Unnest):
            columns = {}
            for value in item.expressions:
                kind = self.expr(value, scope)
                if kind is not None and kind.name == "array" and kind.children:
                    element = kind.children[0]
                    if element.name == "row":
                        columns.update({f"_u{len(columns) + i}": c for i, c in enumerate(element.children)})
                    else:
                        columns[f"_u{len(columns)}"] = element
                elif kind is not None and kind.name == "map":
                    columns.update({f"_u{len(columns)}": kind.children[0], f"_u{len(columns) + 1}": kind.children[1]})
                else:
                    return Relation(alias, _renamed(None, item.args.get("alias")))
            renamed = _renamed(columns, item.args.get("alias")) or {}
            offset = item.args.get("offset")  # WITH ORDINALITY: sqlglot keeps its column's name here
            if offset:
                renamed[offset.name.lower() if isinstance(offset, exp.Identifier) else f"_u{len(renamed)}"] = BIGINT
            return Relation(alias, renamed)
        if isinstance(item, exp.Lateral | exp.Values):
            inner = item.this if isinstance(item, exp.Lateral) else item
            return Relation(alias, self.query(inner, scope.child()) if isinstance(inner, exp.Expr) else None)
        self.note(item, type(item).__name__, "a relation the check does not analyze")
        return Relation(alias, None)

    # --- expressions -----------------------------------------------------------------------------------------
    def condition(self, node: exp.Expr, scope: Scope, clause: str) -> None:
        kind = self.expr(node, scope)
        if kind is not None and not kind.is_unknown and kind != BOOLEAN:
            self.refuse(node, TYPE_MISMATCH, clause, f"{clause} must evaluate to a boolean: actual type {kind}")

    def expr(self, node: exp.Expr, scope: Scope) -> TrinoType | None:
        key = id(node)
        if key not in self.types:
            self.types[key] = None  # a cycle guard; the real value follows
            self.types[key] = self._expr(node, scope)
        return self.types[key]

    def _expr(self, node: exp.Expr, scope: Scope) -> TrinoType | None:
        if isinstance(node, exp.Alias | exp.Paren | exp.Ordered | exp.Try):
            return self.expr(node.this, scope)
        if isinstance(node, exp.Literal):
            return TrinoType("varchar", (len(node.this),)) if node.is_string else literal_number(node.this)
        if isinstance(node, exp.Null):
            return UNKNOWN
        if isinstance(node, exp.Boolean):
            return BOOLEAN
        if isinstance(node, exp.Placeholder):
            return self.parameter(node.name)
        if isinstance(node, exp.JSONExtract) and self.json_arrow(node):
            return None
        if isinstance(node, exp.Identifier):  # a lambda's parameter in its body
            return scope.lambdas.get(node.name.lower())
        if isinstance(node, exp.All | exp.Any):  # a quantified comparison's subquery
            return self.expr(node.this, scope)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                return None
            found, kind = scope.resolve(node.name, node.table or None)
            if not found and not node.args.get("db"):
                self.column_not_found(node, scope)
            elif found and not node.table and scope.ambiguous(node.name):
                self.refuse(node, "AMBIGUOUS_NAME", node.name, f"Column '{node.name}' is ambiguous")
            if found and not scope.resolves_here(node.name, node.table or None):
                self.analysis.outer_columns.add(id(node))
            return kind
        if isinstance(node, exp.Cast) and self.decimal_literal(node):  # DECIMAL '1.50' (sqlglot: a cast)
            text = node.this.this.strip()
            kind = types.decimal_literal(text)
            if kind is None:
                message = f"'{node.this.this}' is not a valid DECIMAL literal"
                self.refuse(node, "INVALID_LITERAL", self.source.text_of(node), message)
            return kind
        if isinstance(node, exp.Cast | exp.TryCast):
            value = self.expr(node.this, scope)
            target = parse_type(node.to.sql(dialect="trino"))
            if value is not None and target is not None and not types.castable(value, target):
                where = self.source.node_position(node)
                self.refuse(where, TYPE_MISMATCH, self.source.text_of(node), f"Cannot cast {value} to {target}")
            elif not isinstance(node, exp.TryCast) and target is not None and not rules.in_try(node):
                self.constant_cast(node, target)
            return target
        if type(node) in _COMPARISONS:
            return rules.comparison(self, node, scope, *_COMPARISONS[type(node)])
        if type(node) in _ARITHMETIC:
            return rules.arithmetic(self, node, scope, *_ARITHMETIC[type(node)])
        if isinstance(node, exp.DPipe):
            return rules.concatenation(self, node, scope)
        if isinstance(node, exp.Subquery | exp.Select | exp.SetOperation | exp.Values):
            columns = self.query(node, scope.child())
            return next(iter(columns.values()), None) if columns else None
        if isinstance(node, exp.Window):
            for part in node.iter_expressions():
                if part is not node.this:
                    self.expr(part, scope)
                    ordering.sort_keys(self, part)
            kind = self.expr(node.this, scope)
            function = self.analysis.functions.get(id(node.this))
            if function is not None and not function.windowable:
                construct = self.source.text_of(node.this)
                self.refuse(node.this, "FUNCTION_NOT_WINDOW", construct, f"Not a window function: {function.name}")
            return kind
        if isinstance(node, exp.Lambda):
            return None  # typed by the call that receives it (rules.call)
        for rule_kind, rule in rules.RULES.items():
            if isinstance(node, rule_kind):
                if isinstance(node, exp.Func):
                    rules.name_check(self, node)
                return rule(self, node, scope)
        if isinstance(node, exp.Func):
            return rules.call(self, node, scope)
        for child in node.iter_expressions():
            self.expr(child, scope)
        return None

    def decimal_literal(self, node: exp.Cast) -> bool:
        """Whether ``node`` is the typed literal ``DECIMAL '...'`` (not ``CAST('...' AS decimal)``, decimal(38,0))."""
        if not (isinstance(node.this, exp.Literal) and node.this.is_string and not isinstance(node, exp.TryCast)):
            return False
        if node.to.this != exp.DType.DECIMAL or node.to.expressions:
            return False
        return self.source.text_of(node).lstrip().upper().startswith("DECIMAL")

    def constant_cast(self, node: exp.Cast, target: TrinoType) -> None:
        """A cast of a varchar literal that can never succeed (``CAST('P332a' AS bigint)``, ``INTEGER
        '2147483648'``): Trino evaluates constant casts before running (INVALID_CAST_ARGUMENT)."""
        literal = node.this
        if not (isinstance(literal, exp.Literal) and literal.is_string) or not (
            target.is_integer or target.name in ("real", "double")
        ):
            return
        text = literal.this.strip()
        if target.is_integer:
            bits = {"tinyint": 8, "smallint": 16, "integer": 32, "bigint": 64}[target.name]
            fits = bool(re.fullmatch(r"[+-]?\d+", text)) and -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1)
        else:
            try:
                float(text)
                fits = True
            except ValueError:
                fits = False
        if not fits:
            where = self.source.node_position(node)
            shown = "INT" if target.name == "integer" else str(target).upper()  # FromVarchar.toInteger's words
            message = f"Cannot cast '{literal.this}' to {shown}"
            self.refuse(where, "INVALID_CAST_ARGUMENT", self.source.text_of(node), message)

    def json_arrow(self, node: exp.JSONExtract) -> bool:
        """``j -> 'key'`` outside a call's arguments: PostgreSQL's JSON operator, a lambda to Trino (which allows a
        lambda only as a function's argument; sqlglot reads it as JSON access). Refused as Trino's parser would."""
        span = self.source.span(node.this) if isinstance(node.this, exp.Expr) else None
        if span is None:
            return False
        index = self.source.token_index_of(span[1]) + 1
        if index >= len(self.source.tokens) or self.source.tokens[index].token_type != TokenType.ARROW:
            return False
        message = (
            "'->' is a lambda in Trino, allowed only as a function's argument; for JSON use json_extract(j, '$.key')"
        )
        self.refuse(index, "SYNTAX_ERROR", self.source.text_of(node), message)
        return True

    def note_underived(self, node: exp.Expr, operands: tuple[exp.Expr, ...], operator: str) -> None:
        """Say that ``operator`` was not type-checked when an operand's type was not derived for a reason not said
        already (a column of an unknown table or type is noted with its table): a function or construct whose
        result type the check does not know."""
        for operand in operands:
            if self.types.get(id(operand)) is not None or isinstance(operand, exp.Lambda):
                continue
            if any(_names_untyped(n, self.types) for n in operand.walk()):
                continue
            text = self.source.text_of(operand)
            self.note(
                operand, text, f"its type is not derived by the check: the {operator} it is used with was not checked"
            )

    def column_not_found(self, node: exp.Column, scope: Scope) -> None:
        """``Column 'x' cannot be resolved`` (COLUMN_NOT_FOUND, StatementAnalyzer's words), with the closest names;
        an output alias named where Trino resolves only input columns says so (trinodb/trino#8582, #16533)."""
        shown = f"{node.table}.{node.name}" if node.table else node.name
        names = scope.visible_names()
        close = difflib.get_close_matches(node.name.lower(), names, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        select = node.find_ancestor(exp.Select)
        aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)} if select else set()
        if not node.table and node.name.lower() in aliases:
            hint = "; it is an output alias, which Trino's WHERE, GROUP BY and HAVING cannot name: repeat the"
            hint += " expression, or in GROUP BY use its position (GROUP BY 1)"
        self.refuse(node, "COLUMN_NOT_FOUND", shown, f"Column '{shown}' cannot be resolved{hint}")

    def parameter(self, name: str) -> TrinoType | None:
        """The type of the literal Athena binds to ``:name`` (``None``: not a parameter the check was given)."""
        text = self.parameters.get(name)
        if text is None:
            return None
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] == "'":
            return TrinoType("varchar", (len(text[1:-1].replace("''", "'")),))
        if _NUMBER.match(text):
            return literal_number(text)
        if text.lower() in ("true", "false"):
            return BOOLEAN
        match = re.match(r"^(date|timestamp)\s+'(.*)'$", text, re.IGNORECASE | re.DOTALL)
        if match:
            return DATE if match.group(1).lower() == "date" else TrinoType("timestamp", (3,))
        return None


def _names_untyped(node: exp.Expr, types: Mapping[int, TrinoType | None]) -> bool:
    """Whether ``node`` is a name (a column, a lambda parameter) whose type is not known."""
    if isinstance(node, exp.Column):
        return types.get(id(node)) is None
    parents = (exp.Column, exp.Table, exp.TableAlias, exp.Alias)
    return isinstance(node, exp.Identifier) and not isinstance(node.parent, parents) and types.get(id(node)) is None


def _renamed(columns: Columns | None, alias: exp.Expr | None) -> Columns | None:
    """``columns`` under a relation alias's column names (``t(a, b)``)."""
    names = [c.name.lower() for c in alias.args.get("columns") or []] if isinstance(alias, exp.TableAlias) else []
    if not names:
        return columns
    values = list(columns.values()) if columns is not None else []
    return {name: values[i] if i < len(values) else None for i, name in enumerate(names)}


def _output_name(index: int, item: exp.Expr) -> str:
    if isinstance(item, exp.Alias):
        return item.alias.lower()
    if isinstance(item, exp.Column):
        return item.name.lower()
    return f"_col{index}"
