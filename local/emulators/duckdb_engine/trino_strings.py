"""Trino's string, conversion and a few math and aggregate calls on DuckDB, where DuckDB answers differently or has
no such function: the rewrites (:func:`rewrite`, :func:`cast`, :func:`compare`) and the names they make runnable
(:data:`REWRITTEN`); the Python functions they call are :mod:`.trino_udfs`.

Sources (trinodb/trino): functions/string.md, conversion.md, math.md, aggregate.md at
6f7aadf5a9115ec244aac372e07df5a481a4907f; ``StringFunctions.java`` at 00e6f8b957a4352553a70648bb3ff9daf5d12d5c and
``CharacterStringCasts.java`` at e478e579c66e35d76b2d38590980d4b4010ce2f6.

- ``char(n)`` is space-padded to n (CharacterStringCasts: a varchar cast to char(n) is truncated to n, then padded;
  ``char`` is char(1)); the local engine keeps the padded text, so length(char(20)) is 20 and reverse, substr, lpad
  see the padding (StringFunctions' char variants); ltrim of a char trims the padding too (Trino's char values
  carry no trailing spaces); a char cast to varchar(n) keeps the padding, truncated to n; char comparisons pad both
  sides to the longer length.
- codepoint(varchar(1)) (a longer argument: FUNCTION_NOT_FOUND, as Trino's signature); hamming_distance,
  luhn_check, split with a limit, format, format_number, parse_data_size: :mod:`.trino_udfs`.
- ceil/floor of an integer keep its type (math.md: "[same as input]"); listagg without a separator joins with ''
  (aggregate.md); typeof of an aggregate keeps the query aggregated; every is bool_and; geometric_mean is
  ``exp(sum(ln x) / count)`` as GeometricMeanAggregations.java (at 141a36a96de03b243a8ffcaaa6cc4e18c0443ba9)
  computes it.
"""

from __future__ import annotations

from typing import Any, Final

from sqlglot import exp

from .trino_format import unsupported
from .trino_regexp import rewrite_regexp
from .trino_tree import Refused, athena_only, duck, literal_text
from .trino_types import TrinoType

__all__ = ["REWRITTEN", "cast", "compare", "rewrite"]

#: Calls sqlglot does not know (``exp.Anonymous``) that these rewrites make faithful.
REWRITTEN: Final = frozenset(
    {"codepoint", "hamming_distance", "luhn_check", "format_number", "parse_data_size", "regexp_position"}
    | {"geometric_mean", "every"}
)
_INTEGERS: Final = ("tinyint", "smallint", "integer", "bigint")
#: Java's Character.isWhitespace code points (what Trino's trim functions remove by default; not U+00A0, U+2007,
#: U+202F).
_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680"
    + "".join(map(chr, range(0x2000, 0x200B))).replace("\u2007", "")
    + "\u2028\u2029\u205f\u3000"
)
#: Argument types whose DuckDB text is the text format() reproduces (trino_format).
_FORMAT_KINDS: Final = (*_INTEGERS, "varchar", "char", "decimal", "double", "boolean", "date", "unknown")


