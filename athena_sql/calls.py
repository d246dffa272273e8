"""Function calls, judged as Trino resolves them: the name against Athena engine v3's function list
(:mod:`athena_sql.functions`: unknown -> ``FUNCTION_NOT_FOUND`` "Function 'x' not registered", with "did you mean"),
the number of arguments against its documented forms, and for the functions :mod:`athena_sql.signatures` types,
the argument types (``FUNCTION_NOT_FOUND`` "Unexpected parameters (varchar(3), varchar(10)) for function date_trunc.
Expected: ...", the words of Trino's function resolver, io/trino/metadata/FunctionResolver.java, as its error
messages read in Trino's code and tests; FUNCTION_NOT_FOUND from io/trino/spi/StandardErrorCode.java at
trinodb/trino@029c93b693c7a3dbff995062fb9997f4acd86d77).

The call is read from the **tokens** (the name as written, the arguments between its brackets), because sqlglot
rewrites many calls into nodes of its own (``date_trunc`` into ``TimestampTrunc``, arguments reordered, DuckDB names
mapped onto Trino's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from athena_sql import functions, signatures
from athena_sql.source import Source
from athena_sql.types import TrinoType, can_coerce, common_super_type, literal_number, parse_type, split_types

__all__ = ["Call", "find_call", "function_type", "judge", "lambda_parameter_types", "not_found"]

#: Other dialects' functions and Trino's way (for "did you mean"); names Trino has are never here.
FOREIGN = {
    "strftime": "format_datetime(ts, 'yyyy-MM-dd') or date_format(ts, '%Y-%m-%d')",
    "strptime": "date_parse(string, format)",
    "epoch_ms": "to_unixtime(ts) * 1000 or from_unixtime(ms / 1000e0)",
    "epoch": "to_unixtime(ts)",
    "datediff": "date_diff(unit, a, b)",
    "dateadd": "date_add(unit, value, ts)",
    "date_sub": "date_add(unit, -value, ts)",
    "date_part": "extract(field FROM ts) or year(ts), hour(ts) ...",
    "datepart": "extract(field FROM ts)",
    "ifnull": "coalesce(a, b)",
    "nvl": "coalesce(a, b)",
    "isnull": "x IS NULL",
    "len": "length(string)",
    "string_agg": "array_join(array_agg(x), ',') or listagg(x, ',') WITHIN GROUP (ORDER BY x)",
    "group_concat": "array_join(array_agg(x), ',')",
    "list": "array_agg(x)",
    "regexp_matches": "regexp_like(string, pattern)",
    "instr": "strpos(string, substring)",
    "ilike": "lower(x) LIKE lower(pattern)",
    "today": "current_date",
    "getdate": "current_timestamp",
    "sysdate": "current_timestamp",
    "unix_timestamp": "to_unixtime(ts)",
    "median": "approx_percentile(x, 0.5)",
    "quantile": "approx_percentile(x, q)",
    "countif": "count_if(condition)",
    "generate_series": "sequence(start, stop[, step]), with UNNEST for rows",
    "range": "sequence(start, stop[, step])",
    "array_length": "cardinality(array)",
    "list_value": "ARRAY[...]",
    "left": "substr(s, 1, n)",
    "right": "substr(s, -n)",
    "iif": "if(condition, a, b)",
    "nvl2": "if(x IS NOT NULL, a, b)",
    "decode": "CASE x WHEN ... THEN ... END",
    "charindex": "strpos(string, substring)",
    "char_length": "length(string)",
    "approx_quantile": "approx_percentile(x, q)",
    "percentile_cont": "approx_percentile(x, q)",
    "arg_max": "max_by(x, y)",
    "arg_min": "min_by(x, y)",
    "list_distinct": "array_distinct(array)",
    "list_contains": "contains(array, x)",
    "array_contains": "contains(array, x)",
    "array_has": "contains(array, x)",
    "regexp_split_to_array": "regexp_split(string, pattern)",
    "string_split": "split(string, delimiter)",
    "str_split": "split(string, delimiter)",
    "string_to_array": "split(string, delimiter)",
    "array_to_string": "array_join(array, delimiter)",
    "trunc": "truncate(x) or date_trunc(unit, ts)",
    "datetrunc": "date_trunc(unit, ts)",
    "json_extract_path_text": "json_extract_scalar(json, '$.a.b')",
    "btrim": "trim(string)",
    "initcap": "upper(substr(s, 1, 1)) || lower(substr(s, 2))",
    "make_timestamp": "from_iso8601_timestamp(text) or date_parse(text, format)",
    "unnest": "CROSS JOIN UNNEST(array) AS t(x) in FROM",
    "apply": "transform(ARRAY[x], v -> ...)[1], or the expression itself",
}
#: Keywords that name no Trino function, yet are called as functions in other dialects (``left(s, 3)``), and
#: ``apply``: a function of Trino's tests only (TestAnalyzer registers ApplyFunction itself; SystemFunctionBundle.java
#: at trinodb/trino@01767030 does not), so Athena does not have it.
_KEYWORD_CALLS = frozenset({TokenType.LEFT, TokenType.RIGHT, TokenType.GLOB, TokenType.APPLY})
#: The operands of special forms that are typed as the function's argument list, in order (tree argument names).
SPECIAL_OPERANDS: dict[type[exp.Expr], tuple[str, ...]] = {
    exp.Substring: ("this", "start", "length"),
    exp.Overlay: ("this", "expression", "from_", "for_"),
}
#: Keywords that open a special form with their own syntax inside the brackets (not an argument list).
_SPECIAL_WORDS = frozenset({TokenType.FROM, TokenType.IN, TokenType.FOR, TokenType.ALIAS, TokenType.USING})


@dataclass(frozen=True)
class Call:
    """A call as written: ``name`` (lowercase), the token index of the name, and each argument's token range."""

    name: str
    name_index: int
    arguments: tuple[tuple[int, int], ...]
    special: bool  # FROM/IN/FOR/AS inside the brackets: a special form's syntax, not a list
    distinct: bool = False  # f(DISTINCT x)
    ordered: bool = False  # f(x ORDER BY y)


