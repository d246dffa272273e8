"""Trino's array and map functions on DuckDB: the calls whose DuckDB translation answers differently, rewritten.

Sources: Trino's docs ``docs/src/main/sphinx/functions/array.md``, ``map.md``, ``aggregate.md`` (trinodb/trino at
6f7aadf5a9115ec244aac372e07df5a481a4907f) and the implementations they describe, io/trino/operator/scalar/
``ArraySortComparatorFunction.java`` (029c93b693c7a3dbff995062fb9997f4acd86d77: a stable sort; a comparator result
other than -1, 0, 1 fails), ``ArrayIntersectFunction.java`` (0d5f25017969d532503eabe11a73ecd237768659: the distinct
elements in the order of the longer array), ``ArrayTrimFunction.java``, ``ArraysOverlapFunction.java``.

- **Lambdas** (``x -> ...``, ``(k, v) -> ...``) are inlined: a Trino lambda applied to DuckDB expressions is its body
  with the parameters replaced; a parameter count that differs from the function's is INVALID_PARAMETER_USAGE.
- **Arrays**: ``reduce`` (DuckDB's list_reduce with the initial state, then the output function), ``array_sort`` with
  a comparator (stable, by rank), ``zip_with`` (the shorter array padded with NULL), ``trim_array``,
  ``array_histogram``, ``any_match``/``all_match``/``none_match`` (three-valued), ``array_distinct``,
  ``array_union``, ``array_except``, ``array_intersect`` (first occurrences in Trino's order, NULL kept once),
  ``arrays_overlap`` (NULL when nothing non-null is common and either holds a NULL), ``array || element``;
  ``shuffle`` is refused (not reproducible); ``sequence`` stays refused (sqlglot reads DuckDB's ``generate_series``,
  which Athena lacks, as the same call).
- **More arrays**: ``array_position(x, e, instance)`` (the instance-th match, from the end when negative),
  ``array_remove`` (NULL elements stay), ``array_max``/``array_min`` (NULL when an element is),
  ``repeat`` (Trino's is the array function: ``repeat('a', 2)`` is ``[a, a]``), ``reverse`` of an array, ``slice``
  (a negative start counts from the end; ArraySliceFunction).
- **Maps**: ``split_to_map``/``split_to_multimap`` (Python functions on the connection), ``map_values``, ``map_filter``, ``transform_keys`` (a duplicate or NULL key fails as in Trino), ``transform_values``,
  ``map_zip_with``, ``multimap_from_entries``, ``map_concat``; the aggregates ``map_agg`` (NULL keys skipped, the
  first value of a key kept), ``multimap_agg``, ``histogram``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import duckdb
from sqlglot import exp

from .trino_tree import Refused, athena_only, duck
from .trino_types import TrinoType

__all__ = ["HANDLED_CALLS", "array_comparison", "collection_call", "element_concat", "register", "subscript"]

#: Calls sqlglot does not know (``exp.Anonymous``) that :func:`collection_call` rewrites.
HANDLED_CALLS: Final = frozenset(
    {"zip_with", "trim_array", "array_histogram", "any_match", "all_match", "none_match", "array_union",
     "arrays_overlap", "map_filter", "transform_keys", "transform_values", "map_zip_with", "multimap_from_entries",
     "map_concat", "map_agg", "multimap_agg", "histogram", "map_values", "split_to_multimap"}
)  # fmt: skip
#: DuckDB type names (in typeof's text) whose varchar casts are not Trino's (Java doubles, fraction digits, ...).
_NOT_JOINED: Final = ("DOUBLE", "FLOAT", "TIME", "INTERVAL", "BLOB", "STRUCT", "MAP", "[][]", "UNION")
_AGGREGATES: Final = frozenset({"map_agg", "multimap_agg", "histogram"})
#: The order-preserving distinct of a list: an element is kept where it first occurs (NULL once).
_DISTINCT: Final = "list_filter(_a, lambda e__, i__: list_position(_a[1:i__ - 1], e__) IS NULL)"


def collection_call(node: exp.Expr, type_of: Callable[..., TrinoType]) -> tuple[TrinoType | None, Any] | None:
    """The Trino type (None: DuckDB's) and DuckDB replacement of an array or map call, or None when not handled.

    :raises Refused: INVALID_PARAMETER_USAGE (a lambda of the wrong arity), INVALID_FUNCTION_ARGUMENT (a literal
        argument Trino rejects) or NOT_SUPPORTED (not reproducible locally)."""
    if isinstance(node, exp.Reduce):
        merge, finish = node.args.get("merge"), node.args.get("finish")
        if not isinstance(merge, exp.Lambda) or not isinstance(finish, exp.Lambda):
            raise athena_only("reduce without its two lambdas")
        _arity(merge, 2, "reduce")
        state = exp.Lambda(this=merge.this.copy(), expressions=[p.copy() for p in merge.expressions])
        reduced = exp.Anonymous(this="list_reduce", expressions=[node.this.copy(), state, node.args["initial"].copy()])
        return None, apply_lambda(finish, [reduced], "reduce")
    if isinstance(node, (exp.Transform, exp.ArrayFilter)) and isinstance(node.expression, exp.Lambda):
        _arity(node.expression, 1, "transform" if isinstance(node, exp.Transform) else "filter")  # DuckDB: (x, index)
        return None
    if isinstance(node, exp.ArraySort) and node.args.get("expression") is not None:
        return None, _sort_with(node.this, node.args["expression"])
    if isinstance(node, exp.ArrayRemove):  # ArrayRemoveFunction: NULL elements stay; a NULL value gives NULL
        if type_of(node.expression).name in ("array", "map", "row"):
            raise athena_only("array_remove of a nested value")
        template = "CASE WHEN _a IS NULL OR _x IS NULL THEN NULL ELSE list_filter(_a, lambda u__: u__ IS NULL OR u__ <> _x) END"
        return None, duck(template, _a=node.this, _x=node.expression)
    if isinstance(node, (exp.ArrayMax, exp.ArrayMin)):  # array.md: NULL when an element is NULL
        call = "list_max" if isinstance(node, exp.ArrayMax) else "list_min"
        return None, duck(f"CASE WHEN list_position(_a, NULL) IS NOT NULL THEN NULL ELSE {call}(_a) END", _a=node.this)
    if isinstance(node, exp.Repeat):  # Trino's repeat is the array function (RepeatFunction: 0 to 10000 copies)
        template = (
            "CASE WHEN _n < 0 THEN error('INVALID_FUNCTION_ARGUMENT: count argument of repeat function must be"
            " greater than or equal to 0') WHEN _n > 10000 THEN error('INVALID_FUNCTION_ARGUMENT: count argument of"
            " repeat function must be less than or equal to 10000') ELSE list_transform(range(_n), lambda u__: _a) END"
        )
        return None, duck(template, _a=node.this, _n=node.args["times"])
    if isinstance(node, exp.Reverse) and type_of(node.this).name == "array":
        return None, duck("list_reverse(_a)", _a=node.this)
    if isinstance(node, exp.StrToMap):  # split_to_map(string, entryDelimiter, keyValueDelimiter)
        args = [node.this, node.args.get("pair_delim"), node.args.get("key_value_delim")]
        if any(arg is None for arg in args):
            raise athena_only("split_to_map without both delimiters")
        return TrinoType("map"), exp.Anonymous(this="trino_split_to_map", expressions=[a.copy() for a in args])
    if isinstance(node, exp.ArraySlice) and node.args.get("end") is not None:  # ArraySliceFunction
        start, length = node.args["start"], node.args["end"]
        first = duck("CASE WHEN _s < 0 THEN len(_a) + _s + 1 ELSE _s END", _a=node.this, _s=start)
        template = (
            "CASE WHEN _a IS NULL OR _s IS NULL OR _l IS NULL THEN NULL"
            " WHEN _l < 0 THEN error('INVALID_FUNCTION_ARGUMENT: length must be greater than or equal to 0')"
            " WHEN _s = 0 THEN error('INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1')"
            " ELSE list_filter(_a, lambda e__, i__: _f >= 1 AND i__ >= _f AND i__ < least(_f + _l, len(_a) + 1)) END"
        )
        return None, duck(template, _a=node.this, _s=start, _l=length, _f=first)
    instance = node.args.get("zero_based") if isinstance(node, exp.ArrayPosition) else None
    # sqlglot keeps the 3rd argument as "zero_based"; in the subscript a cast, or sqlglot would shift a literal by 1
    if isinstance(instance, exp.Expr) and not isinstance(instance, exp.Boolean):
        found = duck("list_filter(range(1, len(_a) + 1), lambda i__: _a[i__] = _x)", _a=node.this, _x=node.expression)
        template = (
            "CASE WHEN _a IS NULL OR _x IS NULL OR _n IS NULL THEN NULL"
            " WHEN _n = 0 THEN error('INVALID_FUNCTION_ARGUMENT: array_position cannot take a 0-valued instance"
            " argument.') WHEN _n > 0 THEN CAST(coalesce(_p[CAST(_n AS BIGINT)], 0) AS BIGINT)"
            " WHEN len(_p) + _n + 1 < 1 THEN CAST(0 AS BIGINT) ELSE CAST(coalesce(_p[len(_p) + _n + 1], 0) AS BIGINT) END"
        )
        return TrinoType("bigint"), duck(template, _a=node.this, _x=node.expression, _n=instance, _p=found)
    if isinstance(node, exp.ArrayToString):  # array_join casts elements to varchar: DuckDB's text is Trino's for these
        shown = " OR ".join(f"contains(typeof(_a), '{mark}')" for mark in _NOT_JOINED)
        message = "NOT_SUPPORTED: runs on Athena only: array_join of doubles, reals, times, timestamps or nested values"
        return None, duck(f"CASE WHEN {shown} THEN error('{message}') ELSE _j END", _a=node.this, _j=node.copy())
    if isinstance(node, exp.Shuffle):
        raise athena_only("shuffle (a random permutation)")
    if isinstance(node, exp.ArrayDistinct):
        return None, duck(f"CASE WHEN _a IS NULL THEN NULL ELSE {_DISTINCT} END", _a=node.this)
    if isinstance(node, exp.ArrayExcept):  # the distinct elements of x not in y, in x's order
        template = f"CASE WHEN _b IS NULL THEN NULL ELSE list_filter({_DISTINCT}, lambda e__: list_position(_b, e__) IS NULL) END"
        return None, duck(template, _a=node.this, _b=node.expression)
    if isinstance(node, exp.ArrayIntersect):
        arrays = node.expressions or [node.this, node.args.get("expression")]
        if len(arrays) != 2:
            raise athena_only("array_intersect of other than two arrays")
        left, right = arrays
        longer = "list_filter(list_filter(_a, lambda e__, i__: list_position(_a[1:i__ - 1], e__) IS NULL), lambda e__: list_position(_b, e__) IS NOT NULL)"
        shorter = longer.replace("_a", "_t").replace("_b", "_a").replace("_t", "_b")
        template = (
            f"CASE WHEN _a IS NULL OR _b IS NULL THEN NULL WHEN len(_a) < len(_b) THEN {shorter} ELSE {longer} END"
        )
        return None, duck(template, _a=left, _b=right)
    if isinstance(node, exp.Anonymous) and node.name.lower() in HANDLED_CALLS:
        return _named_call(node.name.lower(), node)
    return None


def element_concat(node: exp.Expr, parts: list[exp.Expr], kinds: list[TrinoType]) -> exp.Expr | None:
    """``ARRAY[1] || 2`` and ``2 || ARRAY[1]`` (array.md, "|| operator"): the element appended or prepended; None
    when `parts` are not an array and a non-array."""
    if len(parts) != 2 or [k.name == "array" for k in kinds].count(True) != 1:
        return None
    if kinds[0].name == "array" and kinds[1].name not in ("unknown", "varchar"):
        return duck("list_append(_a, _b)", _a=parts[0], _b=parts[1])
    if kinds[1].name == "array" and kinds[0].name not in ("unknown", "varchar"):
        return duck("list_prepend(_a, _b)", _a=parts[0], _b=parts[1])
    return None


def array_comparison(node: exp.Expr, type_of: Callable[..., TrinoType]) -> exp.Expr | None:
    """``a = b`` / ``a <> b`` of arrays (Trino's array equality): false when the lengths or two non-null elements
    differ, else NULL when an element is NULL, else true (DuckDB: NULL elements compare as values). Nested arrays,
    rows and maps inside are refused when the query runs. None when `node` compares no arrays."""
    if not isinstance(node, (exp.EQ, exp.NEQ)) or "array" not in (
        type_of(node.this).name,
        type_of(node.expression).name,
    ):
        return None
    nested = " OR ".join(
        f"contains(typeof({side}), '{mark}')" for side in ("_a", "_b") for mark in ("[][]", "STRUCT", "MAP")
    )
    template = (
        "CASE WHEN _a IS NULL OR _b IS NULL THEN NULL"
        f" WHEN {nested} THEN error('NOT_SUPPORTED: runs on Athena only: comparing arrays of arrays, rows or maps')"
        " WHEN len(_a) <> len(_b) THEN false"
        " WHEN len(list_filter(range(1, len(_a) + 1), lambda i__: _a[i__] <> _b[i__])) > 0 THEN false"
        " WHEN len(list_filter(range(1, len(_a) + 1), lambda i__: _a[i__] IS NULL OR _b[i__] IS NULL)) > 0 THEN NULL"
        " ELSE true END"
    )
    equal = duck(template, _a=node.this, _b=node.expression)
    return equal if isinstance(node, exp.EQ) else exp.Not(this=exp.Paren(this=equal))


def subscript(node: exp.Bracket, container: TrinoType) -> tuple[TrinoType | None, Any] | None:
    """``a[i]`` and ``m[k]`` as Trino's ArraySubscriptOperator and map subscript fail: index 0 ("SQL array indices
    start at 1"), a negative index, past the end, a missing key; element_at(a, 0) fails too, element_at is NULL
    past either end. None: not an array or map subscript."""
    index = node.expressions[0]
    trino_index = index if node.args.get("offset") else _written_index(index)
    if node.args.get("safe"):  # element_at
        if container.name != "array":
            return None
        template = "CASE WHEN _i = 0 THEN error('INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1') ELSE _b END"
        return None, duck(template, _i=trino_index, _b=node.copy())
    if container.name == "map":
        template = (
            "CASE WHEN map_contains(_m, _k) THEN _b"
            " ELSE error('INVALID_FUNCTION_ARGUMENT: Key not present in map: ' || _k) END"
        )
        return None, duck(template, _m=node.this, _k=index, _b=node.copy())
    if container.name != "array":
        return None
    template = (
        "CASE WHEN _i = 0 THEN error('INVALID_FUNCTION_ARGUMENT: SQL array indices start at 1')"
        " WHEN _i < 0 THEN error('INVALID_FUNCTION_ARGUMENT: Array subscript is negative: ' || _i)"
        " WHEN _i > len(_a) THEN error('INVALID_FUNCTION_ARGUMENT: Array subscript must be less than or equal to"
        " array length: ' || _i || ' > ' || len(_a)) ELSE _b END"
    )
    return None, duck(template, _a=node.this, _i=trino_index, _b=node.copy())


def _written_index(index: exp.Expr) -> exp.Expr:
    """The index of ``a[k]`` as the query wrote it: sqlglot keeps an integer literal as k - 1 (its generator adds the
    1 back), any other expression as written."""
    number = index.this if isinstance(index, exp.Neg) else index
    if isinstance(number, exp.Literal) and number.is_int:
        value = int(number.this) * (-1 if isinstance(index, exp.Neg) else 1)
        return exp.Literal.number(value + 1)
    return index


def apply_lambda(function: exp.Expr, arguments: list[exp.Expr], name: str) -> exp.Expr:
    """The body of the Trino lambda `function` with its parameters replaced by `arguments` (DuckDB expressions).

    :raises Refused: INVALID_PARAMETER_USAGE when the counts differ; NOT_SUPPORTED when a nested lambda rebinds a
        parameter's name or `function` is not a lambda."""
    if not isinstance(function, exp.Lambda):
        raise athena_only(f"{name} with a function argument that is not a lambda")
    _arity(function, len(arguments), name)
    bound = {param.name.lower(): argument for param, argument in zip(function.expressions, arguments, strict=True)}
    for inner in function.this.find_all(exp.Lambda):
        if any(param.name.lower() in bound for param in inner.expressions):
            raise athena_only(f"{name} with a nested lambda that reuses a parameter name")

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in bound:
            return exp.Paren(this=bound[node.name.lower()].copy())
        if isinstance(node, exp.Column) and node.table.lower() in bound and not node.args.get("db"):
            return exp.Dot(this=exp.Paren(this=bound[node.table.lower()].copy()), expression=node.this.copy())
        if isinstance(node, exp.Identifier) and node.name.lower() in bound and _is_reference(node):
            return exp.Paren(this=bound[node.name.lower()].copy())
        return node

    return function.this.copy().transform(substitute)


def _is_reference(node: exp.Identifier) -> bool:
    """An identifier that names a lambda parameter (not a column's, field's, alias' or type's name)."""
    parent = node.parent
    if isinstance(parent, exp.Dot):
        return node.arg_key == "this"
    return not isinstance(parent, (exp.Column, exp.Lambda, exp.Alias, exp.DataType, exp.Table, exp.TableAlias))


def _arity(function: exp.Lambda, count: int, name: str) -> None:
    if len(function.expressions) != count:
        raise Refused(
            "INVALID_PARAMETER_USAGE",
            f"Expected a lambda that takes {count} argument(s) for {name} but got {len(function.expressions)}",
        )


def _lambda(params: str, body: exp.Expr) -> exp.Lambda:
    """A DuckDB lambda over `params` (comma separated) whose body is `body`."""
    return exp.Lambda(this=body, expressions=[exp.to_identifier(p.strip()) for p in params.split(",")])


def _sort_with(array: exp.Expr, comparator: exp.Expr) -> exp.Expr:
    """array_sort(a, (x, y) -> c): element i goes to rank 1 + #{j: c(a[j], a[i]) < 0 or (= 0 and j < i)} (a stable
    sort, as Java's List.sort, for a consistent order). A comparator that returns something else than -1, 0, 1, or
    whose ranks collide, is refused when the query runs: Trino fails or answers by the pairs its TimSort compares."""
    a = exp.Paren(this=array.copy())
    compare = apply_lambda(comparator, [duck("_a[j__]", _a=a), duck("_a[i__]", _a=a)], "array_sort")
    # identical elements are indistinguishable in the result: their order is the input's, whatever `c` says
    before = duck(
        "CASE WHEN _a[j__] IS NOT DISTINCT FROM _a[i__] THEN j__ < i__ ELSE _c < 0 OR (_c = 0 AND j__ < i__) END",
        _a=a,
        _c=compare,
    )
    valid = duck("i__ = j__ OR coalesce(_c IN (-1, 0, 1), false)", _c=compare)
    ranks = duck(
        "list_transform(range(1, len(_a) + 1), lambda i__: 1 + len(list_filter(range(1, len(_a) + 1), lambda j__: _p)))",
        _a=a,
        _p=before,
    )
    checked = duck(
        "list_bool_and(list_transform(range(1, len(_a) + 1), lambda i__: list_bool_and(list_transform("
        "range(1, len(_a) + 1), lambda j__: _v))))",
        _a=a,
        _v=valid,
    )
    refused = "NOT_SUPPORTED: runs on Athena only: array_sort with a comparator that"
    template = (
        "CASE WHEN _a IS NULL THEN NULL WHEN len(_a) < 2 THEN _a"
        f" WHEN NOT _ok THEN error('{refused} does not return -1, 0 or 1 for every pair of elements')"
        f" WHEN len(list_distinct(_r)) < len(_a) THEN error('{refused} is not a consistent order')"
        " ELSE list_transform(range(1, len(_a) + 1), lambda k__: _a[list_position(_r, k__)]) END"
    )
    return duck(template, _a=a, _r=ranks, _ok=checked)


def _named_call(name: str, node: exp.Anonymous) -> tuple[TrinoType | None, Any]:
    args = list(node.expressions)
    if name in _AGGREGATES and isinstance(node.parent, (exp.Window, exp.Filter)):
        raise athena_only(f"{name} as a window function or with FILTER")
    if name in _AGGREGATES and any(isinstance(a, exp.Distinct) for a in args):
        raise athena_only(f"{name} with DISTINCT")
    if name == "zip_with":  # array.md: the shorter array is padded with NULL
        a, b, function = _args(name, args, 3)
        body = apply_lambda(function, [duck("_a[i__]", _a=a), duck("_b[i__]", _b=b)], name)
        template = "CASE WHEN _a IS NULL OR _b IS NULL THEN NULL ELSE list_transform(range(1, greatest(len(_a), len(_b)) + 1), lambda i__: _f) END"
        return None, duck(template, _a=a, _b=b, _f=body)
    if name == "trim_array":  # ArrayTrimFunction: size must be in [0, cardinality]
        a, size = _args(name, args, 2)
        template = (
            "CASE WHEN _n < 0 THEN error('INVALID_FUNCTION_ARGUMENT: size must not be negative: ' || _n)"
            " WHEN _n > len(_a) THEN error('INVALID_FUNCTION_ARGUMENT: size must not exceed array cardinality '"
            " || len(_a) || ': ' || _n) ELSE _a[1:len(_a) - _n] END"
        )
        return None, duck(template, _a=a, _n=size)
    if name == "array_histogram":  # NULL elements are not counted
        (a,) = _args(name, args, 1)
        return None, duck(
            "map_from_entries(list_transform(map_entries(list_histogram(_a)), lambda e__: {'key': e__.key, 'value': CAST(e__.value AS BIGINT)}))",
            _a=a,
        )
    if name in ("any_match", "all_match", "none_match"):
        a, function = _args(name, args, 2)
        results = duck("list_transform(_a, lambda x__: _f)", _a=a, _f=apply_lambda(function, [exp.column("x__")], name))
        decisive, verdict = {
            "any_match": ("v__", "true"),
            "all_match": ("NOT v__", "false"),
            "none_match": ("v__", "false"),
        }[name]
        template = (
            f"CASE WHEN _r IS NULL THEN NULL WHEN len(list_filter(_r, lambda v__: {decisive})) > 0 THEN {verdict}"
            f" WHEN len(list_filter(_r, lambda v__: v__ IS NULL)) > 0 THEN NULL ELSE NOT {verdict} END"
        )
        return TrinoType("boolean"), duck(template, _r=results)
    if name == "array_union":
        a, b = _args(name, args, 2)
        template = f"CASE WHEN _a IS NULL OR _b IS NULL THEN NULL ELSE {_DISTINCT.replace('_a', '_j')} END"
        return None, duck(template, _a=a, _b=b, _j=duck("list_concat(_a, _b)", _a=a, _b=b))
    if name == "arrays_overlap":
        a, b = _args(name, args, 2)
        template = (
            "CASE WHEN _a IS NULL OR _b IS NULL THEN NULL"
            " WHEN len(list_filter(_a, lambda e__: e__ IS NOT NULL AND list_position(_b, e__) IS NOT NULL)) > 0 THEN true"
            " WHEN list_position(_a, NULL) IS NOT NULL OR list_position(_b, NULL) IS NOT NULL THEN NULL ELSE false END"
        )
        return TrinoType("boolean"), duck(template, _a=a, _b=b)
    return _map_call(name, args)


def _map_call(name: str, args: list[exp.Expr]) -> tuple[TrinoType | None, Any]:
    entry_key, entry_value = duck("e__.key"), duck("e__.value")
    if name == "map_filter":
        m, function = _args(name, args, 2)
        keep = apply_lambda(function, [entry_key, entry_value], name)
        return None, duck(
            "map_from_entries(list_filter(map_entries(_m), lambda e__: coalesce(_p, false)))", _m=m, _p=keep
        )
    if name == "transform_values":
        m, function = _args(name, args, 2)
        value = apply_lambda(function, [entry_key, entry_value], name)
        template = "map_from_entries(list_transform(map_entries(_m), lambda e__: {'key': e__.key, 'value': _v}))"
        return None, duck(template, _m=m, _v=value)
    if name == "transform_keys":  # map.md; Trino: "map key cannot be null", "Duplicate map keys (k) are not allowed"
        m, function = _args(name, args, 2)
        key = apply_lambda(function, [entry_key, entry_value], name)
        entries = duck("list_transform(map_entries(_m), lambda e__: {'key': _k, 'value': e__.value})", _m=m, _k=key)
        return None, _checked_entries(entries)
    if name == "map_zip_with":  # keys of either map; a value missing from one map is NULL
        m1, m2, function = _args(name, args, 3)
        value = apply_lambda(function, [duck("k__"), duck("_m[k__]", _m=m1), duck("_m[k__]", _m=m2)], name)
        template = (
            "CASE WHEN _a IS NULL OR _b IS NULL THEN NULL ELSE map_from_entries(list_transform("
            "list_distinct(list_concat(map_keys(_a), map_keys(_b))), lambda k__: {'key': k__, 'value': _v})) END"
        )
        return None, duck(template, _a=m1, _b=m2, _v=value)
    if name == "multimap_from_entries":
        (entries,) = _args(name, args, 1)
        return None, _multimap(entries, duck("struct_extract_at(e__, 1)"), duck("struct_extract_at(e__, 2)"))
    if name == "map_values":
        (m,) = _args(name, args, 1)
        return None, duck("map_values(_m)", _m=m)
    if name == "split_to_multimap":
        return TrinoType("map"), exp.Anonymous(
            this="trino_split_to_multimap", expressions=[a.copy() for a in _args(name, args, 3)]
        )
    if name == "map_concat":  # map.md: a key in several maps takes its value from the last one
        if not args:
            raise Refused("FUNCTION_NOT_FOUND", "There must be two or more arguments to map_concat")
        return None, exp.Anonymous(this="map_concat", expressions=[a.copy() for a in args])
    if name == "map_agg":  # aggregate.md; NULL keys are skipped, the first value of a key is kept
        key, value = _args(name, args, 2)
        pairs = duck("list({'key': _k, 'value': _v}) FILTER (WHERE _k IS NOT NULL)", _k=key, _v=value)
        kept = duck(
            "list_filter(_l, lambda e__, i__: list_position(list_transform(_l[1:i__ - 1], lambda p__: p__.key), e__.key) IS NULL)",
            _l=pairs,
        )
        return None, duck("map_from_entries(_e)", _e=kept)
    if name == "multimap_agg":
        key, value = _args(name, args, 2)
        pairs = duck("list({'key': _k, 'value': _v}) FILTER (WHERE _k IS NOT NULL)", _k=key, _v=value)
        return None, _multimap(pairs, entry_key, entry_value)
    if name == "histogram":
        (value,) = _args(name, args, 1)
        counted = duck("histogram(_a)", _a=value)
        template = "map_from_entries(list_transform(map_entries(_h), lambda e__: {'key': e__.key, 'value': CAST(e__.value AS BIGINT)}))"
        return None, duck(template, _h=counted)
    raise athena_only(name)


def _multimap(entries: exp.Expr, key: exp.Expr, value: exp.Expr) -> exp.Expr:
    """A map of each distinct key (in first-occurrence order) to the list of its values."""
    keys = duck("list_transform(_l, lambda e__: _k)", _l=entries, _k=key)
    template = (
        "CASE WHEN _l IS NULL THEN NULL WHEN list_position(_keys, NULL) IS NOT NULL"
        " THEN error('INVALID_FUNCTION_ARGUMENT: map key cannot be null') ELSE map_from_entries(list_transform("
        "list_filter(_keys, lambda x__, i__: list_position(_keys[1:i__ - 1], x__) IS NULL), lambda u__: {'key': u__, 'value':"
        " list_transform(list_filter(_l, lambda e__: _k = u__), lambda e__: _v)})) END"
    )
    return duck(template, _l=entries, _keys=keys, _k=key, _v=value)


def _checked_entries(entries: exp.Expr) -> exp.Expr:
    """map_from_entries of computed entries with Trino's failures for a NULL or a duplicate key."""
    keys = duck("list_transform(_e, lambda e__: e__.key)", _e=entries)
    template = (
        "CASE WHEN _e IS NULL THEN NULL WHEN list_position(_k, NULL) IS NOT NULL"
        " THEN error('INVALID_FUNCTION_ARGUMENT: map key cannot be null')"
        " WHEN len(list_distinct(_k)) < len(_k) THEN error('INVALID_FUNCTION_ARGUMENT: Duplicate map keys ('"
        " || CAST(list_filter(_k, lambda x__, i__: list_position(_k[1:i__ - 1], x__) IS NOT NULL)[1] AS VARCHAR)"
        " || ') are not allowed') ELSE map_from_entries(_e) END"
    )
    return duck(template, _e=entries, _k=keys)


def _args(name: str, args: list[exp.Expr], count: int) -> list[exp.Expr]:
    if len(args) != count:
        raise Refused("FUNCTION_NOT_FOUND", f"Unexpected parameters ({len(args)} arguments) for function {name}")
    return args


def _split_entries(text: str | None, entry: str | None, pair: str | None) -> list[tuple[str, str]] | None:
    """The (key, value) entries of split_to_map / split_to_multimap (SplitToMultimapFunction.java at
    03d8e5abc686c5c4a9f96ca14db07e2aed880174): entries end at each entry delimiter (a trailing one ends the last);
    each holds the key-value delimiter exactly once."""
    if text is None or entry is None or pair is None:
        return None
    if not entry:
        raise ValueError("INVALID_FUNCTION_ARGUMENT: entryDelimiter is empty")
    if not pair:
        raise ValueError("INVALID_FUNCTION_ARGUMENT: keyValueDelimiter is empty")
    if entry == pair:
        raise ValueError("INVALID_FUNCTION_ARGUMENT: entryDelimiter and keyValueDelimiter must not be the same")
    entries, start = [], 0
    while start < len(text):
        end = text.find(entry, start)
        item = text[start:] if end < 0 else text[start:end]
        key, found, value = item.partition(pair)
        if not found or pair in value:
            raise ValueError(
                f"INVALID_FUNCTION_ARGUMENT: Key-value delimiter must appear exactly once in each entry. Bad input: {item}"
            )
        entries.append((key, value))
        if end < 0:
            break
        start = end + len(entry)
    return entries


def _split_to_map(text: str | None, entry: str | None, pair: str | None) -> dict[str, str] | None:
    entries = _split_entries(text, entry, pair)
    if entries is None:
        return None
    result: dict[str, str] = {}
    for key, value in entries:
        if key in result:
            raise ValueError(f"INVALID_FUNCTION_ARGUMENT: Duplicate keys ({key}) are not allowed")
        result[key] = value
    return result


def _split_to_multimap(text: str | None, entry: str | None, pair: str | None) -> dict[str, list[str]] | None:
    entries = _split_entries(text, entry, pair)
    if entries is None:
        return None
    result: dict[str, list[str]] = {}
    for key, value in entries:
        result.setdefault(key, []).append(value)
    return result


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Create the Python functions the rewrites call (split_to_map, split_to_multimap) on a new connection."""
    varchars = ["VARCHAR", "VARCHAR", "VARCHAR"]
    for name, function, result in (
        ("trino_split_to_map", _split_to_map, "MAP(VARCHAR, VARCHAR)"),
        ("trino_split_to_multimap", _split_to_multimap, "MAP(VARCHAR, VARCHAR[])"),
    ):
        con.create_function(name, function, varchars, duckdb.sqltype(result), null_handling="special")  # type: ignore[arg-type]