def rewrite(node: exp.Expr, rewriter: Any) -> tuple[TrinoType, exp.Expr | None] | None:
    """The Trino type of a call handled here and its DuckDB replacement (None: keep); None when not handled.

    :raises Refused: a call Trino refuses (FUNCTION_NOT_FOUND) or the local engine does not reproduce."""
    type_of = rewriter.type_of
    varchar = TrinoType("varchar")
    regexp = rewrite_regexp(node, varchar)
    if regexp is not None:
        return regexp
    if isinstance(node, exp.Anonymous):
        return _anonymous(node, type_of)
    if isinstance(node, exp.Split) and (node.args.get("limit") is not None or not literal_text(node.expression)):
        limit = node.args.get("limit") or exp.Literal.number(2**31 - 1)  # DuckDB splits '' into characters
        call = duck("trino_split(_a, _d, _l)", _a=node.this, _d=node.expression, _l=limit)
        return TrinoType("array"), call
    if isinstance(node, exp.StrPosition) and node.args.get("occurrence") is not None:
        call = duck("trino_strpos(_a, _b, _n)", _a=node.this, _b=node.args["substr"], _n=node.args["occurrence"])
        return TrinoType("bigint"), call
    if isinstance(node, exp.Format):
        return varchar, _format(node, type_of)
    if isinstance(node, (exp.Ceil, exp.Floor)) and type_of(node.this).is_integer and not node.args.get("decimals"):
        return type_of(node.this), node.this  # math.md: ceil(x) -> [same as input]
    if isinstance(node, exp.GroupConcat) and not isinstance(node.this, exp.Order):  # Trino's grammar (aggregate.md)
        raise Refused("SYNTAX_ERROR", "listagg requires WITHIN GROUP (ORDER BY ...)")
    separator = node.args.get("separator") if isinstance(node, exp.GroupConcat) else None
    if separator is not None and literal_text(separator) is None:  # the grammar takes a string literal only
        raise Refused("SYNTAX_ERROR", "listagg's separator must be a string literal")
    if isinstance(node, exp.GroupConcat) and node.args.get("separator") is None:
        node.set("separator", exp.Literal.string(""))  # aggregate.md, listagg: the separator defaults to ''
        return varchar, None
    if isinstance(node, exp.Trim):
        return varchar, _trim(node, type_of(node.this).name == "char")
    if isinstance(node, exp.Reverse) and type_of(node.this).name in ("varchar", "char"):
        # code points (StringFunctions.reverse; charReverse pads first), not DuckDB's grapheme clusters
        reversed_text = duck("array_to_string(list_reverse(string_split(_a, '')), '')", _a=node.this)
        return (type_of(node.this) if type_of(node.this).name == "char" else varchar), reversed_text
    if isinstance(node, (exp.Upper, exp.Lower)) and type_of(node.this).name == "char":
        return type_of(node.this), None  # the padded text
    return None


def _trim(node: exp.Trim, is_char: bool) -> exp.Expr:
    """trim/ltrim/rtrim: Java's whitespace (Character.isWhitespace: \\u2028 too) unless characters are given; a
    char's padding is not part of its value (StringFunctions' char variants trim it first, and after)."""
    position = (node.text("position") or "BOTH").upper()
    chars = node.args.get("expression")
    source = duck("rtrim(_a, ' ')", _a=node.this) if is_char else node.this
    function = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
    call = duck(f"{function}(_a, _c)", _a=source, _c=chars if chars is not None else exp.Literal.string(_WHITESPACE))
    return duck("rtrim(_a, ' ')", _a=call) if is_char and chars is not None and position != "LEADING" else call


def _anonymous(node: exp.Anonymous, type_of: Any) -> tuple[TrinoType, exp.Expr | None] | None:
    name = node.name.lower()
    args = list(node.expressions)
    if name == "codepoint" and len(args) == 1:
        kind = type_of(args[0])
        if kind.name == "char" and (kind.precision or 1) == 1 or kind.name == "varchar" and kind.precision == 1:
            return TrinoType("integer"), duck("CAST(unicode(_a) AS INTEGER)", _a=args[0])
        shown = f"{kind.name}({kind.precision})" if kind.precision is not None else kind.name
        raise Refused(
            "FUNCTION_NOT_FOUND",
            f"Unexpected parameters ({shown}) for function codepoint. Expected: codepoint(varchar(1))",
        )
    if name == "every" and len(args) == 1:  # aggregate.md: every is bool_and
        return TrinoType("boolean"), duck("bool_and(_a)", _a=args[0])
    if name == "geometric_mean" and len(args) == 1 and type_of(args[0]).name != "real":
        # GeometricMeanAggregations: exp(sum of Math.log(x) / count); log(0) is -Infinity, log(x < 0) NaN
        logs = (
            "CASE WHEN _a IS NULL THEN NULL WHEN _a > 0 THEN ln(_a) WHEN _a = 0 THEN CAST('-inf' AS DOUBLE)"
            " ELSE CAST('nan' AS DOUBLE) END"
        )
        return TrinoType("double"), duck(f"exp(sum({logs}) / count(_a))", _a=args[0])
    if name == "hamming_distance" and len(args) == 2:
        return TrinoType("bigint"), duck("trino_hamming_distance(_a, _b)", _a=args[0], _b=args[1])
    if name == "luhn_check" and len(args) == 1:
        return TrinoType("boolean"), duck("trino_luhn_check(_a)", _a=args[0])
    if name == "parse_data_size" and len(args) == 1:
        return TrinoType("decimal", precision=38, scale=0), duck("trino_parse_data_size(_a)", _a=args[0])
    if name == "format_number" and len(args) == 1:
        kind = type_of(args[0])
        if kind.is_integer:
            return TrinoType("varchar"), duck("trino_format_number(CAST(_a AS BIGINT))", _a=args[0])
        if kind.is_float or kind.name == "decimal":
            return TrinoType("varchar"), duck("trino_format_number_double(CAST(_a AS DOUBLE))", _a=args[0])
        raise athena_only(f"format_number of a {kind.name}")
    return None


def _format(node: exp.Format, type_of: Any) -> exp.Expr:
    """format(pattern, args...): the arguments' text and Trino types to :func:`.trino_format.java_format`."""
    pattern = literal_text(node.this)
    if pattern is None:
        raise athena_only("format with a pattern that is not a literal")
    args = list(node.expressions)
    kinds = [type_of(arg).name for arg in args]
    if any(kind not in _FORMAT_KINDS for kind in kinds):
        raise athena_only(f"format of a {next(k for k in kinds if k not in _FORMAT_KINDS)}")
    missing = unsupported(pattern, kinds)
    if missing is not None:
        raise athena_only(f"format with {missing}")
    texts: exp.Expr = exp.Array(expressions=[duck("CAST(_a AS VARCHAR)", _a=arg) for arg in args])
    if not args:
        texts = duck("CAST([] AS VARCHAR[])")
    return duck("trino_format(_f, _k, _v)", _f=node.this, _k=exp.Literal.string(",".join(kinds)), _v=texts)


def cast(node: exp.Cast, source: TrinoType, target: TrinoType) -> tuple[TrinoType, exp.Expr | None] | None:
    """Casts to and from ``char(n)`` (None: not handled here), CharacterStringCasts' rules."""
    if target.name == "char":
        length = target.precision or 1
        shown = TrinoType("char", precision=length)
        if source.name == "char" and source.precision == length:
            return shown, node.this
        if source.name not in ("varchar", "char", "unknown"):
            raise athena_only(f"a cast of a {source.name} to char({length})")
        function = "TRY_CAST" if isinstance(node, exp.TryCast) else "CAST"
        padded = f"rpad(substring({function}(_a AS VARCHAR), 1, {length}), {length}, ' ')"
        return shown, duck(padded, _a=node.this)
    if source.name == "char" and target.name == "varchar":
        if target.precision is None:
            return target, duck("CAST(_a AS VARCHAR)", _a=node.this)
        return target, duck(f"CAST(substring(_a, 1, {target.precision}) AS VARCHAR)", _a=node.this)
    if source.name == "char":
        raise athena_only(f"a cast of a char to {target.name}")
    return None


def compare(node: exp.Expr, type_of: Any) -> None:
    """A comparison with a char operand: both sides padded to the longer length (Trino coerces to char(max))."""
    if not isinstance(node, exp.Binary):
        if any(type_of(child).name == "char" for child in node.iter_expressions()):
            raise athena_only("BETWEEN or IN with a char operand")
        return
    left, right = type_of(node.left), type_of(node.right)
    if "char" not in (left.name, right.name):
        return
    lengths = [kind.precision for kind in (left, right) if kind.name in ("char", "varchar")]
    if len(lengths) != 2 or None in lengths:
        raise athena_only("a comparison of a char with a value of unknown length")
    width = max(length for length in lengths if length is not None)
    node.set("this", duck(f"rpad(_a, {width}, ' ')", _a=node.left))
    node.set("expression", duck(f"rpad(_a, {width}, ' ')", _a=node.right))
