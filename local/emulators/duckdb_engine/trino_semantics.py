"""Trino's semantics on DuckDB: rewrites of the bound Trino tree (sqlglot) before DuckDB SQL is generated.

Each node is typed as Trino types it (:mod:`.trino_types`: literals and decimal arithmetic by Trino's rules, columns
and function results from sqlglot's ``annotate_types`` with the tables' schema), children first, then rewritten
where DuckDB would answer differently. Sources: Trino's docs (``docs/src/main/sphinx/``) and tests, trinodb/trino at
6f7aadf5a9115ec244aac372e07df5a481a4907f unless a test names another commit.

- **Division** (functions/math.md: "integer division performs truncation"): integer / integer is DuckDB's ``//``
  (truncates toward zero, stays integer, fails on zero); decimal / decimal is exact, rounded half up, typed
  ``decimal(p,s)`` by decimal.md's rules (fails on zero); double stays IEEE (``1e0 / 0`` is Infinity). Modulo
  keeps the dividend's sign (DuckDB's too); decimal +, -, *, % are typed by decimal.md.
- **Casts**: varchar -> integer types parse as Java's ``Integer.parseInt`` (no blanks, no fraction: otherwise
  INVALID_CAST_ARGUMENT "Cannot cast 'x' to INT"; ``TRY_CAST`` gives NULL); double -> integer rounds half away
  from zero; ``varchar(n)`` truncates a varchar; a ``timestamp with time zone`` cast to timestamp or date keeps
  its own zone's wall time.
- **Time zones** (functions/datetime.md, "Time zone conversion"; the session zone is UTC): ``ts AT TIME ZONE 'Z'``
  reads ``ts`` as UTC and gives a ``timestamp with time zone`` in Z (DuckDB's ``AT TIME ZONE`` does the reverse);
  ``with_timezone(ts, 'Z')`` reads ``ts`` as Z's wall time. The zone travels with the type: ``hour()``,
  ``date_trunc``, ``format_datetime``, ... of such a value use Z's wall time, and the result column prints in Z.
  Zones may be fixed offsets (``+07:09``), timestamps have up to 9 fraction digits, intervals are year-month or
  day-second: :mod:`.trino_time` and :mod:`.trino_time_functions` (a subquery's column keeps them, or is refused).
- **Types Trino refuses**: a number, date or timestamp compared with a varchar literal, ``date - integer``, a number
  in ``||``/concat: TYPE_MISMATCH (Trino has no implicit cast from varchar, language/types.md).
- **try()**: the failures the rewrites raise are NULL inside it (functions/conditional.md).
- Calls (:mod:`.trino_functions`): what Athena lacks is FUNCTION_NOT_FOUND; string, regexp, date, array, map and
  json functions follow Trino's tests.
A construct that cannot be made faithful raises :class:`Refused` (``runs on Athena only: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from athena_sql.types import decimal_literal, decimal_result

from . import trino_collections as collections
from . import trino_functions as functions
from . import trino_json
from . import trino_strings as strings
from . import trino_time as tt
from . import trino_time_functions as time_functions
from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import UNKNOWN, UNKNOWN_ZONE, TrinoType, of_literal, of_sqlglot

__all__ = ["Refused", "Translation", "athena_only", "translate"]

_TID: Final = "trino_tid"
_INTEGER_CASTS: Final = {"tinyint": "TINYINT", "smallint": "SMALLINT", "integer": "INT", "bigint": "BIGINT"}
#: Functions of one timestamp argument whose answer depends on the wall time (Trino: the value's own zone).
_WALL_TIME_PARTS: Final = (
    exp.Year,
    exp.Quarter,
    exp.Month,
    exp.Day,
    exp.DayOfWeekIso,
    exp.DayOfYear,
    exp.WeekOfYear,
    exp.Hour,
    exp.Minute,
    exp.Second,
    exp.Date,
    exp.TimeToStr,
)


_OPERATORS: Final = {"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}


def _shown(kind: TrinoType) -> str:
    """A type as Trino's messages write it: ``integer``, ``decimal(10,2)``, ``timestamp(3)``."""
    if kind.name == "decimal" and kind.precision is not None:
        return f"decimal({kind.precision},{kind.scale})"
    return {"timestamp": "timestamp(3)", "timestamptz": "timestamp(3) with time zone"}.get(kind.name, kind.name)