def find_call(source: Source, node: exp.Expr) -> Call | None:
    """The call ``node`` is written as (``name(args)`` in the text), or ``None`` (an operator, a special syntax)."""
    tokens = source.tokens
    meta = node.meta or {}
    index = source.token_at(int(meta["start"])) if "start" in meta else None
    if index is None:
        offset = source.node_offset(node)
        start = source.token_at(offset) if offset is not None else None
        if start is None or start < 2 or tokens[start - 1].token_type != TokenType.L_PAREN:
            return None
        index = start - 2
    if index + 1 >= len(tokens) or tokens[index + 1].token_type != TokenType.L_PAREN:
        return None
    name_token = tokens[index]
    called = (TokenType.VAR, TokenType.IDENTIFIER, *_KEYWORD_CALLS)
    if name_token.token_type not in called and functions.lookup(name_token.text) is None:
        return None  # a keyword before a bracket (``ALL (``, ``IN (``), not a function's name
    if index > 0 and tokens[index - 1].token_type == TokenType.DOT:
        return None  # a qualified name (catalog.schema.f): not the built-in list's to judge
    if index > 0 and tokens[index - 1].text.upper() in ("RETURNING", "AS"):
        return None  # a type (``RETURNING varchar(100)``, ``AS decimal(10, 2)``)
    arguments: list[tuple[int, int]] = []
    depth, first, special, ordered = 0, index + 2, False, False
    position = index + 2
    while position < len(tokens):
        token = tokens[position]
        kind = token.token_type
        if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET):
            if depth == 0:
                if position > first:
                    arguments.append((first, position - 1))
                break
            depth -= 1
        elif depth == 0 and kind == TokenType.COMMA:
            arguments.append((first, position - 1))
            first = position + 1
        elif depth == 0 and kind == TokenType.ORDER_BY:
            if position > first:
                arguments.append((first, position - 1))
            first, ordered = len(tokens), True  # the rest is the ORDER BY of an aggregate
        elif depth == 0 and kind in _SPECIAL_WORDS:
            special = True
        position += 1
    distinct = bool(arguments) and tokens[arguments[0][0]].token_type == TokenType.DISTINCT
    if arguments and tokens[arguments[0][0]].token_type in (TokenType.DISTINCT, TokenType.ALL):
        start, end = arguments[0]
        arguments[0] = (start + 1, end)
    return Call(name_token.text.lower(), index, tuple(arguments), special, distinct, ordered)


def argument_nodes(source: Source, node: exp.Expr, call: Call) -> list[exp.Expr | None]:
    """The tree node of each written argument: the node nearest to the call (breadth first) whose known tokens all
    lie inside the argument's token range (``None`` when no node has known tokens there)."""
    spans: list[tuple[int, int, exp.Expr]] = []
    for child in node.walk(bfs=True):
        if child is node:
            continue
        offset = source.node_offset(child)
        span = source.span(child)
        first = source.token_at(offset) if offset is not None else None
        if first is not None and span is not None:
            spans.append((first, source.token_index_of(span[1]), child))
    found: list[exp.Expr | None] = []
    for start, end in call.arguments:
        found.append(next((child for first, last, child in spans if start <= first and last <= end), None))
    return found


