"""Trino's types for the local engine: what an expression's type is in Trino, and DuckDB's types named as Trino's.

- :class:`TrinoType`: the few facts the rewrites of :mod:`.trino_semantics` need about an expression: its Trino
  type name, a decimal's precision and scale (a varchar's length in ``precision``), a timestamp with time zone's
  zone when it is known before running (``zone``; :data:`UNKNOWN_ZONE` when it is not).
- :func:`of_literal`, :func:`of_sqlglot`: Trino's typing rules for literals, from Trino's docs
  (``docs/src/main/sphinx/functions/decimal.md``, "Decimal literals", trinodb/trino at
  6f7aadf5a9115ec244aac372e07df5a481a4907f): an integer literal is ``integer`` (``bigint`` beyond 2^31-1), ``1.50``
  is ``decimal(3,2)``, ``1e0`` is ``double``; an integer operand of decimal arithmetic is ``decimal(10,0)``
  (``bigint`` ``decimal(19,0)``). Decimal arithmetic's result types are the check's
  (:func:`athena_sql.types.decimal_result`), as are the result types the engine reports where the check derives
  them (:mod:`.analysis`).
- :func:`trino_type_text`: a DuckDB result type as Trino writes it (``decimal(23,1)``, ``timestamp(3)``,
  ``timestamp(3) with time zone``, ``array(varchar)``, ``map(varchar, bigint)``, ``row(a integer)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Final

from sqlglot import exp

__all__ = [
    "UNKNOWN_ZONE",
    "TrinoType",
    "of_literal",
    "of_number_text",
    "of_sqlglot",
    "trino_type_text",
]

#: The zone of a ``timestamp with time zone`` that is only known when the query runs (refused where it matters).
UNKNOWN_ZONE: Final = "?"
INTEGERS: Final = ("tinyint", "smallint", "integer", "bigint")
#: The decimal type an integer operand takes in decimal arithmetic (Trino's implicit coercion).
_INTEGER_AS_DECIMAL: Final = {"tinyint": 3, "smallint": 5, "integer": 10, "bigint": 19}
_INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True)
class TrinoType:
    """``name``: ``integer``, ``bigint``, ``double``, ``real``, ``decimal``, ``varchar``, ``boolean``, ``date``,
    ``timestamp``, ``timestamptz``, ``array``, ``map``, ``row``, ``json``, ... or ``unknown``; ``precision`` and
    ``scale`` for a decimal (``precision`` the length of a ``varchar(n)``); ``zone`` for a ``timestamptz``."""

    name: str
    precision: int | None = None
    scale: int | None = None
    zone: str | None = None

    @property
    def is_integer(self) -> bool:
        return self.name in INTEGERS

    @property
    def is_exact(self) -> bool:
        """An integer or a decimal (Trino's exact numbers)."""
        return self.is_integer or self.name == "decimal"

    @property
    def is_float(self) -> bool:
        return self.name in ("double", "real")

    def as_decimal(self) -> tuple[int, int] | None:
        """(precision, scale) of this type in decimal arithmetic; None when unknown or not exact."""
        if self.name == "decimal":
            return (self.precision, self.scale) if self.precision is not None and self.scale is not None else None
        digits = _INTEGER_AS_DECIMAL.get(self.name)
        return (digits, 0) if digits is not None else None

    def in_zone(self, zone: str | None) -> TrinoType:
        return replace(self, zone=zone)


UNKNOWN: Final = TrinoType("unknown")


def of_literal(node: exp.Literal) -> TrinoType:
    """A literal's Trino type (decimal.md, "Decimal literals"): 42 integer, 1.50 decimal(3,2), 1e0 double."""
    if node.is_string:
        return TrinoType("varchar", precision=len(node.this))
    return of_number_text(node.this)


def of_number_text(text: str) -> TrinoType:
    """The Trino type of a number written as `text` (a sign allowed): ``integer``, ``bigint``, ``decimal(p,s)``
    (``DECIMAL '1.50'`` too) or ``double``; ``unknown`` when it is not a number."""
    text = text.strip().lstrip("+-")
    if re.fullmatch(r"\d+", text):
        return TrinoType("integer" if int(text) <= _INT32_MAX else "bigint")
    match = re.fullmatch(r"(\d*)\.(\d*)", text)
    if match:
        whole, fraction = match.groups()  # leading and trailing zeros count (decimal.md)
        return TrinoType("decimal", precision=max(1, len(whole) + len(fraction)), scale=len(fraction))
    if re.fullmatch(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+", text):
        return TrinoType("double")
    return UNKNOWN


_SQLGLOT_NAMES: Final = {
    exp.DType.TINYINT: "tinyint",
    exp.DType.SMALLINT: "smallint",
    exp.DType.INT: "integer",
    exp.DType.BIGINT: "bigint",
    exp.DType.FLOAT: "real",
    exp.DType.DOUBLE: "double",
    exp.DType.DECIMAL: "decimal",
    exp.DType.VARCHAR: "varchar",
    exp.DType.CHAR: "char",
    exp.DType.TEXT: "varchar",
    exp.DType.BOOLEAN: "boolean",
    exp.DType.DATE: "date",
    exp.DType.TIMESTAMP: "timestamp",
    exp.DType.TIMESTAMPTZ: "timestamptz",
    exp.DType.TIMESTAMPLTZ: "timestamptz",
    exp.DType.ARRAY: "array",
    exp.DType.MAP: "map",
    exp.DType.STRUCT: "row",
    exp.DType.JSON: "json",
    exp.DType.INTERVAL: "interval",
    exp.DType.VARBINARY: "varbinary",
}


def of_sqlglot(data_type: exp.DataType | None) -> TrinoType:
    """sqlglot's annotation (or a CAST's target) as a :class:`TrinoType`; UTC for a ``timestamptz``."""
    if data_type is None:
        return UNKNOWN
    name = _SQLGLOT_NAMES.get(data_type.this)
    if name is None:
        return UNKNOWN
    params = [p.this for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    numbers = [int(p.this) for p in params if isinstance(p, exp.Literal) and p.is_int]
    if name == "decimal":
        precision = numbers[0] if numbers else (38 if data_type.expressions else None)
        scale = numbers[1] if len(numbers) > 1 else (0 if numbers else None)
        return TrinoType(name, precision=precision, scale=scale)
    if name in ("varchar", "char", "timestamp"):
        return TrinoType(name, precision=numbers[0] if numbers else None)
    if name == "timestamptz":
        return TrinoType(name, precision=numbers[0] if numbers else None, zone="UTC")
    return TrinoType(name, zone="UTC" if name == "timestamptz" else None)


# --- DuckDB result types as Trino writes them ----------------------------------------------------------------
_DUCK_SCALARS: Final = {
    "BOOLEAN": "boolean",
    "TINYINT": "tinyint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "bigint",  # count_if / sum of integers are HUGEINT in DuckDB, bigint in Trino (checked to fit)
    "UTINYINT": "smallint",
    "USMALLINT": "integer",
    "UINTEGER": "bigint",
    "UBIGINT": "bigint",
    "UHUGEINT": "bigint",
    "FLOAT": "real",
    "DOUBLE": "double",
    "VARCHAR": "varchar",
    "BLOB": "varbinary",
    "UUID": "uuid",
    "DATE": "date",
    "TIME": "time(3)",
    "TIME WITH TIME ZONE": "time(3) with time zone",
    "TIMESTAMP": "timestamp(3)",
    "TIMESTAMP_S": "timestamp(3)",
    "TIMESTAMP_MS": "timestamp(3)",
    "TIMESTAMP_NS": "timestamp(3)",
    "TIMESTAMP WITH TIME ZONE": "timestamp(3) with time zone",
    "TIMESTAMPTZ": "timestamp(3) with time zone",
    "TIMESTAMPTZ_NS": "timestamp(3) with time zone",
    "INTERVAL": "interval day to second",
    "JSON": "json",
    '"NULL"': "unknown",
    "NULL": "unknown",
}


def trino_type_text(duck_type: Any) -> str:
    """A DuckDB type (a ``DuckDBPyType`` or its text) as Trino writes it: ``DECIMAL(23,1)`` -> ``decimal(23,1)``,
    ``VARCHAR[]`` -> ``array(varchar)``, ``MAP(VARCHAR, BIGINT)`` -> ``map(varchar, bigint)``, ``STRUCT(a INTEGER)``
    -> ``row(a integer)``, ``TIMESTAMP`` -> ``timestamp(3)`` (Athena's precision)."""
    text = str(duck_type).strip()
    upper = text.upper()
    if upper.endswith("]"):  # LIST (T[]) or ARRAY (T[n])
        return f"array({trino_type_text(text[: text.rindex('[')])})"
    if upper in _DUCK_SCALARS:
        return _DUCK_SCALARS[upper]
    if upper.startswith("DECIMAL"):
        return text.lower().replace(" ", "")
    if upper.startswith("ENUM"):
        return "varchar"
    if upper.startswith("MAP(") and upper.endswith(")"):
        key, value = _split_top(text[4:-1])
        return f"map({trino_type_text(key)}, {trino_type_text(value)})"
    if upper.startswith("STRUCT(") and upper.endswith(")"):
        fields = []
        for field in _split_top(text[7:-1]):
            name, _, field_type = field.strip().partition(" ")
            fields.append(f"{name.strip(chr(34)).lower()} {trino_type_text(field_type)}")
        return f"row({', '.join(fields)})"
    if upper.startswith("UNION("):
        return "unknown"
    return text.lower()


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``VARCHAR, STRUCT(a INT, b INT)`` -> two parts)."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts
