"""Trino's ``format(format, args...)``: Java's ``java.util.Formatter`` (functions/conversion.md: "Returns a formatted
string using the specified format string", linking Formatter's syntax), on the arguments as Trino passes them
(``FormatFunction.java``, trinodb/trino at 03d8e5abc686c5c4a9f96ca14db07e2aed880174: integers as ``Long``, decimals
as ``BigDecimal``, doubles as ``Double``, varchar and char (space-padded) as ``String``, dates as ``LocalDate``).

Reproduced here (the session locale, en-US): ``%s %S`` of a varchar, char, integer, decimal (``BigDecimal.toString``,
which Python's ``Decimal.__str__`` matches), boolean, date or NULL; ``%d %x %X %o`` of an integer; ``%f`` of a
decimal or double (HALF_UP on the decimal digits, as Java rounds); ``%b %B``, ``%n``, ``%%``; the flags
``- + space 0 , ( #``, width, precision, ``n$`` and ``<`` argument indexes. :func:`unsupported` names what is not
(``%e``, ``%g``, ``%t``, ``%c``, a double or timestamp as ``%s``): the caller refuses it before running.
"""

from __future__ import annotations

import decimal
import re
from typing import Final

__all__ = ["java_format", "unsupported"]

_SPECIFIER: Final = re.compile(r"%(?:(\d+)\$)?([-#+ 0,(<]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])")
_INTEGERS: Final = ("tinyint", "smallint", "integer", "bigint")
#: Argument kinds each conversion is reproduced for (other kinds: refused before running).
_SUPPORTED: Final = {
    "s": ("varchar", "char", "decimal", "boolean", "date", "unknown", *_INTEGERS),
    "d": ("unknown", "decimal", "double", "varchar", *_INTEGERS),  # decimal, double, varchar fail as in Java
    "x": ("unknown", *_INTEGERS),
    "o": ("unknown", *_INTEGERS),
    "f": ("unknown", "decimal", "double", *_INTEGERS),  # an integer fails as in Java
    "b": ("varchar", "char", "decimal", "double", "boolean", "date", "unknown", *_INTEGERS),
}


def _specifiers(pattern: str) -> list[tuple[re.Match[str] | None, str]]:
    """The pattern as (specifier, None) and (None, literal text) pieces; ValueError for a stray ``%``."""
    pieces: list[tuple[re.Match[str] | None, str]] = []
    index = 0
    while index < len(pattern):
        percent = pattern.find("%", index)
        if percent < 0:
            pieces.append((None, pattern[index:]))
            break
        if percent > index:
            pieces.append((None, pattern[index:percent]))
        match = _SPECIFIER.match(pattern, percent)
        if match is None:
            raise ValueError(f"UnknownFormatConversion: Conversion = '{pattern[percent + 1 : percent + 2] or '%'}'")
        pieces.append((match, ""))
        index = match.end()
    return pieces


def _pieces(pattern: str) -> list[tuple[re.Match[str] | None, str, int | None]]:
    """:func:`_specifiers` with each specifier's argument index (0-based; ``None`` for literal text, ``%%`` and
    ``%n``), as Java's Formatter picks it: ``n$`` explicit, ``<`` the previous specifier's, else the next ordinary."""
    out: list[tuple[re.Match[str] | None, str, int | None]] = []
    ordinary, last = 0, -1
    for match, text in _specifiers(pattern):
        if match is None or match.group(5) in "%n":
            out.append((match, text, None))
            continue
        explicit, flags = match.group(1), match.group(2)
        if "<" in flags:
            position = last
        elif explicit is not None:
            position = int(explicit) - 1
        else:
            position, ordinary = ordinary, ordinary + 1
        last = position
        out.append((match, text, position))
    return out


def _argument_kinds(pattern: str, kinds: list[str]) -> list[tuple[str, str | None]]:
    """(conversion, kind of its argument or None) per specifier that takes one."""
    return [
        (match.group(5), kinds[position] if 0 <= position < len(kinds) else None)
        for match, _text, position in _pieces(pattern)
        if match is not None and position is not None
    ]


def unsupported(pattern: str, kinds: list[str]) -> str | None:
    """What of `pattern` on arguments of Trino types `kinds` is not reproduced here (None: all of it is)."""
    try:
        conversions = _argument_kinds(pattern, kinds)
    except ValueError:
        return None  # fails as Java fails, at run time
    for conversion, kind in conversions:
        allowed = _SUPPORTED.get(conversion.lower())
        if allowed is None:
            return f"the conversion %{conversion}"
        if kind is not None and kind not in allowed:
            return f"%{conversion} of a {kind}"
    return None