_EMPTY_ARRAY = [TokenType.L_BRACKET, TokenType.R_BRACKET]


def token_type(source: Source, argument: tuple[int, int]) -> TrinoType | None:
    """The type of an argument written as one literal token (``'day'``, which sqlglot may turn into a unit), or as
    the empty ``ARRAY[]`` (array(unknown); sqlglot's node for it has no position)."""
    start, end = argument
    brackets = [t.token_type for t in source.tokens[start + 1 : end + 1]]
    if end == start + 2 and source.tokens[start].text.upper() == "ARRAY" and brackets == _EMPTY_ARRAY:
        return TrinoType("array", (), (TrinoType("unknown"),))
    if start != end:
        return None
    token = source.tokens[start]
    if token.token_type == TokenType.STRING:
        return TrinoType("varchar", (len(token.text),))
    if token.token_type == TokenType.NUMBER:
        return literal_number(token.text)
    if token.token_type == TokenType.NULL:
        return TrinoType("unknown")
    return None


def judge(
    source: Source,
    call: Call,
    types: list[TrinoType | None],
    refuse: Callable[[exp.Expr | int, str, str, str], None],
) -> tuple[TrinoType | None, functions.Function | None]:
    """Refuse what Trino refuses about ``call`` whose arguments have ``types`` (through ``refuse(where, error,
    construct, message)``) and return its result type (``None``: not known) and its catalog entry."""
    function = functions.lookup(call.name)
    written = source.raw(source.tokens[call.name_index])
    if function is None:
        refuse(call.name_index, "FUNCTION_NOT_FOUND", written, not_found(call.name))
        return None, None
    if call.special or function.form == "special":  # SUBSTRING(s FROM i FOR n), TRIM(... FROM s): never refused here
        typed = signatures.matches(call.name, types)
        if isinstance(typed, tuple):
            return signatures.result_type(typed[1], types, typed[0]), function
        return _catalog_result(function, types), function
    if function.kind != "aggregate" and (call.distinct or call.ordered):
        what = "DISTINCT is not supported" if call.distinct else "ORDER BY is only valid"
        message = f"{what} for non-aggregation functions" if call.distinct else f"{what} for aggregation functions"
        refuse(call.name_index, "FUNCTION_NOT_AGGREGATE", written, f"{message} ({call.name} is not one)")
        return None, function
    if len(call.arguments) > functions.max_arguments():
        message = f"Too many arguments for function call {call.name}() (Athena's limit: {functions.max_arguments()})"
        refuse(call.name_index, "TOO_MANY_ARGUMENTS", written, message)
        return None, function
    if function.accepts(len(call.arguments)) is False:
        refuse(call.name_index, "FUNCTION_NOT_FOUND", written, _unexpected(call.name, types, function))
        return None, function
    if call.name == "concat" and types and all(t is not None and t.name in ("array", "unknown") for t in types):
        return _array_concat([t for t in types if t is not None]), function
    overload = signatures.matches(call.name, types)
    if overload is None:
        refuse(call.name_index, "FUNCTION_NOT_FOUND", written, _unexpected(call.name, types, function))
        return None, function
    if isinstance(overload, tuple):
        return signatures.result_type(overload[1], types, overload[0]), function
    return _catalog_result(function, types), function


#: Function -> (argument position, the number of parameters its lambda takes), from Trino's signatures
#: (docs/src/main/sphinx/functions/lambda.md, array.md, map.md).
LAMBDA_ARITY: dict[str, dict[int, int]] = {
    "transform": {1: 1},
    "filter": {1: 1},
    "any_match": {1: 1},
    "all_match": {1: 1},
    "none_match": {1: 1},
    "find_first": {1: 1},
    "map_filter": {1: 2},
    "transform_keys": {1: 2},
    "transform_values": {1: 2},
    "map_zip_with": {2: 3},
    "zip_with": {2: 2},
    "reduce": {2: 2, 3: 1},
    "array_sort": {1: 2},
}


def lambda_arity(name: str, position: int) -> int | None:
    """How many parameters the lambda passed as argument ``position`` of ``name`` takes: :data:`LAMBDA_ARITY`, else
    the documented signature's ``function(T, ..., R)`` at that position (its types but the last); ``None`` when not
    known."""
    known = LAMBDA_ARITY.get(name, {}).get(position)
    function = functions.lookup(name)
    if known is not None or function is None:
        return known
    counts = set()
    for signature in function.signatures:
        argument = signature.arguments[position] if position < len(signature.arguments) else ""
        if argument.replace(" ", "").lower().startswith("function("):
            counts.add(len(split_types(argument[argument.index("(") + 1 : argument.rindex(")")])) - 1)
    return counts.pop() if len(counts) == 1 else None


