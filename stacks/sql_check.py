"""The SQL check of one job, as Athena engine v3 would judge its ``query.sql``: the job-level adapter over
:func:`athena_sql.analyzer.check_query`, shared by synth and ``athena-once check``.

What the analyzer is given:

- **tables**: the job's source table -> its columns as Trino types. A sample source: the columns the stack's Glue
  table declares (:mod:`sample_data.flights`, no data needed); a job's own Glue table: ``declared`` when given
  (``source.columns`` of job.toml, or what the caller read elsewhere), else ``source.columns``; Glue (Hive DDL)
  types become the Trino types Athena reads them as (:func:`trino_type`). With no columns known, no table is given
  and the analyzer records what it could not check (not a refusal).
- **parameters**: every built-in parameter as the varchar literal Athena binds it to (Athena substitutes
  ExecutionParameters as SQL literal text: ``'2013-01-01 00:00:00'``, see
  :meth:`athena_refresh.settings.Settings.execution_parameters` and
  https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements-querying-using-execution-parameters.html),
  and each ``[parameters]`` constant as its text as written (``15`` is an integer literal, ``'x'`` a varchar).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from athena_sql.analyzer import check_query
from athena_sql.diagnostics import CheckResult, Unchecked
from stacks.jobs import QUERY_FILE, GlueSource, JobDefinition, SampleSource

__all__ = ["WINDOW_PARAMETER_LITERALS", "check_job_sql", "job_parameters", "job_tables", "trino_type"]

#: The literal text each built-in parameter is bound to (the shape of the runtime's values; any slot's values have
#: the same types): timestamps as ``'YYYY-MM-DD HH:MM:SS'``, dates as ``'YYYY-MM-DD'``, all varchar literals.
WINDOW_PARAMETER_LITERALS: Mapping[str, str] = {
    "window_start": "'2013-01-01 00:00:00'",
    "window_end": "'2013-01-02 00:00:00'",
    "slot_time": "'2013-01-02 00:00:00'",
    "window_first_date": "'2013-01-01'",
    "window_last_date": "'2013-01-01'",
}
#: Glue (Hive DDL) primitive type -> the Trino type Athena reads it as
#: (https://docs.aws.amazon.com/athena/latest/ug/data-types.html; Hive ``timestamp`` is ``timestamp(3)`` in Athena).
_PRIMITIVES: Mapping[str, str] = {
    "string": "varchar",
    "varchar": "varchar",
    "char": "char",
    "int": "integer",
    "integer": "integer",
    "bigint": "bigint",
    "smallint": "smallint",
    "tinyint": "tinyint",
    "double": "double",
    "float": "real",
    "real": "real",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp(3)",
    "binary": "varbinary",
    "decimal": "decimal(10,0)",
}
_PARAMETRIZED = re.compile(r"^(decimal|varchar|char)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$")


def trino_type(glue_type: str) -> str | None:
    """The Trino type text of a Glue/Hive type (``array<struct<a:int>>`` -> ``array(row(a integer))``); ``None``
    when it is not one this module knows (the analyzer then leaves that column's type unknown)."""
    text = glue_type.strip().lower()
    if text in _PRIMITIVES:
        return _PRIMITIVES[text]
    match = _PARAMETRIZED.match(text)
    if match:
        name, first, second = match.groups()
        return f"{name}({first},{second})" if second is not None else f"{name}({first})"
    for outer in ("array", "map", "struct"):
        if text.startswith(outer + "<") and text.endswith(">"):
            parts = _split_top(text[len(outer) + 1 : -1])
            if outer == "struct":
                fields = [part.split(":", 1) for part in parts]
                if any(len(field) != 2 for field in fields):
                    return None
                inner = [(name.strip(), trino_type(type_)) for name, type_ in fields]
                if any(type_ is None for _, type_ in inner):
                    return None
                return "row(" + ", ".join(f"{name} {type_}" for name, type_ in inner) + ")"
            converted = [trino_type(part) for part in parts]
            if any(type_ is None for type_ in converted) or len(converted) != (1 if outer == "array" else 2):
                return None
            return f"{outer}(" + ", ".join(type_ for type_ in converted if type_ is not None) + ")"
    return None


def _split_top(text: str) -> list[str]:
    """``a:int,b:map<string,int>`` -> ``["a:int", "b:map<string,int>"]`` (commas inside ``<>``/``()`` kept)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def job_tables(job: JobDefinition, declared: Mapping[str, str] | None) -> dict[str, dict[str, str]]:
    """``{source table: {column: Trino type}}`` (lowercase names); empty when the job's columns are unknown.
    A column whose Glue type has no Trino type here keeps its Glue text (the analyzer says it did not check it)."""
    if isinstance(job.source, SampleSource):
        from sample_data.flights import FLIGHTS_GLUE_COLUMNS, FLIGHTS_GLUE_PARTITION_KEYS

        glue: Mapping[str, str] = dict((*FLIGHTS_GLUE_COLUMNS, *FLIGHTS_GLUE_PARTITION_KEYS))
    elif declared:
        glue = declared
    elif isinstance(job.source, GlueSource) and job.source.columns:
        glue = dict(job.source.columns)
    else:
        return {}
    columns = {name.lower(): trino_type(type_) or type_ for name, type_ in glue.items()}
    return {job.source.table.lower(): columns}


def job_parameters(job: JobDefinition) -> dict[str, str]:
    """Parameter name -> the literal text Athena receives (built-ins as varchar literals, constants as written)."""
    return {**WINDOW_PARAMETER_LITERALS, **{name: " ".join(value.split()) for name, value in job.parameters.items()}}


def check_job_sql(job: JobDefinition, declared: Mapping[str, str] | None) -> CheckResult:
    """Check ``job``'s ``query.sql`` (the user's text: positions are its lines and columns) as Athena would.

    ``declared``: the source table's columns (name -> Glue type) when known outside ``job.source`` (``None``: use
    the job's own). Returns the analyzer's refusals and what it could not check; never raises for the SQL (a file
    that cannot be read is recorded as not checked: load_jobs read it already).
    """
    try:
        sql = (job.folder / QUERY_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return CheckResult(unchecked=(Unchecked(1, 1, QUERY_FILE, f"cannot be read: {exc}"),))
    return check_query(sql, tables=job_tables(job, declared), parameters=job_parameters(job))
