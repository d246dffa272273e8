"""The rewrites of Trino's json functions and casts for DuckDB: each call becomes a call of the Python functions of
:mod:`.trino_json_values` (which say what each function answers, and from which Trino source), or is refused in one
line when the local engine does not reproduce it (a JSONPath beyond Trino's subset, a cast it does not convert).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import sqlglot
from sqlglot import exp

from .trino_json_values import DUCK_SCALARS
from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import TrinoType

__all__ = ["HANDLED_CALLS", "json_call", "json_cast"]

#: Calls sqlglot does not know (``exp.Anonymous``) that :func:`json_call` rewrites.
HANDLED_CALLS: Final = frozenset({"is_json_scalar", "json_array_length", "json_array_get", "json_size", "json_array"})


# --- rewrites ----------------------------------------------------------------------------------------------------
def json_call(node: exp.Expr, type_of: Callable[..., TrinoType]) -> tuple[TrinoType, exp.Expr] | None:
    """The Trino type and DuckDB replacement of a json call (module docstring), or None when not one.

    :raises Refused: NOT_SUPPORTED for a form not reproduced (json_array_contains of another kind of value)."""
    if isinstance(node, exp.ParseJSON):  # json_parse(x) and JSON '...'
        return TrinoType("json"), duck("trino_json_parse(_a)", _a=node.this)
    if isinstance(node, exp.JSONObject):  # json.md, json_object: a varchar; NULL ON NULL unless ABSENT ON NULL
        return TrinoType("varchar"), _json_object(node, type_of)
    if isinstance(node, exp.JSONValue) or (isinstance(node, exp.JSONExtract) and node.args.get("json_query")):
        raise athena_only("json_value and json_query (SQL/JSON paths)")  # DuckDB reads neither mode nor wrappers
    if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar)):
        call = "trino_json_extract" if isinstance(node, exp.JSONExtract) else "trino_json_extract_scalar"
        kind = TrinoType("json" if isinstance(node, exp.JSONExtract) else "varchar")
        return kind, duck(f"{call}(_a, _p)", _a=node.this, _p=_path(node.expression))
    if isinstance(node, exp.JSONFormat):
        return TrinoType("varchar"), duck("CAST(_a AS VARCHAR)", _a=node.this)
    if isinstance(node, exp.JSONArrayContains):
        wanted = type_of(node.expression)
        kind = (
            "boolean" if wanted.name == "boolean" else "bigint" if wanted.is_integer
            else "double" if wanted.is_float else "varchar" if wanted.name == "varchar" else None
        )  # fmt: skip
        if kind is None:
            raise athena_only(f"json_array_contains of a {wanted.name} value")
        return TrinoType("boolean"), duck(f"trino_json_contains_{kind}(_a, _b)", _a=node.this, _b=node.expression)
    if isinstance(node, exp.Anonymous) and node.name.lower() in HANDLED_CALLS:
        name, args = node.name.lower(), list(node.expressions)
        if name == "json_size" and len(args) == 2:
            path = literal_text(args[1])
            if path is None:
                raise athena_only("json_size with a path that is not a literal")
            return TrinoType("bigint"), duck("trino_json_size(_a, _p)", _a=args[0], _p=_path(_parse_path(path)))
        if name == "json_array":  # json.md: ABSENT ON NULL by default; literal elements only
            if any(literal_text(a) is None and not isinstance(a, (exp.Literal, exp.Boolean, exp.Null)) for a in args):
                raise athena_only("json_array of values that are not literals")
            kept = [a.copy() for a in args if not isinstance(a, exp.Null)]
            return TrinoType("varchar"), duck(
                "CAST(_a AS VARCHAR)", _a=exp.Anonymous(this="json_array", expressions=kept)
            )
        if name == "json_array_get" and len(args) == 2:
            return TrinoType("json"), duck("trino_json_array_get(_a, _b)", _a=args[0], _b=args[1])
        if len(args) == 1:
            kind = TrinoType("boolean" if name == "is_json_scalar" else "bigint")
            return kind, duck(f"trino_{name}(_a)", _a=args[0])
    return None


def _json_object(node: exp.JSONObject, type_of: Callable[..., TrinoType]) -> exp.Expr:
    """json_object of integer, boolean, varchar or NULL values as DuckDB writes it (the same text); ABSENT ON NULL
    drops literal NULLs (a value that may be NULL when the query runs is refused); other options are refused."""
    pairs = [pair for pair in node.expressions if isinstance(pair, exp.JSONKeyValue)]
    absent = str(node.args.get("null_handling") or "").upper() == "ABSENT ON NULL"
    options = [k for k in ("unique_keys", "return_type", "encoding") if node.args.get(k)]
    if len(pairs) != len(node.expressions) or options or (node.args.get("null_handling") and not absent):
        raise athena_only("json_object with options other than ABSENT ON NULL")
    if absent:
        if any(not isinstance(p.expression, (exp.Literal, exp.Boolean, exp.Null)) for p in pairs):
            raise athena_only("json_object ABSENT ON NULL of values that are not literals")
        pairs = [p for p in pairs if not isinstance(p.expression, exp.Null)]
    values = [p.expression for p in pairs]
    if not all(
        isinstance(v, exp.Null) or type_of(v).is_integer or type_of(v).name in ("boolean", "varchar") for v in values
    ):
        raise athena_only("json_object of values other than integers, booleans and varchars")
    call = exp.JSONObject(expressions=[p.copy() for p in pairs])
    return duck("CAST(_a AS VARCHAR)", _a=call)


def _parse_path(text: str) -> exp.Expr:
    try:
        return sqlglot.parse_one(f"json_extract(x, '{text.replace(chr(39), chr(39) * 2)}')", read="trino").expression
    except sqlglot.errors.SqlglotError:
        raise Refused("INVALID_FUNCTION_ARGUMENT", f"Invalid JSON path: '{text}'") from None


def _path(node: exp.Expr) -> exp.Expr:
    """Trino's JSONPath subset (functions/json.md, json_extract: ``$``, ``.key``, ``["key"]``, ``[index]``) as the
    JSON list of its steps; wildcards, slices, recursion and filters are refused (not Trino's subset)."""
    if not isinstance(node, exp.JSONPath):
        text = literal_text(node)
        raise athena_only("a json path that is not a literal" if text is None else f"the json path {text!r}")
    parts = node.expressions
    if not parts or not isinstance(parts[0], exp.JSONPathRoot):
        raise Refused("INVALID_FUNCTION_ARGUMENT", f"Invalid JSON path: {node.sql('trino')}")
    steps: list[Any] = []
    for part in parts[1:]:
        key = isinstance(part, exp.JSONPathKey) and isinstance(part.this, str)
        index = isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int) and part.this >= 0
        if key or index:
            steps.append(part.this)
        else:
            raise athena_only('a json path beyond Trino\'s subset ($, .key, ["key"], [index])')
    return exp.Literal.string(json.dumps(steps))