def java_format(pattern: str, kinds: list[str], values: list[str | None]) -> str:
    """`pattern` applied to `values` (their text, typed by `kinds`); ValueError as Java's IllegalFormatException."""
    out: list[str] = []
    for match, text, position in _pieces(pattern):
        if match is None:
            out.append(text)
            continue
        _explicit, flags, width, precision, conversion = match.groups()
        if position is None:  # %% and %n
            out.append(_pad("%" if conversion == "%" else "\n", flags, width))
            continue
        if not 0 <= position < len(values):
            raise ValueError(f"MissingFormatArgument: Format specifier '{match.group(0)}'")
        out.append(_convert(conversion, flags.replace("<", ""), width, precision, kinds[position], values[position]))
    return "".join(out)


def _pad(text: str, flags: str, width: str | None) -> str:
    if width is None:
        if "-" in flags:
            raise ValueError(f"MissingFormatWidth: %{flags}")
        return text
    return text.ljust(int(width)) if "-" in flags else text.rjust(int(width))


def _convert(
    conversion: str, flags: str, width: str | None, precision: str | None, kind: str, value: str | None
) -> str:
    lower = conversion.lower()
    if lower == "b":
        text = "false" if value is None else (value if kind == "boolean" else "true")
    elif value is None:
        text = "null"
    elif lower == "s":
        if "#" in flags:
            raise ValueError("FormatFlagsConversionMismatch: Conversion = s, Flags = #")
        text = str(decimal.Decimal(value)) if kind == "decimal" else value  # BigDecimal.toString: 1E-7
    elif lower in "dxo":
        if kind not in _INTEGERS:
            raise ValueError(f"IllegalFormatConversion: {conversion} != {_java_class(kind)}")
        if precision is not None:
            raise ValueError(f"IllegalFormatPrecision: {precision}")
        text = _integer(lower, flags, width, int(value))
        return text.upper() if conversion == "X" else text
    elif lower == "f":
        if kind not in ("decimal", "double"):
            raise ValueError(f"IllegalFormatConversion: f != {_java_class(kind)}")
        return _fixed(flags, width, 6 if precision is None else int(precision), value)
    else:
        raise ValueError(f"UnknownFormatConversion: Conversion = '{conversion}'")
    if precision is not None:
        text = text[: int(precision)]
    text = _pad(text, flags, width)
    return text.upper() if conversion.isupper() else text


def _java_class(kind: str) -> str:
    return {"decimal": "java.math.BigDecimal", "double": "java.lang.Double", "varchar": "java.lang.String"}.get(
        kind, "java.lang.Long"
    )


def _signed(digits: str, negative: bool, flags: str, width: str | None) -> str:
    """Sign, parentheses and zero padding of a number's `digits` (Formatter's leadingSign/trailingSign)."""
    if negative:
        prefix, suffix = ("(", ")") if "(" in flags else ("-", "")
    else:
        prefix, suffix = ("+" if "+" in flags else " " if " " in flags else ""), ""
    if "0" in flags:
        if width is None:
            raise ValueError(f"MissingFormatWidth: %{flags}")
        digits = digits.rjust(int(width) - len(prefix) - len(suffix), "0")
    return _pad(prefix + digits + suffix, flags, width)


def _grouped(whole: str, flags: str) -> str:
    return f"{int(whole):,}" if "," in flags else whole


def _integer(conversion: str, flags: str, width: str | None, number: int) -> str:
    if conversion == "d":
        return _signed(_grouped(str(abs(number)), flags), number < 0, flags, width)
    if "," in flags or "(" in flags or "+" in flags or " " in flags:
        raise ValueError(f"FormatFlagsConversionMismatch: Conversion = {conversion}, Flags = {flags}")
    unsigned = number & (2**64 - 1)  # a Long's two's complement
    digits = format(unsigned, "x" if conversion == "x" else "o")
    prefix = ("0x" if conversion == "x" else "0") if "#" in flags else ""
    if "0" in flags:
        if width is None:
            raise ValueError(f"MissingFormatWidth: %{flags}")
        digits = digits.rjust(int(width) - len(prefix), "0")
    return _pad(prefix + digits, flags, width)


def _fixed(flags: str, width: str | None, places: int, value: str) -> str:
    """%f: the decimal digits (a double's shortest repr, as Java's Double.toString) rounded HALF_UP."""
    number = decimal.Decimal(value)
    if number.is_nan() or number.is_infinite():
        text = "NaN" if number.is_nan() else "Infinity"
        return _pad(text if not number.is_signed() or number.is_nan() else "-" + text, flags, width)
    with decimal.localcontext() as context:
        context.prec = 400
        rounded = abs(number).quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP)
    whole, _, fraction = f"{rounded:f}".partition(".")
    digits = _grouped(whole, flags) + ("." + fraction if places else "")
    return _signed(digits, number.is_signed(), flags, width)  # Java: -0.0 and -0.0001 (%.2f) print "-0.00"