def lambda_parameter_types(name: str, position: int, argument_types: list[TrinoType | None]) -> list[TrinoType | None]:
    """The types of the parameters of the lambda passed as argument ``position`` of ``name``, from the arguments
    before it (``argument_types``; a lambda among them as its :func:`function_type`), as Trino binds the type
    variables of the documented signatures (functions/array.md, map.md): ``transform(array(T), function(T,U))``: T;
    ``zip_with(array(T), array(U), function(T,U,R))``: T, U; ``transform_keys(map(K,V), function(K,V,K2))``: K, V;
    ``map_zip_with(map(K,V1), map(K,V2), function(K,V1,V2,V3))``: K the keys' common super type, V1, V2;
    ``reduce(array(T), S, function(S,T,S), function(S,R))``: S the initial state's type, T; the output function's S
    is the input function's result when the initial state coerces to it (TestArrayReduceFunction.testCoercion at
    trinodb/trino@199fe72dd72e619bbc6ccd1a2754b72e09ecd596: ``reduce(ARRAY[123456789012345], 0, (s, x) -> s + x,
    s -> s)`` is bigint). ``None``: a type not known; ``[]``: a function whose lambdas are not typed here."""

    def element(index: int) -> TrinoType | None:
        kind = argument_types[index] if index < len(argument_types) else None
        return kind.children[0] if kind is not None and kind.name == "array" and kind.children else None

    def entry(index: int) -> tuple[TrinoType | None, TrinoType | None]:
        kind = argument_types[index] if index < len(argument_types) else None
        return (kind.children[0], kind.children[1]) if kind is not None and kind.name == "map" else (None, None)

    if name in ("transform", "filter", "any_match", "all_match", "none_match", "array_sort"):
        return [element(0), element(0)]
    if name in ("transform_values", "transform_keys", "map_filter"):
        return list(entry(0))
    if name == "zip_with":
        return [element(0), element(1)]
    if name == "map_zip_with":
        (k1, v1), (k2, v2) = entry(0), entry(1)
        key = common_super_type(k1, k2) if k1 is not None and k2 is not None else None
        return [key, v1, v2]
    if name == "reduce" and len(argument_types) >= 2:
        state = argument_types[1]
        if position == 2:
            return [state, element(0)]
        merged = argument_types[2] if len(argument_types) > 2 else None
        result = merged.children[-1] if merged is not None and merged.name == "function" else None
        if state is None or result is None or not can_coerce(state, result):
            return [None]
        return [result]
    return []


def function_type(parameters: list[TrinoType | None], body: TrinoType | None) -> TrinoType | None:
    """A lambda's type, as Trino writes it: ``function(integer, varchar(1))`` (its parameters' types, then its
    body's), ``None`` when one of them is not known."""
    if body is None or any(p is None for p in parameters):
        return None
    return TrinoType("function", (), (*(p for p in parameters if p is not None), body))


def not_found(name: str) -> str:
    hint = FOREIGN.get(name)
    close = functions.suggestions(name)
    if hint:
        return f"Function '{name}' not registered; Trino's way: {hint}"
    if close:
        return f"Function '{name}' not registered; did you mean {' or '.join(close)}?"
    return f"Function '{name}' not registered"


def _unexpected(name: str, types: list[TrinoType | None], function: functions.Function) -> str:
    shown = ", ".join("?" if t is None or t.name == "function" else str(t) for t in types)
    expected = signatures.expected(name) or ", ".join(s.text.split(" -> ")[0] for s in function.signatures)
    return f"Unexpected parameters ({shown}) for function {name}. Expected: {expected}"


def _catalog_result(function: functions.Function, types: list[TrinoType | None]) -> TrinoType | None:
    """The documented result: a concrete type when every form gives the same one, else the first argument's type
    for ``[same as input]``; ``None`` otherwise."""
    results = {s.returns.strip().lower() for s in function.signatures if s.returns}
    if len(results) != 1:
        return None
    (result,) = results
    if result.startswith("[same as"):
        return types[0] if types else None
    return parse_type(result.replace("<", "(").replace(">", ")"))


def _array_concat(types: list[TrinoType]) -> TrinoType | None:
    """concat(array(E), ...): array(E), E the arrays' common element type, a NULL argument coerced to it
    (io/trino/operator/scalar/ArrayConcatFunction.java; TestArrayOperators.testArrayToArrayConcat:
    ``concat(ARRAY[], NULL)`` is array(unknown)); ``None`` when there is none (not judged here)."""
    element: TrinoType | None = TrinoType("unknown")
    for kind in types:
        if kind.name == "array" and kind.children and element is not None:
            element = common_super_type(element, kind.children[0])
    return TrinoType("array", (), (element,)) if element is not None else None
