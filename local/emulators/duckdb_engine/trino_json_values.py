"""The Python functions behind Trino's json type on DuckDB (registered by :mod:`.python_functions`): Trino's
canonical json text, the json functions and the casts from json; the rewrites that call them are :mod:`.trino_json`. They answer as Trino's do.

A Trino ``json`` value is a DuckDB ``JSON`` holding Trino's canonical text: ``json_parse`` (and the ``JSON '...'``
literal) reads the text and writes it back compact, object keys sorted, numbers as Jackson writes what it read
(integers exactly, fractions as Java's ``Double.toString``: ``1.50`` -> ``1.5``, ``1e10`` -> ``1.0E10``), strings
escaped as Jackson escapes them (trinodb/trino ``io/trino/util/JsonTypeUtil.java``: ``SORTED_MAPPER``, reading as
``Object`` and writing with ``ORDER_MAP_ENTRIES_BY_KEYS``). Functions (docs/src/main/sphinx/functions/json.md and
``io/trino/operator/scalar/JsonFunctions.java`` at 89c61dec284b0659bf25bcaf51c2d76781d1e94d):

- ``json_format(json)``: the text; ``json_parse(varchar)``: invalid JSON fails (INVALID_FUNCTION_ARGUMENT);
- ``is_json_scalar(x)``: invalid JSON fails; ``json_array_length(x)``: NULL unless an array (or invalid);
- ``json_array_contains(x, v)``: only elements of v's kind match (``[1.0]`` does not contain ``1``, ``[5]`` not ``'5'``);
- ``json_extract(x, path)`` / ``json_extract_scalar`` / ``json_size`` with Trino's JSONPath subset (``$``, ``.key``,
  ``["key"]``, ``[index]``; anything else refused): the first field of that name; invalid JSON or a missing step is
  NULL; json_extract's value compact in its own order; a scalar unquoted, a number as written;
- ``json_array_get(x, i)``: 0-based, negative from the end, NULL past either end; a string element comes back
  unquoted, a JSON null as NULL, an array or object compact in its own key order;
- ``CAST(varchar AS json)`` is a JSON string (``'"abc"'``); ``CAST(json AS t)`` for varchar, boolean, integers,
  double, date and arrays/maps of them follows ``io/trino/util/JsonUtil.java``'s ``currentTokenAs*`` (a string
  read as the type, a fraction rounded to an integer, ``true`` as 1); an array or object cast to a scalar fails
  (INVALID_CAST_ARGUMENT).
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

import duckdb

__all__ = ["DUCK_SCALARS", "register"]

_INTEGERS: Final = {"tinyint": 2**7, "smallint": 2**15, "integer": 2**31, "bigint": 2**63}
DUCK_SCALARS: Final = {"varchar": "VARCHAR", "boolean": "BOOLEAN", "double": "DOUBLE", "date": "DATE"} | {
    name: name.upper() for name in _INTEGERS
}


class _Invalid(ValueError):
    """A value Trino refuses: the message is ``CODE: text`` (see .session, which reports it as Trino's)."""


# --- canonical text ----------------------------------------------------------------------------------------------
def _java_double(value: float) -> str:
    """Java's ``Double.toString``: the shortest digits that read back; plain from 1e-3 to 1e7, else ``d.dddE±n``."""
    if math.isnan(value) or math.isinf(value):
        raise _Invalid("NOT_SUPPORTED: runs on Athena only: a JSON number out of the double range")
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python writes this range plainly, with the same shortest digits
    shortest = decimal.Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, shortest.digits)).rstrip("0") or "0"
    exponent = len(shortest.digits) + int(shortest.exponent) - 1
    return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _quote(text: str) -> str:
    """A JSON string as Jackson writes it: ``"`` and ``\\`` escaped, control characters as ``\\n`` or ``\\u00XX``."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _write(value: Any, sort_keys: bool) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list) and not isinstance(value, _Pairs):
        return "[" + ",".join(_write(v, sort_keys) for v in value) + "]"
    items = value if isinstance(value, _Pairs) else sorted(value.items()) if sort_keys else value.items()
    return "{" + ",".join(f"{_quote(k)}:{_write(v, sort_keys)}" for k, v in items) + "}"


class _Pairs(list[tuple[str, Any]]):
    """An object as its fields in order, duplicates kept (a streaming reader's view, as JsonExtract reads)."""


def _read_stream(text: str) -> tuple[bool, Any]:
    """(parsed, value) with objects as :class:`_Pairs` and numbers as written (:class:`_Number`): no normalizing."""
    try:
        return True, json.loads(
            text, object_pairs_hook=_Pairs, parse_float=_Number, parse_int=_Number, parse_constant=_no_constant
        )
    except (ValueError, RecursionError):
        return False, None


def _follow(text: str | None, path: str | None) -> tuple[bool, Any]:
    """The value at `path` (a JSON list of keys and indexes, :func:`json_call`): (found, value); invalid JSON is not
    found (JsonExtract returns NULL for what it cannot parse)."""
    if text is None or path is None:
        return False, None
    ok, value = _read_stream(text)
    if not ok:
        return False, None
    for token in json.loads(path):
        if isinstance(value, _Pairs):
            matches = [v for k, v in value if k == str(token)]
            if not matches:
                return False, None
            value = matches[0]
        elif isinstance(value, list) and re.fullmatch(r"\d+", str(token)) and int(token) < len(value):
            value = value[int(token)]
        else:
            return False, None
    return True, value


def _extract(text: str | None, path: str | None) -> str | None:
    """json_extract: the value found, compact, in its own order, numbers as Jackson copies them."""
    found, value = _follow(text, path)
    return _write(_normalized(value), sort_keys=False) if found else None


def _normalized(value: Any) -> Any:
    """Numbers as Jackson's copy writes them: integers exactly, fractions as doubles."""
    if isinstance(value, _Number):
        return float(value) if re.search(r"[.eE]", value) else int(value)
    if isinstance(value, _Pairs):
        return _Pairs((k, _normalized(v)) for k, v in value)
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _extract_scalar(text: str | None, path: str | None) -> str | None:
    """json_extract_scalar: a string unquoted, a number as written, a boolean; NULL for null, arrays, objects."""
    found, value = _follow(text, path)
    if not found or value is None or isinstance(value, (list, dict)):
        return None
    return value if isinstance(value, str) else _write(value, sort_keys=False)


def _size(text: str | None, path: str | None) -> int | None:
    """json_size: the fields of an object or elements of an array, 0 for a scalar, NULL when not found."""
    found, value = _follow(text, path)
    if not found:
        return None
    return len(value) if isinstance(value, list) else 0


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _read(text: str) -> Any:
    """Strict JSON (no NaN, no trailing text); objects as dicts in their own order, the last duplicate winning."""
    return json.loads(text, parse_constant=_no_constant)


def _parse(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return _write(_read(text), sort_keys=True)
    except (ValueError, RecursionError):
        raise _Invalid(f"INVALID_FUNCTION_ARGUMENT: Cannot convert value to JSON: '{text}'") from None


def _maybe(text: str) -> tuple[bool, Any]:
    try:
        return True, _read(text)
    except (ValueError, RecursionError):
        return False, None


# --- functions ---------------------------------------------------------------------------------------------------
def _is_scalar(text: str | None) -> bool | None:
    if text is None:
        return None
    ok, value = _maybe(text)
    if not ok:
        raise _Invalid(f"INVALID_FUNCTION_ARGUMENT: Invalid JSON value: {text}")
    return not isinstance(value, (list, dict))


def _array_length(text: str | None) -> int | None:
    ok, value = _maybe(text) if text is not None else (False, None)
    return len(value) if ok and isinstance(value, list) else None


def _contains(kind: str) -> Callable[[str | None, Any], bool | None]:
    def contains(text: str | None, wanted: Any) -> bool | None:
        ok, value = _maybe(text) if text is not None else (False, None)
        if not ok or not isinstance(value, list) or wanted is None:
            return None
        if kind == "boolean":
            return any(v is wanted for v in value)
        if kind == "bigint":
            return any(isinstance(v, int) and not isinstance(v, bool) and v == wanted for v in value)
        if kind == "double":
            return math.isfinite(wanted) and any(isinstance(v, float) and v == wanted for v in value)
        return any(isinstance(v, str) and v == wanted for v in value)

    return contains


def _array_get(text: str | None, index: int | None) -> str | None:
    ok, value = _maybe(text) if text is not None and index is not None else (False, None)
    if not ok or not isinstance(value, list) or index is None or not -len(value) <= index < len(value):
        return None
    element = value[index]
    if isinstance(element, (list, dict)):
        return _write(element, sort_keys=False)
    return _scalar_text(element)


def _scalar_text(value: Any) -> str | None:
    """Jackson's ``getValueAsString`` of a scalar token: a string unquoted, a number or boolean as written."""
    if value is None or isinstance(value, str):
        return value
    return _write(value, sort_keys=False)


class _Number(str):
    """A JSON number kept as written (a decimal's trailing zeros are Trino's: ``CAST(1.50 AS json)`` is ``1.50``)."""


def _sorted_keys(text: str | None) -> str | None:
    """DuckDB's JSON of an array or map with every object's keys sorted, as Trino's MapToJsonCast writes them."""
    if text is None:
        return None
    return _write(json.loads(text, parse_float=_Number, parse_int=_Number), sort_keys=True)


def _string(text: str | None) -> str | None:
    return None if text is None else _quote(text)


# --- casts from json -----------------------------------------------------------------------------------------------
def _target(kind: str) -> Any:
    """A Trino type text (``array(integer)``, ``map(varchar, bigint)``) as a nested (name, parts) tuple."""
    kind = kind.strip()
    head, _, rest = kind.partition("(")
    if not rest:
        return (head, ())
    inner, parts, depth, current = rest[:-1], [], 0, ""
    for char in inner:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    if head == "row":  # fields "name type": (name, target) each
        return (head, tuple((p.split(" ", 1)[0], _target(p.split(" ", 1)[1])) for p in parts))
    return (head, tuple(_target(p) for p in parts))


def _convert(value: Any, target: Any) -> Any:
    """`value` (read from JSON) as Trino casts it to `target` (JsonUtil's currentTokenAs*); None for JSON null."""
    name, parts = target
    if value is None:
        return None
    if name == "array":
        if not isinstance(value, list):
            raise _Invalid(
                f"INVALID_CAST_ARGUMENT: Cannot cast to array. Expected a json array, but got {_shown(value)}"
            )
        return [_convert(v, parts[0]) for v in value]
    if name == "map":
        if not isinstance(value, dict):
            raise _Invalid(
                f"INVALID_CAST_ARGUMENT: Cannot cast to map. Expected a json object, but got {_shown(value)}"
            )
        return {_convert(k, parts[0]): _convert(v, parts[1]) for k, v in value.items()}
    if name == "row":  # JsonToRowCast: an object by field name (any case), an array by position
        if isinstance(value, dict):
            lowered: dict[str, Any] = {}
            for key, item in value.items():
                if key.lower() in lowered:
                    raise _Invalid(f"INVALID_CAST_ARGUMENT: Duplicate field: {key.lower()}")
                lowered[key.lower()] = item
            return {field: _convert(lowered.get(field), kind) for field, kind in parts}
        if isinstance(value, list) and len(value) == len(parts):
            return {field: _convert(item, kind) for (field, kind), item in zip(parts, value, strict=True)}
        raise _Invalid(f"INVALID_CAST_ARGUMENT: Cannot cast to row. Expected a json object or an array of {len(parts)}")
    if isinstance(value, (list, dict)):
        raise _Invalid(f"INVALID_CAST_ARGUMENT: Cannot cast '{_shown(value)}' to {name.upper()}")
    return _scalar(value, name)


def _scalar(value: Any, name: str) -> Any:
    failure = _Invalid(f"INVALID_CAST_ARGUMENT: Cannot cast '{_scalar_text(value)}' to {name.upper()}")
    if name == "varchar":
        return _scalar_text(value)
    if name == "boolean":
        if isinstance(value, str):
            lowered = value.lower()
            if lowered in ("true", "t", "1", "false", "f", "0"):
                return lowered in ("true", "t", "1")
            raise failure
        return bool(value)
    if name in _INTEGERS:
        limit = _INTEGERS[name]
        if isinstance(value, bool):
            number = int(value)
        elif isinstance(value, str):
            if not re.fullmatch(r"[+-]?\d+", value):
                raise failure
            number = int(value)
        elif isinstance(value, float):
            number = math.floor(abs(value) + 0.5) * (1 if value >= 0 else -1)  # half away from zero
        else:
            number = value
        if not -limit <= number < limit:
            raise _Invalid(f"INVALID_CAST_ARGUMENT: Out of range for {name}: {_scalar_text(value)}")
        return number
    if name == "double":
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise failure from None
        return float(value)
    if name == "date" and isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            raise _Invalid(f"INVALID_CAST_ARGUMENT: Value cannot be cast to date: {value}") from None
    raise _Invalid(f"NOT_SUPPORTED: runs on Athena only: a cast of a JSON {type(value).__name__} to {name}")


def _shown(value: Any) -> str:
    return _write(value, sort_keys=False)


def _cast(text: str | None, target: str | None) -> str | None:
    """The JSON value cast to `target` (a Trino type text), as JSON text DuckDB casts exactly (a scalar: its text)."""
    if text is None or target is None:
        return None
    kind = _target(target)
    converted = _convert(_read(text), kind)
    if converted is None:
        return None
    if kind[0] in ("array", "map", "row"):
        return json.dumps(converted if kind[0] == "array" else _keys_as_text(converted))
    return converted if isinstance(converted, str) else json.dumps(converted)


def _keys_as_text(value: dict[Any, Any]) -> dict[str, Any]:
    return {json.dumps(k) if not isinstance(k, str) else k: v for k, v in value.items()}


_FUNCTIONS: Final[list[tuple[str, Callable[..., Any], list[str], str]]] = [
    ("trino_json_parse", _parse, ["VARCHAR"], "JSON"),
    ("trino_json_string", _string, ["VARCHAR"], "JSON"),
    ("trino_json_sorted_keys", _sorted_keys, ["VARCHAR"], "JSON"),
    ("trino_is_json_scalar", _is_scalar, ["VARCHAR"], "BOOLEAN"),
    ("trino_json_array_length", _array_length, ["VARCHAR"], "BIGINT"),
    ("trino_json_array_get", _array_get, ["VARCHAR", "BIGINT"], "JSON"),
    ("trino_json_contains_boolean", _contains("boolean"), ["VARCHAR", "BOOLEAN"], "BOOLEAN"),
    ("trino_json_contains_bigint", _contains("bigint"), ["VARCHAR", "BIGINT"], "BOOLEAN"),
    ("trino_json_contains_double", _contains("double"), ["VARCHAR", "DOUBLE"], "BOOLEAN"),
    ("trino_json_contains_varchar", _contains("varchar"), ["VARCHAR", "VARCHAR"], "BOOLEAN"),
    ("trino_json_cast", _cast, ["VARCHAR", "VARCHAR"], "VARCHAR"),
    ("trino_json_extract", _extract, ["VARCHAR", "VARCHAR"], "JSON"),
    ("trino_json_extract_scalar", _extract_scalar, ["VARCHAR", "VARCHAR"], "VARCHAR"),
    ("trino_json_size", _size, ["VARCHAR", "VARCHAR"], "BIGINT"),
]


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Create the functions this module's rewrites call on a new DuckDB connection (NULL in, NULL out)."""
    for name, function, arguments, result in _FUNCTIONS:
        con.create_function(name, function, arguments, duckdb.sqltype(result), null_handling="special")  # type: ignore[arg-type]