@dataclass(frozen=True)
class Translation:
    """The rewritten tree (generate it as DuckDB) and, per output column, the zone it prints in (None: UTC or not
    a timestamp with time zone) and its Trino type where it is more precise than DuckDB's (``timestamp(0)``,
    ``varchar(3)``; None: DuckDB's type says it)."""

    tree: exp.Query
    output_zones: tuple[str | None, ...]
    output_types: tuple[str | None, ...] = ()


def translate(tree: exp.Query, schema: dict[str, dict[str, str]] | None = None) -> Translation:
    """Rewrite a copy of the bound Trino `tree` so that DuckDB answers as Trino; `schema`: table -> column -> Trino
    type text, for typing the columns. :raises Refused: a construct that cannot be reproduced (module docstring)."""
    tree = tree.copy()
    functions.check_calls(tree)
    annotated = _annotate(tree, schema or {})
    rewriter = _Rewriter(annotated)
    for node in reversed(list(tree.walk())):  # children before their parents
        rewriter.visit(node)
    _errors_inside_try_are_null(tree)
    zones: list[str | None] = []
    types: list[str | None] = []
    outputs = list(tree.expressions) if isinstance(tree, exp.Select) else []
    tt.refuse_lost_types(tree, rewriter.type_of, {id(p.unalias()) for p in outputs})
    if isinstance(tree, exp.Select):
        for projection in tree.expressions:
            kind = rewriter.type_of(projection.unalias() if isinstance(projection, exp.Alias) else projection)
            if isinstance(projection.unalias(), exp.Column):  # a subquery's column: its expression's type
                kind = tt.derived_type(projection.unalias(), rewriter.type_of) or kind
            if kind.name == "timestamptz" and kind.zone == UNKNOWN_ZONE:
                raise athena_only(f"a timestamp with a time zone known only when the query runs ({projection.sql()})")
            text = tt.output_text(projection.unalias(), kind)  # printed by the query: see .trino_time
            if text is not None:
                projection.replace(exp.alias_(text, projection.alias_or_name))
            printed_here = text is None and kind.name == "timestamptz" and kind.zone != "UTC"
            zones.append(kind.zone if printed_here else None)
            types.append(_precise_text(kind))
    return Translation(tree=tree, output_zones=tuple(zones), output_types=tuple(types))


def _errors_inside_try_are_null(tree: exp.Expr) -> None:
    """The failures the rewrites raise (``error(...)``) give NULL inside try(), as Trino's try does
    (functions/conditional.md: try returns NULL for the errors it catches); DuckDB's TRY refuses error()."""
    for attempt in list(tree.find_all(exp.Try)):
        for call in list(attempt.find_all(exp.Anonymous)):
            if call.name.lower() == "error":
                call.replace(exp.Null())


def _precise_text(kind: TrinoType) -> str | None:
    """A type whose parameter DuckDB loses, as Trino writes it (``timestamp(0)``, ``varchar(3)``, ``interval year
    to month``), else None."""
    if tt.type_text(kind) is not None:
        return tt.type_text(kind)
    if kind.name == "timestamp" and kind.precision is not None:
        return f"timestamp({kind.precision})"
    if kind.name == "timestamptz" and kind.precision is not None:
        return f"timestamp({kind.precision}) with time zone"
    if kind.name == "varchar" and kind.precision is not None:
        return f"varchar({kind.precision})"
    return None


def _annotate(tree: exp.Query, schema: dict[str, dict[str, str]]) -> dict[int, exp.DataType]:
    """sqlglot's types of the nodes of `tree`, by the tag each node gets (typed on a qualified copy)."""
    for position, node in enumerate(tree.walk()):
        node.meta[_TID] = position
    copy = tree.copy()
    try:
        copy = qualify(
            copy, schema=schema, dialect="trino", validate_qualify_columns=False, expand_stars=False, identify=False
        )
    except (SqlglotError, KeyError, ValueError):
        pass  # unqualified: columns stay untyped
    try:
        annotate_types(copy, schema=schema, dialect="trino")
    except (SqlglotError, KeyError, ValueError, AttributeError):
        return {}
    return {node.meta[_TID]: node.type for node in copy.walk() if _TID in node.meta and node.type is not None}


class _Rewriter:
    def __init__(self, annotated: dict[int, exp.DataType]) -> None:
        self._annotated = annotated
        self._types: dict[int, tuple[exp.Expr, TrinoType]] = {}  # id(node) -> (node kept alive, its type)

    def type_of(self, node: exp.Expr | None) -> TrinoType:
        if node is None:
            return UNKNOWN
        known = self._types.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        return of_sqlglot(self._annotated.get(node.meta.get(_TID, -1)))

    def _set(self, node: exp.Expr, kind: TrinoType) -> None:
        self._types[id(node)] = (node, kind)

    def visit(self, node: exp.Expr) -> None:
        kind, replacement = self._rewrite(node)
        if replacement is not None and replacement is not node:
            replacement.meta.update(node.meta)
            node.replace(replacement)
            node = replacement
        self._set(node, kind)

    # --- the rules -------------------------------------------------------------------------------------------
    def _rewrite(self, node: exp.Expr) -> tuple[TrinoType, exp.Expr | None]:
        if isinstance(node, exp.Literal):
            return of_literal(node), None
        timed = time_functions.rewrite(node, self)  # intervals and date/time calls (.trino_time_functions)
        if timed is not None:
            return timed
        if isinstance(node, exp.Column):  # a subquery's column carries its expression's zone and precision
            derived = tt.derived_type(node, self.type_of)
            if derived is not None and tt.carried(derived):
                node.meta[tt.CARRIED] = True  # kept by the copies the templates make
                return derived, None
        if isinstance(node, (exp.Paren, exp.Neg)):
            return self.type_of(node.this), None
        if isinstance(node, (exp.Div, exp.Mod, exp.Add, exp.Sub, exp.Mul)):
            return self._arithmetic(node)
        if isinstance(node, exp.Cast):  # TryCast is a Cast
            return self._cast(node)
        if isinstance(node, exp.AtTimeZone):
            return self._at_time_zone(node)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "at_timezone" and len(node.expressions) == 2:
            return self._at_time_zone(exp.AtTimeZone(this=node.expressions[0], zone=node.expressions[1]))
        if isinstance(node, exp.CurrentTimestamp):
            return TrinoType("timestamptz", zone="UTC"), None
        if isinstance(node, exp.Anonymous) and node.name.lower() == "with_timezone":
            value, zone_arg = (node.expressions + [None, None])[:2]
            zone = self._zone(zone_arg, "with_timezone")
            source = self.type_of(value)
            if source.name != "timestamp":
                raise athena_only("with_timezone of a value that is not a timestamp (without time zone)")
            zoned = TrinoType("timestamptz", precision=source.precision, zone=zone)
            return zoned, tt.from_wall(zone, value, source.precision)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
            return self._date_trunc(node)
        if isinstance(node, _WALL_TIME_PARTS):
            self._on_wall_time(node)
            if isinstance(node, exp.TimeToStr):
                return functions.rewrite_call(node, self) or (TrinoType("varchar"), None)
            return (TrinoType("date") if isinstance(node, exp.Date) else self.sqlglot_type(node)), None
        if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In)):
            strings.compare(node, self.type_of)  # char operands padded alike
            self._comparable(node)
            return TrinoType("boolean"), collections.array_comparison(node, self.type_of)
        if isinstance(node, (exp.DPipe, exp.Concat)):
            return self._concat(node)
        if isinstance(node, exp.Avg) and self.type_of(node.this).name == "decimal":
            return self._decimal_average(node)
        rewritten = functions.rewrite_call(node, self)
        if rewritten is not None:
            return rewritten
        return self.sqlglot_type(node), None

    def sqlglot_type(self, node: exp.Expr) -> TrinoType:
        kind = of_sqlglot(self._annotated.get(node.meta.get(_TID, -1)))
        if kind.name == "timestamptz":  # passed through (coalesce, case, max, ...): the zone of its arguments
            zones = {self.type_of(child).zone for child in node.iter_expressions()} - {None}
            kind = kind.in_zone(zones.pop() if len(zones) == 1 else ("UTC" if not zones else UNKNOWN_ZONE))
        return kind

    def _arithmetic(self, node: exp.Binary) -> tuple[TrinoType, exp.Expr | None]:
        left, right = self.type_of(node.left), self.type_of(node.right)
        intervals = tt.arithmetic(node, left, right)
        if intervals is not None:
            return intervals
        operator = {exp.Div: "/", exp.Mod: "%", exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}[type(node)]
        if left.is_float or right.is_float:
            kind = TrinoType("double" if "double" in (left.name, right.name) else "real")
            if isinstance(node, exp.Div):
                return kind, exp.Div(this=node.left, expression=node.right, typed=False, safe=False)
            return kind, None
        if left.is_integer and right.is_integer:
            wider = max(
                left.name, right.name, key=lambda name: ("tinyint", "smallint", "integer", "bigint").index(name)
            )
            if isinstance(node, exp.Div):
                return TrinoType(wider), exp.IntDiv(this=node.left, expression=node.right)
            return TrinoType(wider), None
        if left.is_exact and right.is_exact:
            lp, rp = left.as_decimal(), right.as_decimal()
            if lp is None or rp is None:
                if isinstance(node, exp.Div):
                    raise athena_only(f"decimal division of operands of unknown precision ({node.sql('trino')})")
                return TrinoType("decimal"), None
            precision, scale = decimal_result(operator, lp, rp)
            kind = TrinoType("decimal", precision=precision, scale=scale)
            if isinstance(node, exp.Div):
                return kind, self._decimal_divide(node, lp, rp, precision, scale)
            if isinstance(node, exp.Mul) and precision > 18:  # DuckDB multiplies 18-digit operands in 64 bits
                wide = f"CAST(_a AS DECIMAL(38, {lp[1]})) * CAST(_b AS DECIMAL(38, {rp[1]}))"
                return kind, duck(f"CAST({wide} AS DECIMAL({precision}, {scale}))", _a=node.left, _b=node.right)
            return kind, duck(f"CAST(_a AS DECIMAL({precision}, {scale}))", _a=node.copy())
        interval = node.right if isinstance(node.right, exp.Interval) else None
        if isinstance(node, (exp.Add, exp.Sub)) and left.name == "date" and interval is not None:
            unit = interval.text("unit").lower()
            if unit not in ("day", "week", "month", "quarter", "year"):
                raise athena_only(f"a date {operator} an interval of {unit or 'unknown'} units")
            return left, duck("CAST(_a AS DATE)", _a=node.copy())  # datetime.md: date '2012-08-08' + interval
        temporal = ("date", "timestamp", "timestamptz")
        if (left.name in temporal and right.is_exact) or (right.name in temporal and left.is_exact):
            raise Refused(  # Trino: date_add('day', -1, d) or d - INTERVAL '1' DAY
                "TYPE_MISMATCH",
                f"Cannot apply operator: {_shown(left)} {operator} {_shown(right)}"
                " (use date_add('day', n, x) or an INTERVAL '1' DAY)",
            )
        if isinstance(node, exp.Div) and left.name != "unknown" and right.name != "unknown":
            return self.sqlglot_type(node), None  # interval / number and the like: DuckDB's operator
        if isinstance(node, exp.Div):
            raise athena_only(f"division of operands whose types the local engine cannot derive ({node.sql('trino')})")
        return self.sqlglot_type(node), None

    @staticmethod
    def _decimal_divide(
        node: exp.Div, left: tuple[int, int], right: tuple[int, int], precision: int, scale: int
    ) -> exp.Expr:
        """Exact: unscaled integers (HUGEINT), the quotient rounded half up (Trino's DecimalOperators, HALF_UP)."""
        (_, xs), (_, ys) = left, right
        shift = scale - xs + ys  # beyond 38 digits the HUGEINT overflows when the query runs: refused then (.session)
        numerator = f"(CAST(_a * {10**xs} AS HUGEINT) * {10**shift})"
        denominator = f"CAST(_b * {10**ys} AS HUGEINT)"
        rounded = (
            f"({numerator} // {denominator} + CASE WHEN abs({numerator} % {denominator}) >= abs({denominator})"
            f" - abs({numerator} % {denominator}) THEN sign({numerator}) * sign({denominator}) ELSE 0 END)"
        )
        unit = f" * {'0.' + '0' * (scale - 1) + '1'}" if scale else ""
        template = f"CAST(CAST({rounded} AS DECIMAL(38, 0)){unit} AS DECIMAL({precision}, {scale}))"
        return duck(template, _a=node.left, _b=node.right)

    def _comparable(self, node: exp.Expr) -> None:
        """Trino compares a number, date or timestamp with a varchar nowhere (no implicit cast): TYPE_MISMATCH, as
        Trino's analyzer says it ("Cannot apply operator: integer = varchar(4)"; TestAnalyzer)."""
        left = node.this
        others = [node.expression] if isinstance(node, exp.Binary) else []
        if isinstance(node, exp.Binary) and literal_text(left) is not None:  # '1545' = flight
            left, others = node.expression, [left]
        if isinstance(node, exp.Between):
            others = [node.args.get("low"), node.args.get("high")]
        elif isinstance(node, exp.In):
            others = list(node.expressions)
        kind = self.type_of(left)
        if not (kind.is_integer or kind.is_float or kind.name in ("decimal", "date", "timestamp", "timestamptz")):
            return
        for other in others:
            text = literal_text(other)
            if text is not None:
                operator = {exp.Between: "BETWEEN", exp.In: "IN"}.get(type(node)) or node.key.upper()
                raise Refused(
                    "TYPE_MISMATCH",
                    f"Cannot apply operator: {_shown(kind)} {_OPERATORS.get(operator, operator)} varchar({len(text)})"
                    f" (cast the literal, e.g. CAST('{text}' AS {_shown(kind).split('(')[0]}))",
                )

    def _concat(self, node: exp.Expr) -> tuple[TrinoType, exp.Expr | None]:
        """``||`` and concat take varchars (or arrays): a number is TYPE_MISMATCH (functions/string.md, concat);
        NULL makes the result NULL (a varchar)."""
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else list(node.expressions)
        kinds = [self.type_of(part) for part in parts]
        appended = collections.element_concat(node, parts, kinds)
        if appended is not None:
            return TrinoType("array"), appended
        if any(kind.is_integer or kind.is_float or kind.name in ("decimal", "boolean") for kind in kinds):
            shown = ", ".join(_shown(kind) if kind.name != "varchar" else "varchar" for kind in kinds)
            raise Refused("TYPE_MISMATCH", f"Unexpected parameters ({shown}) for function concat (cast to varchar)")
        if all(kind.name in ("varchar", "unknown") for kind in kinds) and any(k.name == "varchar" for k in kinds):
            return TrinoType("varchar"), duck("CAST(_a AS VARCHAR)", _a=node.copy())
        return self.sqlglot_type(node), None

    def _decimal_average(self, node: exp.Avg) -> tuple[TrinoType, exp.Expr | None]:
        """avg(decimal(p,s)) is decimal(p,s) (Trino's DecimalAverageAggregation): the exact sum over the count."""
        kind = self.type_of(node.this)
        if isinstance(node.parent, exp.Window) or kind.precision is None or kind.scale is None:
            raise athena_only("avg of a decimal as a window function or of unknown precision")
        total = duck(f"CAST(sum(_a) AS DECIMAL(38, {kind.scale}))", _a=node.this)
        division = exp.Div(this=total, expression=duck("count(_a)", _a=node.this))
        exact = self._decimal_divide(division, (38, kind.scale), (19, 0), 38, kind.scale)
        return kind, duck(f"CAST(_a AS DECIMAL({kind.precision}, {kind.scale}))", _a=exact)

    def _cast(self, node: exp.Cast) -> tuple[TrinoType, exp.Expr | None]:
        source, target = self.type_of(node.this), of_sqlglot(node.to)
        char = strings.cast(node, source, target)  # to and from char(n)
        if char is not None:
            return char
        safe = isinstance(node, exp.TryCast)
        json_cast = trino_json.json_cast(node, source, target)
        if json_cast is not None and not safe:
            return json_cast
        text = literal_text(node.this)
        if target.name == "decimal" and target.precision is None and text is not None:  # DECIMAL '1.50'
            literal = decimal_literal(text)  # the check's rule (athena_sql.types)
            if literal is None:
                raise Refused("INVALID_LITERAL", f"'{text}' is not a valid DECIMAL literal")
            precision, scale = literal.parameters
            typed = duck(f"CAST(_a AS DECIMAL({precision}, {scale}))", _a=node.this)
            return TrinoType("decimal", precision=precision, scale=scale), typed
        if source.name == "timestamptz" and target.name in ("timestamp", "date"):
            zone = self._known_zone(source, "a cast")
            wall = tt.to_wall(zone, node.this, source.precision)
            nanos = target.name == "timestamp" and (target.precision or 3) > 6
            return target, duck(f"CAST(_a AS {'TIMESTAMP_NS' if nanos else target.name.upper()})", _a=wall)
        if target.name == "timestamptz":
            return self._zoned_cast(node, source, target, text)
        if target.name == "timestamp" and (target.precision or 3) > 6:  # TIMESTAMP_NS (.trino_time)
            if target.precision is not None and target.precision > 9:
                raise athena_only(f"a timestamp({target.precision}) (picoseconds)")
            return target, duck("CAST(_a AS TIMESTAMP_NS)", _a=node.this)
        if target.name in _INTEGER_CASTS and source.name == "varchar":
            duck_type = _INTEGER_CASTS[target.name]
            failure = "NULL" if safe else f"error('INVALID_CAST_ARGUMENT: Cannot cast ''' || _a || ''' to {duck_type}')"
            template = f"CASE WHEN regexp_full_match(_a, '[+-]?[0-9]+') THEN TRY_CAST(_a AS {duck_type}) END"
            return target, duck(f"COALESCE({template}, CASE WHEN _a IS NOT NULL THEN {failure} END)", _a=node.this)
        if target.name in _INTEGER_CASTS and source.is_float:
            cast = "TRY_CAST" if safe else "CAST"
            return target, duck(f"{cast}(round(_a) AS {_INTEGER_CASTS[target.name]})", _a=node.this)
        if target.name == "json" and source.name in ("varchar", "unknown", "timestamp", "timestamptz", "date"):
            # Trino: a varchar becomes a JSON string ('"abc"'); DuckDB parses it as JSON text
            raise athena_only(f"a cast of a {source.name} to json ({node.sql('trino')})")
        if target.name == "varchar" and target.precision is None and source.name in ("timestamp", "timestamptz"):
            return target, self._timestamp_text(node, source)
        if target.name == "varchar" and source.is_float:  # Java's Double.toString (1.0E10) is not reproduced
            raise athena_only(f"a cast of a {source.name} to varchar ({node.sql('trino')})")
        if target.name == "varchar" and target.precision is not None:
            if source.name == "varchar":
                return target, duck(f"CAST(substring(_a, 1, {target.precision}) AS VARCHAR)", _a=node.this)
            raise athena_only(f"a cast to varchar({target.precision}) of a {source.name} ({node.sql('trino')})")
        return target, None

    @staticmethod
    def _zoned_cast(
        node: exp.Cast, source: TrinoType, target: TrinoType, text: str | None
    ) -> tuple[TrinoType, exp.Expr | None]:
        """To a timestamp with time zone: a literal's zone (a region, UTC or an offset) and instant are read by
        :func:`.trino_time.zoned_literal`; a timestamp is read in the session zone; a varchar's zone is known only
        when the query runs."""
        if source.name == "timestamptz":
            return target.in_zone(source.zone), None
        if text is not None:
            zone, constant = tt.zoned_literal(text, target.precision)
            return target.in_zone(zone), constant
        if target.precision is not None and target.precision > 6:
            raise athena_only(f"a cast to timestamp({target.precision}) with time zone of a {source.name}")
        return target.in_zone(UNKNOWN_ZONE if source.name == "varchar" else "UTC"), None

    def _timestamp_text(self, node: exp.Cast, source: TrinoType) -> exp.Expr:
        """CAST(timestamp(p) AS varchar) as Trino prints it: p fraction digits (a column is timestamp(3)); a zoned
        one in its own zone, the zone's name after it (``2020-01-01 11:00:00.000 Europe/Berlin``)."""
        precision = 3 if source.precision is None else source.precision
        if source.name == "timestamp":
            return tt.timestamp_text(node.this, precision)
        zone = self._known_zone(source, "a cast to varchar")
        wall = tt.to_wall(zone, node.this, precision)
        return duck(f"_t || ' {zone}'", _t=tt.timestamp_text(wall, precision))

    def _at_time_zone(self, node: exp.AtTimeZone) -> tuple[TrinoType, exp.Expr | None]:
        source = self.type_of(node.this)
        zone = self._zone(node.args.get("zone"), "AT TIME ZONE")
        zoned = TrinoType("timestamptz", precision=source.precision, zone=zone)
        if source.name == "timestamp" and (source.precision or 3) > 6:  # TIMESTAMP_NS: already the UTC instant
            return zoned, node.this
        if source.name == "timestamp":  # read as UTC (the session zone): the same instant, shown in `zone`
            return zoned, duck("CAST(_a AS TIMESTAMPTZ)", _a=node.this)
        if source.name == "timestamptz":
            return zoned, node.this
        raise athena_only(f"AT TIME ZONE of a {source.name} ({node.sql('trino')})")

    def _date_trunc(self, node: exp.TimestampTrunc | exp.DateTrunc) -> tuple[TrinoType, exp.Expr | None]:
        source = self.type_of(node.this)
        if source.name == "date":  # a date stays a date (TestDateTimeFunctions.testTruncateDate)
            unit = (node.text("unit") or "day").lower()
            if unit not in ("day", "week", "month", "quarter", "year"):
                raise Refused("INVALID_FUNCTION_ARGUMENT", f"'{unit}' is not a valid DATE field")
            return source, duck("CAST(_a AS DATE)", _a=node.copy())
        if source.name != "timestamptz" or source.zone == "UTC":
            return source if source.name != "unknown" else self.sqlglot_type(node), None
        zone = self._known_zone(source, "date_trunc")
        unit = node.text("unit") or "day"
        wall = duck(f"date_trunc('{unit.lower()}', _a)", _a=tt.to_wall(zone, node.this, source.precision))
        return source, tt.from_wall(zone, wall, source.precision)

    def wall_time(self, node: exp.Expr) -> exp.Expr:
        """`node` itself, or for a timestamp with a (non-UTC) time zone, its wall time in that zone."""
        source = self.type_of(node)
        if source.name == "timestamptz" and source.zone != "UTC":
            zone = self._known_zone(source, "a function")
            return tt.to_wall(zone, node, source.precision)
        return node

    def _on_wall_time(self, node: exp.Expr) -> None:
        """hour(x), date_format(x, f), ...: a zoned `x` is replaced by its wall time in its own zone."""
        source = self.type_of(node.this)
        if source.name == "timestamptz" and source.zone != "UTC":
            zone = self._known_zone(source, node.key)
            node.set("this", tt.to_wall(zone, node.this, source.precision))

    def _known_zone(self, kind: TrinoType, construct: str) -> str:
        if kind.zone in (None, UNKNOWN_ZONE):
            raise athena_only(f"{construct} of a timestamp with a time zone known only when the query runs")
        return kind.zone

    @staticmethod
    def _zone(node: Any, construct: str) -> str:
        """A zone argument as Trino names it: a literal zone, or an INTERVAL offset (at_timezone, AT TIME ZONE)."""
        if isinstance(node, exp.Interval):
            return tt.interval_zone(node)
        zone = literal_text(node)
        if zone is None:
            raise athena_only(f"{construct} with a zone that is not a literal")
        return tt.zone_name(zone)