def json_cast(node: exp.Cast, source: TrinoType, target: TrinoType) -> tuple[TrinoType, exp.Expr] | None:
    """CAST to or from json (module docstring), or None when neither side is json (or DuckDB already answers as
    Trino: numbers, booleans and arrays of them to json). :raises Refused: a cast not reproduced."""
    if target.name == "json" and source.name == "varchar":
        return target, duck("trino_json_string(_a)", _a=node.this)
    if target.name == "json" and source.name == "unknown" and isinstance(node.this, exp.Null):
        return target, duck("CAST(NULL AS JSON)")
    if target.name == "json" and source.name in ("double", "real", "row", "timestamp", "timestamptz", "date"):
        raise athena_only(f"a cast of a {source.name} to json ({node.sql('trino')})")
    if target.name == "json" and source.name == "decimal":  # DecimalToJson keeps the scale: 1.50, not 1.5
        return target, duck("CAST(CAST(_a AS VARCHAR) AS JSON)", _a=node.this)
    if target.name == "json" and source.name in ("array", "map"):  # DuckDB's to_json is Trino's for these only
        template = (
            "CASE WHEN regexp_matches(typeof(_a), 'DECIMAL|DOUBLE|FLOAT|STRUCT|TIME|DATE|INTERVAL|BLOB|UUID|JSON|UNION')"
            " THEN error('NOT_SUPPORTED: runs on Athena only: a cast to json of an array or map holding numbers"
            " other than integers, rows or temporal values') ELSE trino_json_sorted_keys(CAST(CAST(_a AS JSON) AS"
            " VARCHAR)) END"
        )
        return target, duck(template, _a=node.this)
    if source.name != "json" or target.name == "json":
        return None
    text = _trino_text(node.to)
    if text is None:
        raise athena_only(f"a cast of json to {node.to.sql('trino')}")
    call = duck("trino_json_cast(_a, _t)", _a=node.this, _t=exp.Literal.string(text))
    if text in DUCK_SCALARS:
        to = DUCK_SCALARS[text]
        return target, duck(f"CAST(_c AS {to})", _c=call)
    return target, exp.Cast(this=duck("CAST(_c AS JSON)", _c=call), to=node.to.copy())


def _trino_text(data_type: exp.DataType) -> str | None:
    """A cast target as the Trino type text :func:`.trino_json_values._cast` reads (None: a type it does not convert)."""
    names = {
        exp.DType.VARCHAR: "varchar", exp.DType.TEXT: "varchar", exp.DType.BOOLEAN: "boolean",
        exp.DType.TINYINT: "tinyint", exp.DType.SMALLINT: "smallint", exp.DType.INT: "integer",
        exp.DType.BIGINT: "bigint", exp.DType.DOUBLE: "double", exp.DType.DATE: "date",
    }  # fmt: skip
    if data_type.this in names and (data_type.this not in (exp.DType.VARCHAR,) or not data_type.expressions):
        return names[data_type.this]
    if data_type.this == exp.DType.STRUCT:
        fields = [(f.name, _trino_text(f.args["kind"])) for f in data_type.expressions if isinstance(f, exp.ColumnDef)]
        if len(fields) != len(data_type.expressions) or any(not n or t is None for n, t in fields):
            return None
        return "row(" + ",".join(f"{name.lower()} {kind}" for name, kind in fields) + ")"
    parts = [p for p in data_type.expressions if isinstance(p, exp.DataType)]
    inner = [_trino_text(p) for p in parts]
    if any(i is None for i in inner) or not inner:
        return None
    if data_type.this == exp.DType.ARRAY and len(inner) == 1:
        return f"array({inner[0]})"
    if data_type.this == exp.DType.MAP and len(inner) == 2:
        return f"map({inner[0]},{inner[1]})"
    return None
