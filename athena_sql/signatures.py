"""Typed signatures of the functions whose argument types the check judges, and their result types.

The function list (:mod:`athena_sql.functions`) writes arguments as Trino's docs name them (``date_trunc(unit, x)``),
which says how many but not of which type; for the functions below the types come from Trino's docs pages
(docs/src/main/sphinx/functions/datetime.md, string.md, math.md, aggregate.md, array.md, map.md, json.md,
regexp.md at the commits recorded in functions.toml's ``[source.pages]``) and the implementations they document
(io/trino/operator/scalar/DateTimeFunctions.java, StringFunctions.java, MathFunctions.java); where they are not
certain, the pattern is ``any`` (never refused).

A parameter is a *pattern*: ``varchar`` any varchar or char (Trino's ``varchar(x)``), ``timestamp`` any precision
(``timestamp(p)``), ``timestamptz`` (``timestamp(p) with time zone``), ``time``, ``date``, ``bigint`` any exact integer,
``double`` any number, ``boolean``, ``array``, ``map``, ``json``, ``varbinary``, ``interval``, ``temporal`` (a date,
time or timestamp, with or without time zone), ``any``. An argument
matches when Trino coerces it to the pattern (a date to a timestamp, an integer to a double, NULL to anything); an
argument whose type is not known matches everything (the check refuses only what it knows).

A result is a Trino type text, ``$n`` (the type of argument n), ``array($n)``, ``elem($n)`` (an array's element or a
map's value), ``sum($n)`` / ``avg($n)`` (Trino's aggregate result types: sum of an integer is bigint, avg of an integer
is double, of a decimal a decimal).
"""

from __future__ import annotations

from collections.abc import Sequence

from athena_sql.types import BIGINT, DOUBLE, TrinoType, can_coerce, parse_type

__all__ = ["SIGNATURES", "expected", "matches", "result_type"]

_DATE_PARTS = ("date", "timestamp", "timestamptz")
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
    "to_iso8601": tuple((((t,), "varchar")) for t in _DATE_PARTS),
    "date": ((("varchar",), "date"), (("timestamp",), "date"), (("timestamptz",), "date")),
    "with_timezone": ((("timestamp", "varchar"), "timestamp(3) with time zone"),),
    "at_timezone": ((("timestamptz", "varchar"), "$1"), (("timestamptz", "interval"), "$1")),
    "lower": ((("varchar",), "varchar"),),
    # codepoint(@SqlType("varchar(1)")): StringFunctions.java; TestStringFunctions.testCodepoint at trinodb/trino@02e3bc9f
    "codepoint": ((("varchar(1)",), "integer"),),
    "upper": ((("varchar",), "varchar"),),
    "trim": ((("varchar",), "varchar"),),
    "ltrim": ((("varchar",), "varchar"),),
    "rtrim": ((("varchar",), "varchar"),),
    "length": ((("varchar",), "bigint"), (("varbinary",), "bigint")),
    "substr": (
        (("varchar", "bigint"), "varchar"),
        (("varchar", "bigint", "bigint"), "varchar"),
        (("varbinary", "bigint"), "varbinary"),
        (("varbinary", "bigint", "bigint"), "varbinary"),
    ),
    "strpos": ((("varchar", "varchar"), "bigint"), (("varchar", "varchar", "bigint"), "bigint")),
    "replace": ((("varchar", "varchar"), "varchar"), (("varchar", "varchar", "varchar"), "varchar")),
    "split": ((("varchar", "varchar"), "array(varchar)"), (("varchar", "varchar", "bigint"), "array(varchar)")),
    "split_part": ((("varchar", "varchar", "bigint"), "varchar"),),
    "starts_with": ((("varchar", "varchar"), "boolean"),),
    "lpad": ((("varchar", "bigint", "varchar"), "varchar"), (("varbinary", "bigint", "varbinary"), "varbinary")),
    "rpad": ((("varchar", "bigint", "varchar"), "varchar"), (("varbinary", "bigint", "varbinary"), "varbinary")),
    "regexp_like": ((("varchar", "varchar"), "boolean"),),
    "regexp_extract": ((("varchar", "varchar"), "varchar"), (("varchar", "varchar", "bigint"), "varchar")),
    "regexp_replace": (
        (("varchar", "varchar"), "varchar"),
        (("varchar", "varchar", "varchar"), "varchar"),
        (("varchar", "varchar", "any"), "varchar"),
    ),
    "abs": ((("double",), "$1"),),
    "round": ((("double",), "$1"), (("double", "bigint"), "$1")),
    "floor": ((("double",), "$1"),),
    "ceil": ((("double",), "$1"),),
    "ceiling": ((("double",), "$1"),),
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
    "array_join": ((("array", "varchar"), "varchar"), (("array", "varchar", "varchar"), "varchar")),
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
    if pattern in ("array", "map"):
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
    for params, _ in SIGNATURES.get(name, ()):
        variants = _TEMPORAL_FORMS if "temporal" in params else ("",)
        for variant in variants:
            shown = [variant if p == "temporal" else _SHOWN.get(p, p) for p in params]
            forms.append(f"{name}(" + ", ".join(shown) + ")")
    return ", ".join(forms)


def result_type(result: str, arguments: Sequence[TrinoType | None]) -> TrinoType | None:
    """The type ``result`` (an overload's result spec) gives for ``arguments``; ``None`` when it depends on an
    argument whose type is not known."""

    def argument(text: str) -> TrinoType | None:
        index = int(text.strip("$()")) - 1
        return arguments[index] if 0 <= index < len(arguments) else None

    if result.startswith("$"):
        return argument(result)
    for wrapper in ("array(", "elem(", "sum(", "avg("):
        if result.startswith(wrapper) and "$" in result:
            inner = argument(result[len(wrapper) - 1 :])
            if inner is None:
                return None
            if wrapper == "array(":
                return TrinoType("array", (), (inner,))
            if wrapper == "elem(":
                return inner.children[-1] if inner.children else None
            if wrapper == "sum(":
                return (
                    BIGINT
                    if inner.is_integer
                    else TrinoType("decimal", (38, inner.parameters[1]))
                    if (inner.name == "decimal" and len(inner.parameters) == 2)
                    else inner
                )
            return inner if inner.name == "decimal" else DOUBLE
    return parse_type(result)
