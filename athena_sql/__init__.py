"""Athena's SQL, offline: what Athena engine version 3 refuses and how it types a query, for ``check``, ``compile``,
synth and the local engine.

Athena engine v3 is built on Trino, integrated continuously, and documents where it differs (functions not
supported, changed behaviour): https://docs.aws.amazon.com/athena/latest/ug/engine-versions-reference-0003.html.
The specification used here is the Trino release pinned in :mod:`athena_sql.functions` (its docs and its own tests),
plus Athena's documented differences; Athena may lag or lead that release. sqlglot tokenizes and parses; it is a
tool, not the reference: strictness comes from the tokens, the function list and the types.

Public API (shapes in each module):

- :func:`athena_sql.analyzer.check_query` -> :class:`athena_sql.diagnostics.CheckResult`: the refusals (each with
  line, column, construct and Athena's error class) and what was not checked;
- :mod:`athena_sql.functions`: the function list of Athena engine v3, as data, with its source and date.

The analyzer's parts: :mod:`~athena_sql.source` (the text, its tokens, positions), :mod:`~athena_sql.syntax`
(syntax of other dialects, from the tokens) and :mod:`~athena_sql.forms` (Trino's special forms: CURRENT_DATE and
the other special values, LISTAGG, typed literals), :mod:`~athena_sql.types` (Trino's types and coercions),
:mod:`~athena_sql.scopes` (names in scope) and :mod:`~athena_sql.stars` (``prefix.*``), :mod:`~athena_sql.typecheck`
and :mod:`~athena_sql.rules` (the type of every expression and what Trino refuses about it),
:mod:`~athena_sql.ordering` (ORDER BY, aggregate ORDER BY and FILTER, IGNORE NULLS, array ``||``, UNNEST outside
FROM), :mod:`~athena_sql.calls` and :mod:`~athena_sql.signatures` (function calls, lambdas' arities),
:mod:`~athena_sql.aggregation` (GROUP BY and aggregates, lambdas' bodies, ORDER BY aggregates).

Depends on sqlglot and the standard library only (synth, ``check`` and the local tools import it; the Lambda
runtime does not).
"""
