"""Trino's types, as the analyzer needs them: parsed from their text, rendered as Trino renders them in messages
(``varchar(19)``, ``timestamp(3)``, ``decimal(10,2)``, ``array(integer)``), and Trino's implicit coercions.

Coercions follow io/trino/type/TypeCoercion.java (trinodb/trino@01767030a35850939cd5247518d276cb9eeb85be,
``coerceTypeBase`` and ``compatibility``, its hand-coded rules) and the type docs
(docs/src/main/sphinx/language/types.md): ``unknown`` (the type of NULL) coerces to every type; tinyint -> smallint ->
integer -> bigint -> decimal -> real -> double (an exact integer to the decimal wide enough for it, a decimal to a
wider one); ``varchar(n)`` to a longer or unbounded varchar, ``char(n)`` to varchar; ``date`` to ``timestamp(p)``
and to ``timestamp(p) with time zone``; a time or timestamp to a higher precision and to ``with time zone``;
arrays, maps and rows element-wise. There is **no** implicit coercion between varchar and any
other type: ``timestamp(3) >= varchar(19)`` has no operator (Trino: TYPE_MISMATCH).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "TrinoType",
    "can_coerce",
    "castable",
    "common_super_type",
    "decimal_literal",
    "decimal_of",
    "decimal_result",
    "parse_type",
    "split_types",
]

#: Exact integers by width: (name, decimal precision that holds every value).
_INTEGERS = {"tinyint": 3, "smallint": 5, "integer": 10, "bigint": 19}
_INTEGER_RANK = {"tinyint": 0, "smallint": 1, "integer": 2, "bigint": 3}
_ALIASES = {"int": "integer", "double precision": "double", "float": "real", "string": "varchar"}


@dataclass(frozen=True)
class TrinoType:
    """One Trino type: ``name`` (``integer``, ``varchar``, ``decimal``, ``timestamp``, ``timestamp with time zone``,
    ``array``, ``map``, ``row``, ``interval day to second``, ``unknown`` ...), its numeric ``parameters``
    (varchar length, decimal precision and scale, timestamp precision; empty: unbounded/default), element types
    ``children`` (array: 1, map: 2, row: its fields) and ``fields`` (a row's field names, ``""`` when unnamed)."""

    name: str
    parameters: tuple[int, ...] = ()
    children: tuple[TrinoType, ...] = ()
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.name in ("timestamp with time zone", "time with time zone"):
            base = self.name.split(" ", 1)
            precision = f"({self.parameters[0]})" if self.parameters else ""
            return f"{base[0]}{precision} {base[1]}"
        if self.name == "row":
            inner = ", ".join(f"{name} {child}".strip() for name, child in zip(self.fields, self.children, strict=True))
            return f"row({inner})"
        if self.children:
            return f"{self.name}(" + ", ".join(str(child) for child in self.children) + ")"
        if self.parameters:
            return f"{self.name}(" + ",".join(str(p) for p in self.parameters) + ")"
        return self.name

    # --- families -----------------------------------------------------------------------------------------
    @property
    def is_unknown(self) -> bool:
        return self.name == "unknown"

    @property
    def is_integer(self) -> bool:
        return self.name in _INTEGERS

    @property
    def is_numeric(self) -> bool:
        return self.name in _INTEGERS or self.name in ("decimal", "real", "double")

    @property
    def is_string(self) -> bool:
        return self.name in ("varchar", "char")

    @property
    def is_temporal(self) -> bool:
        return self.name in ("date", "time", "timestamp", "timestamp with time zone", "time with time zone")

    @property
    def is_interval(self) -> bool:
        return self.name.startswith("interval")


VARCHAR = TrinoType("varchar")
BIGINT = TrinoType("bigint")
INTEGER = TrinoType("integer")
DOUBLE = TrinoType("double")
BOOLEAN = TrinoType("boolean")
DATE = TrinoType("date")
UNKNOWN = TrinoType("unknown")
INTERVAL_DAY = TrinoType("interval day to second")
INTERVAL_MONTH = TrinoType("interval year to month")

_PARAMETRIZED = re.compile(r"^([a-z ]+?)\s*\(\s*([0-9,\s]*)\s*\)\s*(with time zone|without time zone)?$")


def parse_type(text: str) -> TrinoType | None:
    """The type written ``text`` (``varchar(19)``, ``timestamp(3) with time zone``, ``array(row(a integer))``,
    Trino's spelling, any case); ``None`` when it is not a type this module knows."""
    value = " ".join(text.strip().lower().split())
    value = _ALIASES.get(value, value)
    if not value:
        return None
    for outer in ("array", "map", "row"):
        if value.startswith(outer + "(") and value.endswith(")"):
            parts = split_types(value[len(outer) + 1 : -1])
            if outer == "row":
                names, children = [], []
                for part in parts:
                    name, _, rest = part.partition(" ")
                    child = parse_type(rest) if rest else parse_type(name)
                    if child is None:
                        return None
                    names.append(name if rest else "")
                    children.append(child)
                return TrinoType("row", (), tuple(children), tuple(names))
            elements = [parse_type(part) for part in parts]
            if any(e is None for e in elements) or len(elements) != (1 if outer == "array" else 2):
                return None
            return TrinoType(outer, (), tuple(e for e in elements if e is not None))
    if value in ("timestamp", "timestamp without time zone"):
        return TrinoType("timestamp", (3,))
    if value == "timestamp with time zone":
        return TrinoType("timestamp with time zone", (3,))
    if value in ("time", "time without time zone"):
        return TrinoType("time", (3,))
    if value == "decimal":
        return TrinoType("decimal", (38, 0))
    if value in ("char", "character"):  # language/types.md: "char without length specified has a length of 1"
        return TrinoType("char", (1,))
    if value.startswith("interval "):
        return TrinoType("interval year to month" if "month" in value or "year" in value else "interval day to second")
    match = _PARAMETRIZED.match(value)
    if match:
        base, numbers, zone = match.group(1).strip(), match.group(2), match.group(3)
        values = tuple(int(n) for n in numbers.replace(" ", "").split(",") if n)
        base = _ALIASES.get(base, base)
        if base in ("timestamp", "time"):
            return TrinoType(f"{base} with time zone" if zone == "with time zone" else base, values[:1])
        if base == "decimal":
            return TrinoType("decimal", (values[0], values[1] if len(values) > 1 else 0)) if values else None
        if base in ("varchar", "char", "varbinary") and len(values) == 1:
            return TrinoType(base, values)
        return None
    if value in _SIMPLE:
        return TrinoType(value)
    return None


_SIMPLE = frozenset(
    {
        *_INTEGERS,
        "real",
        "double",
        "boolean",
        "varchar",
        "char",
        "varbinary",
        "date",
        "json",
        "uuid",
        "ipaddress",
        "unknown",
        "hyperloglog",
        "tdigest",
        "qdigest",
    }
)


def split_types(text: str) -> list[str]:
    """The items of a comma-separated list of types, split at its top level (``K, array(V), V2``: three), stripped;
    empty items dropped."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def decimal_of(t: TrinoType) -> tuple[int, int] | None:
    """(precision, scale) of an exact number as a decimal operand (an integer coerces to the decimal that holds it:
    integer decimal(10,0), bigint decimal(19,0)); ``None`` for anything else."""
    if t.name == "decimal":
        return (t.parameters[0], t.parameters[1]) if len(t.parameters) == 2 else (38, 0)
    if t.name in _INTEGERS:
        return _INTEGERS[t.name], 0
    return None


def can_coerce(source: TrinoType, target: TrinoType) -> bool:
    """Whether Trino coerces a value of ``source`` to ``target`` implicitly (TypeCoercion.canCoerce)."""
    if source == target or source.is_unknown:
        return True
    s, t = source.name, target.name
    if s in _INTEGERS:
        if t in _INTEGERS:
            return _INTEGER_RANK[s] <= _INTEGER_RANK[t]
        if t == "decimal":
            precision, scale = decimal_of(target) or (38, 0)
            return precision - scale >= _INTEGERS[s]
        return t in ("real", "double")
    if s == "decimal":
        if t == "decimal":
            (p1, s1), (p2, s2) = decimal_of(source) or (38, 0), decimal_of(target) or (38, 0)
            return s2 >= s1 and p2 - s2 >= p1 - s1
        return t in ("real", "double")
    if s == "real":
        return t == "double"
    if s in ("varchar", "char"):
        if t == "varchar":
            return not target.parameters or (bool(source.parameters) and source.parameters[0] <= target.parameters[0])
        return t == "char" and s == "char"
    if s == "date":
        return t in ("timestamp", "timestamp with time zone")
    if s in ("timestamp", "time"):
        same_zone = t == s
        zoned = t == f"{s} with time zone"
        return (same_zone or zoned) and _precision(target) >= _precision(source)
    if s in ("timestamp with time zone", "time with time zone"):
        return t == s and _precision(target) >= _precision(source)
    if s == t and s in ("array", "map", "row") and len(source.children) == len(target.children):
        return all(can_coerce(a, b) for a, b in zip(source.children, target.children, strict=True))
    return False


def _precision(t: TrinoType) -> int:
    return t.parameters[0] if t.parameters else 3


def common_super_type(left: TrinoType, right: TrinoType) -> TrinoType | None:
    """The type both coerce to (TypeCoercion.getCommonSuperType), ``None`` when there is none."""
    if can_coerce(left, right):
        return right
    if can_coerce(right, left):
        return left
    a, b = left.name, right.name
    if left.is_numeric and right.is_numeric:
        if "double" in (a, b) or ("real" in (a, b) and "decimal" in (a, b)):
            return DOUBLE
        if "real" in (a, b):
            return TrinoType("real")
        first, second = decimal_of(left), decimal_of(right)
        if first and second:
            scale = max(first[1], second[1])
            whole = max(first[0] - first[1], second[0] - second[1])
            return TrinoType("decimal", (min(38, whole + scale), scale))
    if left.is_string and right.is_string:
        return VARCHAR
    if {a, b} <= {"timestamp", "timestamp with time zone", "date"}:
        precision = max(_precision(left) if a != "date" else 0, _precision(right) if b != "date" else 0)
        zoned = "timestamp with time zone" in (a, b)
        return TrinoType("timestamp with time zone" if zoned else "timestamp", (precision,))
    if a == b and a in ("array", "map", "row") and len(left.children) == len(right.children):
        children = [common_super_type(x, y) for x, y in zip(left.children, right.children, strict=True)]
        if all(child is not None for child in children):
            return TrinoType(a, (), tuple(c for c in children if c is not None), left.fields)
    return None


def literal_number(text: str) -> TrinoType:
    """The type of a numeric literal as Trino reads it (docs/src/main/sphinx/language/types.md, and the default
    ``parse_decimal_literals_as_double = false``): ``1`` integer, ``3000000000`` bigint, ``1.5`` decimal(2,1),
    ``1e0`` double; an integer beyond bigint is decimal."""
    lowered = text.lower().replace("_", "")
    if "e" in lowered:
        return DOUBLE
    if "." in lowered:
        whole, _, fraction = lowered.partition(".")
        digits = (whole.lstrip("0") or "") + fraction
        scale = len(fraction)
        return TrinoType("decimal", (max(len(digits), scale, 1), scale))
    try:
        value = int(lowered, 0) if lowered[:2] in ("0x", "0b", "0o") else int(lowered)
    except ValueError:
        return BIGINT
    if -(2**31) <= value < 2**31:
        return INTEGER
    if -(2**63) <= value < 2**63:
        return BIGINT
    return TrinoType("decimal", (len(str(abs(value))), 0))


def castable(source: TrinoType, target: TrinoType) -> bool:
    """Whether Trino has a cast from ``source`` to ``target``; refused only where it certainly has none (a date,
    time or timestamp to or from a number or a boolean: ``Cannot cast timestamp(3) to bigint``, TYPE_MISMATCH;
    the casts of docs/src/main/sphinx/functions/conversion.md and datetime.md), everything else is allowed."""
    if source.is_unknown or target.is_unknown:
        return True
    if source.is_temporal == target.is_temporal:
        return True
    other = target if source.is_temporal else source
    return not (other.is_numeric or other.name == "boolean")


#: Trino's widest decimal (io/trino/spi/type/Decimals.java, MAX_PRECISION).
MAX_DECIMAL_PRECISION = 38


def decimal_literal(text: str) -> TrinoType | None:
    """The type of ``DECIMAL '<text>'`` (docs/src/main/sphinx/language/types.md, "DECIMAL"; decimal.md, "Decimal
    literals", trinodb/trino@6f7aadf5a9115ec244aac372e07df5a481a4907f): ``DECIMAL '1.50'`` is decimal(3,2) (the
    fraction's zeros count), ``DECIMAL '12'`` decimal(2,0), ``DECIMAL '.5'`` decimal(1,1); ``None`` when ``text`` is
    not a decimal number (Trino: INVALID_LITERAL)."""
    digits = text.strip().lstrip("+-")
    whole = re.fullmatch(r"\d+", digits)
    if whole:
        return TrinoType("decimal", (max(1, len(digits.lstrip("0"))), 0))
    match = re.fullmatch(r"(\d*)\.(\d*)", digits)
    if match is None or digits == ".":
        return None
    integral, fraction = match.groups()
    return TrinoType("decimal", (max(1, len(integral) + len(fraction)), len(fraction)))


def decimal_result(operator: str, left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int]:
    """(precision, scale) of ``left <operator> right`` on decimals (docs/src/main/sphinx/functions/decimal.md, table
    "Binary arithmetic decimal operators", trinodb/trino@6f7aadf5a9115ec244aac372e07df5a481a4907f; division's
    precision as core/trino-main/src/test/java/io/trino/type/TestDecimalOperators.java at
    029c93b693c7a3dbff995062fb9997f4acd86d77 has it, ``xp + ys + max(0, ys - xs)``); the precision is capped at 38.
    ``operator``: ``+ - * / %``. :raises ValueError: another operator."""
    (xp, xs), (yp, ys) = left, right
    if operator in ("+", "-"):
        precision, scale = 1 + max(xs, ys) + max(xp - xs, yp - ys), max(xs, ys)
    elif operator == "*":
        precision, scale = xp + yp, xs + ys
    elif operator == "/":
        precision, scale = xp + ys + max(0, ys - xs), max(xs, ys)
    elif operator == "%":
        precision, scale = min(xp - xs, yp - ys) + max(xs, ys), max(xs, ys)
    else:
        raise ValueError(f"not a decimal operator: {operator!r}")
    return min(MAX_DECIMAL_PRECISION, max(precision, 1)), scale
