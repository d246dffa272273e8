"""Typed signatures of the functions whose argument types the check judges, and their result types.

The function list (:mod:`athena_sql.functions`) writes arguments as Trino's docs name them (``date_trunc(unit, x)``),
which says how many but not of which type; for the functions below the types come from Trino's docs pages
(docs/src/main/sphinx/functions/datetime.md, string.md, math.md, aggregate.md, array.md, map.md, json.md,
regexp.md at the commits recorded in functions.toml's ``[source.pages]``) and the implementations they document
(io/trino/operator/scalar/DateTimeFunctions.java, StringFunctions.java, MathFunctions.java); where they are not
certain, the pattern is ``any`` (never refused).

A parameter is a *pattern*: ``varchar`` any varchar or char (Trino's ``varchar(x)``), ``timestamp`` any precision
(``timestamp(p)``), ``timestamptz`` (``timestamp(p) with time zone``), ``time``, ``date``, ``bigint`` any exact integer,
``double`` any number, ``boolean``, ``array``, ``map``, ``function`` (a lambda), ``json``, ``varbinary``, ``interval``, ``temporal`` (a date,
time or timestamp, with or without time zone), ``any``. An argument
matches when Trino coerces it to the pattern (a date to a timestamp, an integer to a double, NULL to anything); an
argument whose type is not known matches everything (the check refuses only what it knows).

A result is a Trino type text, or a term of the arguments' types: ``$n`` (the type of argument n), ``elem(t)`` (an
array's element or a map's value), ``key(t)`` (a map's key), ``return(t)`` / ``parameter(t)`` (a lambda's body type /
its first parameter's: a lambda argument's type is ``function(P1, ..., R)``, :func:`athena_sql.calls.function_type`),
``array(t)``, ``map(t, t)``; ``sum($n)`` / ``avg($n)`` (Trino's aggregate result types: sum of an integer is bigint,
avg of an integer is double, of a decimal a decimal).

Bounded results are Trino's declarations: a parameter ``varchar(x)`` (or ``char(x)``) binds ``x`` to its argument's
length and the result is computed from it (:func:`result_type`), as io/trino/operator/scalar/StringFunctions.java
(trinodb/trino@00e6f8b957a4352553a70648bb3ff9daf5d12d5c: chr ``varchar(1)``; lower, upper, reverse ``varchar(x)``
(``char(x)`` of a char); trim, ltrim, rtrim, substr, split_part ``varchar(x)``; split ``array(varchar(x))``; replace
``varchar(x)`` and, with a replacement, ``varchar(u)``, ``u = min(2147483647, x + z * (x + 1))``; lpad, rpad, translate
unbounded; soundex ``varchar(4)``) and io/trino/operator/scalar/JoniRegexpFunctions.java
(trinodb/trino@03d8e5abc686c5c4a9f96ca14db07e2aed880174: regexp_extract ``varchar(x)``; regexp_extract_all,
regexp_split ``array(varchar(x))``; regexp_replace ``varchar(x)`` and, with a replacement ``varchar(y)``,
``varchar(z)``, ``z = min(2147483647, x + max(x * y / 2, y) * (x + 1))``) declare them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from athena_sql.types import BIGINT, DOUBLE, TrinoType, can_coerce, parse_type, split_types

__all__ = ["SIGNATURES", "expected", "matches", "result_type"]

#: ceiling/floor/round of a decimal(p, s): MathFunctions.java's ``@Constraint(variable = "rp", expression = "p - s +
#: min(s, 1)")`` ``decimal(rp,0)``; round(decimal(p, s), d) is decimal(min(38, p + 1), s), sign(decimal) decimal(1,0)
#: (trinodb/trino, core/trino-main/src/main/java/io/trino/operator/scalar/MathFunctions.java).
_DECIMAL_ROUNDED = "decimal(p - s + min(s, 1), 0)"
#: name -> overloads: (parameter patterns, result).
SIGNATURES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "date_trunc": ((("varchar", "temporal"), "$2"),),
    "date_add": ((("varchar", "bigint", "temporal"), "$3"),),
    "date_diff": ((("varchar", "temporal", "temporal"), "bigint"),),
    "date_format": ((("timestamp", "varchar"), "varchar"), (("timestamptz", "varchar"), "varchar")),
    "format_datetime": ((("timestamp", "varchar"), "varchar"), (("timestamptz", "varchar"), "varchar")),
    "date_parse": ((("varchar", "varchar"), "timestamp(3)"),),
    "from_iso8601_timestamp": ((("varchar",), "timestamp(3) with time zone"),),
    "from_iso8601_date": ((("varchar",), "date"),),
    "from_unixtime": (
        (("double",), "timestamp(3) with time zone"),
        (("double", "varchar"), "timestamp(3) with time zone"),
        (("double", "bigint", "bigint"), "timestamp(3) with time zone"),
    ),
    "to_unixtime": ((("timestamp",), "double"), (("timestamptz",), "double")),
    "to_iso8601": (  # ToIso8601.java (operator/scalar/timestamp and timestamptz): 1 + 6 + 15 + min(p, 1) + p [+ 6]
        (("date",), "varchar(16)"),
        (("timestamp(p)",), "varchar(1 + 6 + 15 + min(p, 1) + p)"),
        (("timestamptz(p)",), "varchar(1 + 6 + 15 + min(p, 1) + p + 6)"),
    ),
    "date": ((("varchar",), "date"), (("timestamp",), "date"), (("timestamptz",), "date")),
    "with_timezone": ((("timestamp", "varchar"), "zoned($1)"),),  # with_timezone(timestamp(p), zone): datetime.md
    "at_timezone": ((("timestamptz", "varchar"), "zoned($1)"), (("timestamptz", "interval"), "zoned($1)")),
    "chr": ((("bigint",), "varchar(1)"),),
    "lower": ((("char(x)",), "char(x)"), (("varchar(x)",), "varchar(x)")),
    "upper": ((("char(x)",), "char(x)"), (("varchar(x)",), "varchar(x)")),
    "reverse": (
        (("char(x)",), "char(x)"),
        (("varchar(x)",), "varchar(x)"),
        (("varbinary",), "varbinary"),
        (("array",), "$1"),
    ),
    "trim": ((("varchar(x)",), "varchar(x)"), (("varchar(x)", "varchar"), "varchar(x)")),
    "ltrim": ((("varchar(x)",), "varchar(x)"), (("varchar(x)", "varchar"), "varchar(x)")),
    "rtrim": ((("varchar(x)",), "varchar(x)"), (("varchar(x)", "varchar"), "varchar(x)")),
    # codepoint(@SqlType("varchar(1)")): StringFunctions.java; TestStringFunctions.testCodepoint at trinodb/trino@02e3bc9f
    "codepoint": ((("varchar(1)",), "integer"),),
    "length": ((("varchar",), "bigint"), (("varbinary",), "bigint")),
    "substr": (
        (("varchar(x)", "bigint"), "varchar(x)"),
        (("varchar(x)", "bigint", "bigint"), "varchar(x)"),
        (("varbinary", "bigint"), "varbinary"),
        (("varbinary", "bigint", "bigint"), "varbinary"),
    ),
    "substring": (
        (("varchar(x)", "bigint"), "varchar(x)"),
        (("varchar(x)", "bigint", "bigint"), "varchar(x)"),
    ),
    "overlay": (  # TestStringFunctions.testOverlay (trinodb/trino@02e3bc9f818eab65aa9cd02e5ca958eb03987902)
        (("varchar(x)", "varchar(y)", "bigint"), "varchar(x + y)"),
        (("varchar(x)", "varchar(y)", "bigint", "bigint"), "varchar(x + y)"),
    ),
    "strpos": ((("varchar", "varchar"), "bigint"), (("varchar", "varchar", "bigint"), "bigint")),
    "replace": (
        (("varchar(x)", "varchar(y)"), "varchar(x)"),
        (("varchar(x)", "varchar(y)", "varchar(z)"), "varchar(min(2147483647, x + z * (x + 1)))"),
    ),
    "split": (
        (("varchar(x)", "varchar(y)"), "array(varchar(x))"),
        (("varchar(x)", "varchar(y)", "bigint"), "array(varchar(x))"),
    ),
    "split_part": ((("varchar(x)", "varchar(y)", "bigint"), "varchar(x)"),),
    "translate": ((("varchar", "varchar", "varchar"), "varchar"),),
    "soundex": ((("varchar",), "varchar(4)"),),
    "starts_with": ((("varchar", "varchar"), "boolean"),),
    "lpad": ((("varchar", "bigint", "varchar"), "varchar"), (("varbinary", "bigint", "varbinary"), "varbinary")),
    "rpad": ((("varchar", "bigint", "varchar"), "varchar"), (("varbinary", "bigint", "varbinary"), "varbinary")),
    "regexp_like": ((("varchar", "varchar"), "boolean"),),
    "regexp_extract": (
        (("varchar(x)", "varchar"), "varchar(x)"),
        (("varchar(x)", "varchar", "bigint"), "varchar(x)"),
    ),
    "regexp_extract_all": (
        (("varchar(x)", "varchar"), "array(varchar(x))"),
        (("varchar(x)", "varchar", "bigint"), "array(varchar(x))"),
    ),
    "regexp_split": ((("varchar(x)", "varchar"), "array(varchar(x))"),),
    "regexp_replace": (
        (("varchar(x)", "varchar"), "varchar(x)"),
        (("varchar(x)", "varchar", "varchar(y)"), "varchar(min(2147483647, x + max(x * y / 2, y) * (x + 1)))"),
        (("varchar", "varchar", "any"), "varchar"),
    ),
    "abs": ((("double",), "$1"),),
    "round": (
        (("decimal(p,s)",), _DECIMAL_ROUNDED),
        (("decimal(p,s)", "bigint"), "decimal(min(38, p + 1), s)"),
        (("double",), "$1"),
        (("double", "bigint"), "$1"),
    ),
    "sign": ((("decimal(p,s)",), "decimal(1, 0)"), (("double",), "$1")),
    "floor": ((("decimal(p,s)",), _DECIMAL_ROUNDED), (("double",), "$1")),
    "ceil": ((("decimal(p,s)",), _DECIMAL_ROUNDED), (("double",), "$1")),
    "ceiling": ((("decimal(p,s)",), _DECIMAL_ROUNDED), (("double",), "$1")),
    "truncate": ((("double",), "$1"), (("double", "bigint"), "$1")),
    "sqrt": ((("double",), "double"),),
    "ln": ((("double",), "double"),),
    "log10": ((("double",), "double"),),
    "log2": ((("double",), "double"),),
    "exp": ((("double",), "double"),),
    "power": ((("double", "double"), "double"),),
    "pow": ((("double", "double"), "double"),),
    "count_if": ((("boolean",), "bigint"),),
    "sum": ((("double",), "sum($1)"), (("interval",), "$1")),
    "avg": ((("double",), "avg($1)"), (("interval",), "$1")),
    "min": ((("any",), "$1"), (("any", "bigint"), "array($1)")),
    "max": ((("any",), "$1"), (("any", "bigint"), "array($1)")),
    "arbitrary": ((("any",), "$1"),),
    "any_value": ((("any",), "$1"),),
    "max_by": ((("any", "any"), "$1"), (("any", "any", "bigint"), "array($1)")),
    "min_by": ((("any", "any"), "$1"), (("any", "any", "bigint"), "array($1)")),
    "approx_percentile": (
        (("double", "any"), "$1"),
        (("double", "any", "any"), "$1"),
        (("double", "any", "any", "any"), "$1"),
    ),
    "approx_distinct": ((("any",), "bigint"), (("any", "double"), "bigint")),
    "count": ((("any",), "bigint"), ((), "bigint")),
    "stddev": ((("double",), "double"),),
    "stddev_samp": ((("double",), "double"),),
    "stddev_pop": ((("double",), "double"),),
    "variance": ((("double",), "double"),),
    "array_agg": ((("any",), "array($1)"),),
    "cardinality": ((("array",), "bigint"), (("map",), "bigint"), (("any",), "bigint")),
    "contains": ((("array", "any"), "boolean"), (("any", "any"), "boolean")),
    "element_at": ((("array", "bigint"), "elem($1)"), (("map", "any"), "elem($1)")),
    # functions/array.md and map.md: array_sort(array(T)[, function(T,T,int)]), filter(array(T), function(T,boolean))
    # -> array(T); map_filter(map(K,V), function(K,V,boolean)) -> map(K,V); multimap_from_entries(array(row(K,V)))
    # -> map(K,array(V)) (trinodb/trino@01e94c03)
    "array_sort": ((("array",), "$1"), (("array", "function"), "$1")),
    "filter": ((("array", "function"), "$1"),),
    "map_filter": ((("map", "function"), "$1"),),
    # a lambda's result type is its body's, typed with its parameters bound (athena_sql.calls.lambda_parameter_types):
    # transform(array(T), function(T,U)) -> array(U), zip_with(array(T), array(U), function(T,U,R)) -> array(R)
    # (array.md); transform_keys(map(K1,V), function(K1,V,K2)) -> map(K2,V), transform_values(map(K,V1), function(K,V1,V2)) -> map(K,V2), map_zip_with(map(K,V1), map(K,V2),
    # function(K,V1,V2,V3)) -> map(K,V3) (map.md); reduce(array(T), S, function(S,T,S), function(S,R)) -> R
    # (trinodb/trino@710f987d; TestMapTransformKeysFunction at 029c93b6, TestZipWithFunction at 03d8e5ab)
    "transform": ((("array", "function"), "array(return($2))"),),
    "zip_with": ((("array", "array", "function"), "array(return($3))"),),
    "transform_keys": ((("map", "function"), "map(return($2), elem($1))"),),
    "transform_values": ((("map", "function"), "map(key($1), return($2))"),),
    "map_zip_with": ((("map", "map", "function"), "map(parameter($3), return($3))"),),
    "reduce": ((("array", "any", "function", "function"), "return($4)"),),
    "multimap_from_entries": ((("array",), "multimap($1)"),),
    "array_join": ((("array", "varchar"), "varchar"), (("array", "varchar", "varchar"), "varchar")),
    "map": ((("array", "array"), "map(elem($1), elem($2))"), ((), "map(unknown, unknown)")),
    "map_from_entries": ((("array",), "map(entries($1))"),),
    "json_parse": ((("varchar",), "json"),),
    "json_format": ((("json",), "varchar"),),
    "json_extract_scalar": ((("varchar", "varchar"), "varchar"), (("json", "varchar"), "varchar")),
    "json_extract": ((("varchar", "varchar"), "json"), (("json", "varchar"), "json")),
    "typeof": ((("any",), "varchar"),),
    "row_number": (((), "bigint"),),
    "rank": (((), "bigint"),),
    "dense_rank": (((), "bigint"),),
    "percent_rank": (((), "double"),),
    "cume_dist": (((), "double"),),
    "ntile": ((("bigint",), "bigint"),),
    "lag": ((("any",), "$1"), (("any", "bigint"), "$1"), (("any", "bigint", "any"), "$1")),
    "lead": ((("any",), "$1"), (("any", "bigint"), "$1"), (("any", "bigint", "any"), "$1")),
    "first_value": ((("any",), "$1"),),
    "last_value": ((("any",), "$1"),),
    "now": (((), "timestamp(3) with time zone"),),
    "current_timezone": (((), "varchar"),),
}
for _part in ("year", "month", "day", "day_of_month", "day_of_week", "dow", "day_of_year", "doy", "week", "quarter"):
    SIGNATURES[_part] = ((("temporal",), "bigint"), (("interval",), "bigint"))
for _part in ("hour", "minute", "second", "millisecond"):
    SIGNATURES[_part] = ((("temporal",), "bigint"), (("interval",), "bigint"))

_TARGETS = {
    "varchar": TrinoType("varchar"),
    "bigint": BIGINT,
    "double": DOUBLE,
    "boolean": TrinoType("boolean"),
    "date": TrinoType("date"),
    "timestamp": TrinoType("timestamp", (12,)),
    "timestamptz": TrinoType("timestamp with time zone", (12,)),
    "time": TrinoType("time", (12,)),
    "json": TrinoType("json"),
    "varbinary": TrinoType("varbinary"),
}
_SHOWN = {
    "varchar": "varchar(x)",
    "timestamp": "timestamp(p)",
    "timestamptz": "timestamp(p) with time zone",
    "timestamptz(p)": "timestamp(p) with time zone",
    "time": "time(p)",
    "array": "array(E)",
    "map": "map(K,V)",
    "any": "T",
    "interval": "interval day to second",
}
_TEMPORAL_FORMS = ("date", "time(p)", "timestamp(p)", "timestamp(p) with time zone", "time(p) with time zone")


def _matches_one(pattern: str, argument: TrinoType | None) -> bool:
    if argument is None or argument.is_unknown or pattern == "any":
        return True
    if pattern in ("char(x)", "decimal(p,s)"):
        return argument.name == pattern.split("(")[0]
    pattern = pattern.removesuffix("(x)").removesuffix("(y)").removesuffix("(z)").removesuffix("(p)")
    if pattern in ("array", "map", "function"):
        return argument.name == pattern
    if pattern == "interval":
        return argument.is_interval
    if pattern == "temporal":
        return argument.is_temporal
    if pattern == "varchar":
        return argument.is_string
    target = _TARGETS.get(pattern) or parse_type(pattern)  # a concrete type: ``varchar(1)`` (codepoint)
    return target is None or can_coerce(argument, target)


def matches(name: str, arguments: Sequence[TrinoType | None]) -> tuple[tuple[str, ...], str] | None | bool:
    """The first overload of ``name`` that ``arguments`` match; ``True`` when ``name`` has no typed signatures
    here (nothing to judge); ``None`` when none matches (Trino: FUNCTION_NOT_FOUND, "Unexpected parameters")."""
    overloads = SIGNATURES.get(name)
    if overloads is None:
        return True
    counted = [o for o in overloads if len(o[0]) == len(arguments)]
    if not counted:
        return True  # the arity is the catalog's to judge
    for overload in counted:
        if all(_matches_one(p, a) for p, a in zip(overload[0], arguments, strict=True)):
            return overload
    return None


def expected(name: str) -> str:
    """``date_trunc(varchar(x), date), date_trunc(varchar(x), time(p)), ...`` (Trino's "Expected:" list; a
    ``temporal`` parameter is written out as each of Trino's date and time types)."""
    forms: list[str] = []
    if any("function" in params for params, _ in SIGNATURES.get(name, ())):
        return ""  # the function list's forms say what each lambda takes (``function(T,U)``)
    for params, _ in SIGNATURES.get(name, ()):
        variants = _TEMPORAL_FORMS if "temporal" in params else ("",)
        for variant in variants:
            shown = [variant if p == "temporal" else _SHOWN.get(p, p) for p in params]
            forms.append(f"{name}(" + ", ".join(shown) + ")")
    return ", ".join(forms)


def result_type(result: str, arguments: Sequence[TrinoType | None], parameters: Sequence[str] = ()) -> TrinoType | None:
    """The type ``result`` (an overload's result spec) gives for ``arguments`` matched to the overload's
    ``parameters``; ``None`` when it depends on an argument whose type is not known.

    A bounded result (``varchar(x)``, ``array(varchar(x))``, ``varchar(min(2147483647, x + z * (x + 1)))``) is
    computed as Trino's literal parameters are (``@LiteralParameters``/``@Constraint`` of the function's declaration,
    :data:`SIGNATURES`' sources): ``x``, ``y``, ``z`` are the lengths of the arguments whose parameter binds them
    (``varchar(x)``; an unbounded varchar is 2147483647 long), ``/`` divides integers, and a length of 2147483647 or
    more is the unbounded ``varchar``."""
    if _BOUNDED.match(result):
        return _bounded(result, arguments, parameters)

    def argument(text: str) -> TrinoType | None:
        index = int(text.strip("$()")) - 1
        return arguments[index] if 0 <= index < len(arguments) else None

    if result.startswith("$"):
        return argument(result)
    if result.startswith("zoned("):  # the argument as coerced to timestamp(p) with time zone
        value = argument(result[len("zoned") :])
        if value is None or not value.name.startswith("timestamp"):
            return value
        return TrinoType("timestamp with time zone", value.parameters or (3,))
    if result.startswith("map(entries("):  # map_from_entries(array(row(K, V)))
        entries = argument(result[len("map(entries") : -1])
        entry = entries.children[0] if entries is not None and entries.name == "array" and entries.children else None
        if entry is None or entry.name != "row" or len(entry.children) != 2:
            return None
        return TrinoType("map", (), entry.children)
    if result.startswith("multimap(") and "$" in result:  # multimap_from_entries(array(row(K, V))): map(K, array(V))
        entries = argument(result[len("multimap") :])
        pair = entries.children[0] if entries is not None and entries.name == "array" and entries.children else None
        if pair is None or pair.name != "row" or len(pair.children) != 2:
            return None
        return TrinoType("map", (), (pair.children[0], TrinoType("array", (), (pair.children[1],))))
    for wrapper in ("sum(", "avg("):
        if result.startswith(wrapper) and "$" in result:
            inner = argument(result[len(wrapper) - 1 :])
            if inner is None:
                return None
            if wrapper == "sum(":
                return (
                    BIGINT
                    if inner.is_integer
                    else TrinoType("decimal", (38, inner.parameters[1]))
                    if (inner.name == "decimal" and len(inner.parameters) == 2)
                    else inner
                )
            return inner if inner.name == "decimal" else DOUBLE
    if "$" in result:
        return _term(result, arguments)
    return parse_type(result)


#: Trino's unbounded varchar is varchar(2147483647) (io/trino/spi/type/VarcharType.java, MAX_LENGTH).
UNBOUNDED_LENGTH = 2147483647
_BOUNDED = re.compile(r"^(?P<array>array\()?(?P<name>varchar|char|decimal)\((?P<length>.+)\)(?(array)\))$")


#: A term's operators: the part of the operand's type each one takes (``None``: the operand has no such part).
_PARTS = {
    "elem": lambda t: t.children[-1] if t.name in ("array", "map") and t.children else None,
    "key": lambda t: t.children[0] if t.name == "map" and t.children else None,
    "return": lambda t: t.children[-1] if t.name == "function" else None,
    "parameter": lambda t: t.children[0] if t.name == "function" and len(t.children) > 1 else None,
}


def _term(text: str, arguments: Sequence[TrinoType | None]) -> TrinoType | None:
    """The type a result term (module docstring: ``map(return($2), elem($1))``) gives for ``arguments``; ``None``
    when a part of it is not known."""
    text = text.strip()
    if text.startswith("$"):
        index = int(text[1:]) - 1
        return arguments[index] if 0 <= index < len(arguments) else None
    operator, bracket, rest = text.partition("(")
    if not bracket or not rest.endswith(")"):
        return parse_type(text)
    operands = [_term(part, arguments) for part in split_types(rest[:-1])]
    if any(operand is None for operand in operands):
        return None
    known = [operand for operand in operands if operand is not None]
    if operator in _PARTS and len(known) == 1:
        return _PARTS[operator](known[0])
    if (operator, len(known)) in (("array", 1), ("map", 2)):
        return TrinoType(operator, (), tuple(known))
    return parse_type(text)


def _bounded(result: str, arguments: Sequence[TrinoType | None], parameters: Sequence[str]) -> TrinoType | None:
    """``varchar(<length expression>)``, ``char(...)`` or ``array(varchar(...))`` for ``arguments``."""
    match = _BOUNDED.match(result)
    if match is None:
        return None
    lengths: dict[str, int] = {}
    for pattern, argument in zip(parameters, arguments, strict=False):
        if pattern == "decimal(p,s)":
            if argument is None or argument.name != "decimal" or len(argument.parameters) != 2:
                return None
            lengths["p"], lengths["s"] = argument.parameters
        if pattern in ("timestamp(p)", "timestamptz(p)"):  # a timestamp's precision (3 when not written)
            if argument is None or not argument.name.startswith("timestamp"):
                return None
            lengths["p"] = argument.parameters[0] if argument.parameters else 3
        variable = re.fullmatch(r"(?:varchar|char)\(([xyz])\)", pattern)
        if variable is None:
            continue
        if argument is None or not argument.is_string:
            return None
        lengths[variable.group(1)] = argument.parameters[0] if argument.parameters else UNBOUNDED_LENGTH
    try:
        tree = ast.parse(match.group("length"), mode="eval").body
        values = [_evaluate(e, lengths) for e in (tree.elts if isinstance(tree, ast.Tuple) else [tree])]
    except (KeyError, SyntaxError, ValueError):
        return None
    if match.group("name") == "decimal":
        return TrinoType("decimal", tuple(values)) if len(values) == 2 else None
    length = values[0]
    kind = TrinoType(match.group("name"), (length,) if length < UNBOUNDED_LENGTH else ())
    return TrinoType("array", (), (kind,)) if match.group("array") else kind


def _evaluate(node: ast.expr, lengths: dict[str, int]) -> int:
    """An integer expression of Trino's type constraints: ``+ - * /`` (integer division), ``min``, ``max``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return lengths[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, lengths), _evaluate(node.right, lengths)
        operations = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        if isinstance(node.op, ast.Div):
            return left // right
        if type(node.op) in operations:
            return operations[type(node.op)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        values = [_evaluate(argument, lengths) for argument in node.args]
        return min(values) if node.func.id == "min" else max(values)
    raise ValueError(f"not a type constraint: {ast.dump(node)}")
