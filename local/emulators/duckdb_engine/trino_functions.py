"""Trino's functions on DuckDB: which calls run locally, and the rewrites that make them answer as Trino.

Sources: Trino's docs (``docs/src/main/sphinx/functions/*.md``) and its function tests
(``core/trino-main/src/test/java/io/trino/operator/scalar/``), trinodb/trino at
6f7aadf5a9115ec244aac372e07df5a481a4907f; which functions Athena has: :mod:`athena_sql.functions`.

- :func:`check_calls` (before any rewrite): a function Athena engine v3 does not have is FUNCTION_NOT_FOUND (Trino's
  "Function 'x' not registered"); one it has that the local engine cannot reproduce is NOT_SUPPORTED, one line:
  ``runs on Athena only: map_agg; the check validated it``.
- :func:`rewrite_call`: first :mod:`.trino_strings` (string, regexp, conversion calls, char(n); Python functions
  where DuckDB has no faithful one), then ``substr`` (a start of 0 gives ''), ``regexp_replace`` (Java's ``$1`` group references),
  ``regexp_extract`` (NULL when nothing matches), ``format_datetime`` (Joda patterns), ``date_format`` (MySQL
  specifiers), ``date_add`` (a date stays a date), ``date_diff`` (whole units elapsed); array and map calls
  (:mod:`.trino_collections`) and json (:mod:`.trino_json`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from sqlglot import exp

from athena_sql import functions as athena_functions

from . import trino_collections as collections
from . import trino_json, trino_strings
from . import trino_time as tt
from . import trino_time_functions as time_functions
from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import UNKNOWN_ZONE, TrinoType

__all__ = ["check_calls", "joda_to_strftime", "rewrite_call"]

#: Calls sqlglot does not know (``exp.Anonymous``) that the rewrites make faithful.
_REWRITTEN: Final = frozenset({"with_timezone", "format_datetime", "at_timezone"})
#: Known calls whose DuckDB translation differs from Trino and that are not rewritten here.
_UNFAITHFUL: Final = {
    exp.GenerateSeries: "sequence",  # also DuckDB's generate_series, which Athena lacks: one node for both
    exp.Cbrt: "cbrt",  # DuckDB: cbrt(27) = 3.0000000000000004, Java's Math.cbrt: 3.0
}
#: Trino syntax parsed as a function node that is not a function of Athena's catalog.
_SYNTAX: Final = frozenset(
    {"cast", "try_cast", "case", "if", "coalesce", "nullif", "try", "extract", "array", "map", "row", "struct",
     "current_date", "current_timestamp", "current_time", "localtimestamp", "localtime", "date", "timestamp",
     "at_timezone", "unnest", "exists", "interval", "position"}
)  # fmt: skip
#: EXTRACT's fields (Trino: DAY_OF_WEEK and DOW are ISO, 1 = Monday) -> DuckDB's date_part.
_EXTRACT_FIELDS: Final = {
    "YEAR": "year", "QUARTER": "quarter", "MONTH": "month", "WEEK": "week", "DAY": "day", "DAY_OF_MONTH": "day",
    "DAY_OF_WEEK": "isodow", "DOW": "isodow", "DAYOFWEEK": "isodow", "DAY_OF_YEAR": "doy", "DOY": "doy",
    "DAYOFYEAR": "doy", "YEAR_OF_WEEK": "isoyear", "YOW": "isoyear", "HOUR": "hour", "MINUTE": "minute",
    "SECOND": "second",
}  # fmt: skip
_CALL_HEAD: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")
_DATE_UNITS: Final = {"day": "1 DAY", "week": "7 DAY", "month": "1 MONTH", "quarter": "3 MONTH", "year": "1 YEAR"}
_TIME_UNITS: Final = {"millisecond": "1 MILLISECOND", "second": "1 SECOND", "minute": "1 MINUTE", "hour": "1 HOUR"}
#: strftime directives a date_format pattern may turn into (sqlglot converts MySQL's specifiers to these; %D and %v
#: do not survive the conversion faithfully, so they are refused).
_STRFTIME_OK: Final = frozenset(
    ["Y", "m", "d", "H", "M", "S", "a", "b", "f", "I", "j", "p", "A", "G", "y", "%", "B"] + ["-m", "-d", "-H", "-I"]
)
#: Joda pattern letters (format_datetime) -> strftime, by run length (functions/datetime.md, "Java date functions").
_JODA: Final = {
    ("y", 4): "%Y", ("y", 2): "%y", ("M", 1): "%-m", ("M", 2): "%m", ("M", 3): "%b", ("M", 4): "%B",
    ("d", 1): "%-d", ("d", 2): "%d", ("H", 1): "%-H", ("H", 2): "%H", ("h", 1): "%-I", ("h", 2): "%I",
    ("m", 1): "%-M", ("m", 2): "%M", ("s", 1): "%-S", ("s", 2): "%S", ("S", 3): "%g", ("a", 1): "%p",
    ("E", 3): "%a", ("E", 4): "%A", ("D", 3): "%j",
}  # fmt: skip


def check_calls(tree: exp.Expr) -> None:
    """Refuse, before anything runs, a call Athena does not have or the local engine cannot reproduce.

    :raises Refused: FUNCTION_NOT_FOUND or NOT_SUPPORTED (see the module docstring)."""

    complete = not str(athena_functions.source().get("trino_release", "")).startswith("unpinned")
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and not isinstance(node.parent, exp.Table):
            name = node.name.lower()
            if name in _REWRITTEN or any(
                name in family
                for family in (
                    trino_strings.REWRITTEN,
                    time_functions.REWRITTEN,
                    collections.HANDLED_CALLS,
                    trino_json.HANDLED_CALLS,
                )
            ):
                continue
            if name in ("all", "any", "some") and isinstance(node.expressions[0], (exp.Query, exp.Values)):
                continue  # x > ALL (subquery): sqlglot's call node for a quantified comparison
            if athena_functions.lookup(name) is not None:
                raise athena_only(name)
            raise Refused("FUNCTION_NOT_FOUND", f"Function '{name}' not registered")
        if type(node) in _UNFAITHFUL:
            raise athena_only(_UNFAITHFUL[type(node)])
        if complete and isinstance(node, exp.Func) and not isinstance(node, (exp.Anonymous, exp.Binary)):
            head = _CALL_HEAD.match(node.sql(dialect="trino"))  # Trino's spelling of the call; None: an operator
            if head is None or isinstance(node.parent, exp.Table):
                continue  # table functions: DuckDB decides (and reads nothing outside data_dir)
            names = [head.group(1).lower()] + [name.lower() for name in type(node).sql_names()]
            if not any(n in _SYNTAX or athena_functions.lookup(n) is not None for n in names):
                raise Refused("FUNCTION_NOT_FOUND", f"Function '{names[0]}' not registered")


def rewrite_call(node: exp.Expr, rewriter: Any) -> tuple[TrinoType, exp.Expr | None] | None:
    """The Trino type of a call and its DuckDB replacement (None: keep), or None when `node` is not handled here.

    `rewriter` gives ``type_of(node)``, ``sqlglot_type(node)`` (sqlglot's annotation) and ``wall_time(node) -> node``
    (a zoned timestamp as its zone's wall time).
    :raises Refused: an argument the local engine cannot reproduce (a non-literal pattern, an unknown letter)."""

    type_of: Callable[[exp.Expr | None], TrinoType] = rewriter.type_of
    varchar = TrinoType("varchar")
    handled = trino_strings.rewrite(node, rewriter)  # strings, regexp, conversion (Python functions where needed)
    if handled is not None:
        return handled
    if isinstance(node, exp.Substring):  # TestStringFunctions.testSubstring: substr('Quadratically', 0) = ''
        args = {"_a": node.this, "_s": node.args["start"]}
        length = node.args.get("length")
        call = "substring(_a, _s, _l)" if length is not None else "substring(_a, _s)"
        if length is not None:
            args["_l"] = length
        return varchar, duck(f"CASE WHEN _s = 0 OR _s < -length(_a) THEN '' ELSE {call} END", **args)
    if isinstance(node, exp.RegexpReplace):
        replacement = node.args.get("replacement")
        text = "" if replacement is None else literal_text(replacement)
        if text is None:
            raise athena_only("regexp_replace with a replacement that is not a literal")
        converted = exp.Literal.string(_java_replacement(text))
        call = duck("regexp_replace(_a, _p, _r, 'g')", _a=node.this, _p=node.expression, _r=converted)
        return varchar, call
    if isinstance(node, exp.RegexpExtract):  # functions/regexp.md: NULL when the pattern does not match
        group = node.args.get("group") or exp.Literal.number(0)
        pattern = literal_text(node.expression)
        if not (isinstance(group, exp.Literal) and group.this == "0") and (
            pattern is None or "|" in pattern or re.search(r"\)(?:[?*]|\{0)", pattern)
        ):  # Trino: NULL for a group that took no part in the match; DuckDB: '' (indistinguishable from empty)
            raise athena_only("regexp_extract of a group that may take no part in the match")
        template = "CASE WHEN regexp_matches(_a, _p) THEN regexp_extract(_a, _p, _g) END"
        return varchar, duck(template, _a=node.this, _p=node.expression, _g=group)
    if isinstance(node, exp.Split) and node.args.get("limit") is not None:
        raise athena_only("split with a limit")
    if isinstance(node, exp.StrPosition) and node.args.get("occurrence") is not None:
        raise athena_only("strpos with an instance")
    if isinstance(node, exp.Anonymous) and node.name.lower() == "format_datetime":
        value, pattern = (node.expressions + [None, None])[:2]
        text = literal_text(pattern)
        if text is None:
            raise athena_only("format_datetime with a pattern that is not a literal")
        converted = exp.Literal.string(joda_to_strftime(text))
        return varchar, duck("strftime(_a, _f)", _a=rewriter.wall_time(value), _f=converted)
    if isinstance(node, exp.TimeToStr):  # date_format: the zone was applied by the caller
        text = literal_text(node.args.get("format"))
        directives = re.findall(r"%(-?.)", text or "")
        if text is None or any(d not in _STRFTIME_OK for d in directives):
            raise athena_only("date_format with this pattern (a specifier the local engine does not reproduce)")
        return varchar, None
    if isinstance(node, exp.DateAdd):
        return _date_add(node, type_of, duck, Refused)
    if isinstance(node, exp.DateDiff):
        unit = (node.text("unit") or "day").lower()
        start, end = rewriter.wall_time(node.expression), rewriter.wall_time(node.this)
        return TrinoType("bigint"), duck(f"date_sub('{unit}', _a, _b)", _a=start, _b=end)
    if (
        isinstance(node, exp.Round)
        and type_of(node.this).as_decimal() is not None
        and type_of(node.this).name == "decimal"
    ):
        return _round_decimal(node, type_of(node.this), duck)
    collection = collections.collection_call(node, type_of) or trino_json.json_call(node, type_of)
    collection = collection or _collection_call(node, type_of)
    if collection is not None:
        kind, call = collection
        return (kind if kind is not None else rewriter.sqlglot_type(node)), call
    if isinstance(node, exp.Sign):  # math.md: sign(x) -> [same as input] (DuckDB: tinyint)
        kind = type_of(node.this)
        target = {"integer": "INTEGER", "bigint": "BIGINT", "smallint": "SMALLINT", "tinyint": "TINYINT"}.get(kind.name)
        target = target or ("DOUBLE" if kind.name == "double" else "DECIMAL(1, 0)" if kind.name == "decimal" else None)
        if target is None:
            return None
        shown = TrinoType("decimal", precision=1, scale=0) if kind.name == "decimal" else kind
        return shown, duck(f"CAST(sign(_a) AS {target})", _a=node.this)
    if (
        isinstance(node, (exp.Ceil, exp.Floor))
        and type_of(node.this).name == "decimal"
        and not node.args.get("decimals")
    ):
        precision, scale = type_of(node.this).as_decimal() or (38, 0)  # TestMathFunctions.testCeil/testFloor
        kind = TrinoType("decimal", precision=max(1, precision - scale + min(scale, 1)), scale=0)
        return kind, duck(f"CAST(_a AS DECIMAL({kind.precision}, 0))", _a=node.copy())
    if isinstance(node, exp.Replace) and literal_text(node.expression) == "":  # TestStringFunctions.testReplace
        replacement = node.args.get("replacement")
        text = "" if replacement is None else literal_text(replacement)
        if text is None:
            raise athena_only("replace of '' with a replacement that is not a literal")
        escaped = exp.Literal.string(text.replace("\\", "\\\\"))
        return varchar, duck("regexp_replace(_a, '', _r, 'g')", _a=node.this, _r=escaped)
    if isinstance(node, exp.Extract):  # Trino's fields (functions/datetime.md, "Extraction function")
        field = _EXTRACT_FIELDS.get(node.text("this").upper())
        if field is None:
            raise athena_only(f"EXTRACT of {node.text('this')}")
        call = duck(f"CAST(date_part('{field}', _a) AS BIGINT)", _a=rewriter.wall_time(node.expression))
        return TrinoType("bigint"), call
    if isinstance(node, exp.Typeof):  # Trino's name of the argument's type, where the engine knows it exactly
        shown = _type_name(type_of(node.this))
        if shown is None:
            raise athena_only("typeof of an expression whose exact type the local engine does not derive")
        if node.this.find(exp.AggFunc) is not None:  # keep the aggregate: the query stays aggregated
            return varchar, duck(f"CASE WHEN _a IS NULL THEN '{shown}' ELSE '{shown}' END", _a=node.this)
        return varchar, exp.Literal.string(shown)
    if isinstance(node, exp.ParseDatetime):  # a timestamp(3) with time zone in the session zone (UTC)
        text = literal_text(node.args.get("format"))
        if text is None:
            raise athena_only("parse_datetime with a pattern that is not a literal")
        call = duck(
            "CAST(strptime(_a, _f) AS TIMESTAMPTZ)", _a=node.this, _f=exp.Literal.string(joda_to_strftime(text))
        )
        return TrinoType("timestamptz", precision=3, zone="UTC"), call
    if isinstance(node, exp.StrToTime):  # date_parse: sqlglot converted the MySQL specifiers
        text = literal_text(node.args.get("format"))
        if text is None or any(d not in _STRFTIME_OK for d in re.findall(r"%(-?.)", text)):
            raise athena_only("date_parse with this pattern (a specifier the local engine does not reproduce)")
        return TrinoType("timestamp", precision=3), None
    return None


def _collection_call(node: exp.Expr, type_of: Callable[..., TrinoType]) -> tuple[TrinoType | None, Any] | None:
    """Array and map calls whose DuckDB translation answers differently (functions/array.md, map.md at
    6f7aadf5a9115ec244aac372e07df5a481a4907f): array_position's 0, contains' NULL, split_part past
    the end, cardinality of a map; subscripts: :func:`.trino_collections.subscript`."""
    if isinstance(node, exp.ArrayPosition):
        template = (
            "CASE WHEN _a IS NULL OR _x IS NULL THEN NULL ELSE CAST(coalesce(list_position(_a, _x), 0) AS BIGINT) END"
        )
        return TrinoType("bigint"), duck(template, _a=node.this, _x=node.expression)
    if isinstance(node, exp.ArrayContains):  # NULL when not found and the array holds a NULL
        template = (
            "CASE WHEN _a IS NULL OR _x IS NULL THEN NULL WHEN list_contains(_a, _x) THEN true"
            " WHEN list_position(_a, NULL) IS NOT NULL THEN NULL ELSE false END"
        )
        return TrinoType("boolean"), duck(template, _a=node.this, _x=node.expression)
    if isinstance(node, exp.SplitPart):
        index = node.args.get("part_index")
        if isinstance(index, exp.Literal) and index.is_int and int(index.this) < 1:
            raise Refused("INVALID_FUNCTION_ARGUMENT", "Index must be greater than zero")
        template = "CASE WHEN _i <= len(string_split(_a, _d)) THEN split_part(_a, _d, _i) END"
        return TrinoType("varchar"), duck(template, _a=node.this, _d=node.args["delimiter"], _i=index)
    if isinstance(node, exp.ArraySize) and type_of(node.this).name == "map":
        return TrinoType("bigint"), duck("CAST(cardinality(_a) AS BIGINT)", _a=node.this)
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        return collections.subscript(node, type_of(node.this))
    return None


def _type_name(kind: TrinoType) -> str | None:
    """A type as typeof() names it, when the engine knows it exactly (None otherwise)."""
    if kind.name in ("integer", "bigint", "smallint", "tinyint", "double", "real", "boolean", "date"):
        return kind.name
    if kind.name == "decimal" and kind.precision is not None:
        return f"decimal({kind.precision},{kind.scale})"
    if kind.name == "varchar":
        return "varchar" if kind.precision is None else f"varchar({kind.precision})"
    if kind.name in ("timestamp", "timestamptz") and kind.precision is not None:
        return f"timestamp({kind.precision})" + (" with time zone" if kind.name == "timestamptz" else "")
    return None


def _round_decimal(node: exp.Round, source: TrinoType, duck: Any) -> tuple[TrinoType, Any]:
    """round(decimal(p,s)) is decimal(p-s+min(s,1), 0); round(decimal(p,s), n) is decimal(p+1, s), the scale kept
    (TestMathFunctions.testRound, trinodb/trino at 029c93b693c7a3dbff995062fb9997f4acd86d77: round(DECIMAL '3.449', 1)
    = 3.400 of decimal(5,3)); half away from zero, as DuckDB rounds decimals."""
    precision, scale = source.as_decimal() or (38, 0)
    digits = node.args.get("decimals")
    if digits is None:
        kind = TrinoType("decimal", precision=max(1, precision - scale + min(scale, 1)), scale=0)
        call = duck(f"CAST(round(_a) AS DECIMAL({kind.precision}, 0))", _a=node.this)
    else:
        kind = TrinoType("decimal", precision=min(38, precision + 1), scale=scale)
        call = duck(f"CAST(round(_a, _d) AS DECIMAL({kind.precision}, {scale}))", _a=node.this, _d=digits)
    return kind, call


def _date_add(node: exp.DateAdd, type_of: Callable[..., TrinoType], duck: Any, refused: Any) -> tuple[TrinoType, Any]:
    """date_add(unit, n, x): a date stays a date (date units only); a zoned timestamp moves in its own wall time."""
    unit = (node.text("unit") or "day").lower()
    source = type_of(node.this)
    step = _DATE_UNITS.get(unit) or _TIME_UNITS.get(unit)
    if step is None:
        raise refused("INVALID_FUNCTION_ARGUMENT", f"'{unit}' is not a valid TIMESTAMP field")
    if source.name in ("timestamp", "timestamptz") and (source.precision or 3) > 6:  # TIMESTAMP_NS, exact
        return source, tt.add_nanos(unit, node.expression, node.this, source)
    if source.name == "date":
        if unit not in _DATE_UNITS:
            raise refused("INVALID_FUNCTION_ARGUMENT", f"'{unit}' is not a valid DATE field")
        return source, duck(f"CAST(_a + _n * INTERVAL {step} AS DATE)", _a=node.this, _n=node.expression)
    if source.name == "timestamptz" and source.zone not in (None, "UTC"):
        if source.zone == UNKNOWN_ZONE:
            raise refused("NOT_SUPPORTED", "runs on Athena only: date_add of a timestamp with an unknown time zone")
        moved = duck(
            f"_a + _n * INTERVAL {step}", _a=tt.to_wall(source.zone, node.this, source.precision), _n=node.expression
        )
        return source, tt.from_wall(source.zone, moved, source.precision)
    return source, duck(f"_a + _n * INTERVAL {step}", _a=node.this, _n=node.expression)


def _java_replacement(text: str) -> str:
    """A Java regex replacement (``$1``, ``\\$``) as RE2's (``\\1``, ``$``), as TestRegexpFunctions has them (trinodb/trino
    at 105c122c0043c01a3c97ae34883d795a61c0bf34); ``${name}`` and ``$12`` (Java reads as many digits as there are
    groups) are refused, a trailing ``\\`` or a ``$`` without a group is INVALID_FUNCTION_ARGUMENT."""

    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 == len(text):
                raise Refused("INVALID_FUNCTION_ARGUMENT", "character to be escaped is missing")
            literal = text[index + 1]
            out.append("\\\\" if literal == "\\" else literal)
            index += 2
        elif char == "$" and text[index + 1 : index + 2].isdigit():
            if text[index + 2 : index + 3].isdigit():
                raise athena_only("regexp_replace with a group reference followed by a digit ($12)")
            out.append("\\" + text[index + 1])
            index += 2
        elif char == "$" and text[index + 1 : index + 2] == "{":
            raise athena_only("regexp_replace with a named group reference in the replacement")
        elif char == "$":
            raise Refused("INVALID_FUNCTION_ARGUMENT", "Illegal group reference")
        else:
            out.append(char)
            index += 1
    return "".join(out)


def joda_to_strftime(pattern: str) -> str:
    """A Joda-Time pattern (format_datetime) as a strftime format: ``yyyy-MM-dd HH:mm`` -> ``%Y-%m-%d %H:%M``;
    quoted text is literal (``''`` is a quote). :raises Refused: a letter or run length not reproduced here."""

    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            end = pattern.find("'", index + 1)
            if end == index + 1:
                out.append("'")
                index += 2
                continue
            if end < 0:
                raise athena_only("format_datetime with an unterminated quote in the pattern")
            out.append(pattern[index + 1 : end].replace("%", "%%"))
            index = end + 1
        elif char.isalpha():
            run = len(re.match(rf"{re.escape(char)}+", pattern[index:]).group(0))  # type: ignore[union-attr]
            directive = _JODA.get((char, run)) or (_JODA.get((char, 4)) if char in "yME" and run > 4 else None)
            if directive is None:
                raise athena_only(f"format_datetime with the pattern letters {char * run!r}")
            out.append(directive)
            index += run
        else:
            out.append("%%" if char == "%" else char)
            index += 1
    return "".join(out)
