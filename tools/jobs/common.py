"""What ``run``, ``check`` and ``cost`` share: the job folders loaded as synth loads them, a job's settings as the
runtime reads them and its query run for one slot on the local engine (:func:`run_query`), where a job's local data
lives, a table's schema (``source.columns``, the sample's declared columns, a Parquet file's), and where an
identifier stands in ``query.sql``.

``source.columns`` (``{ carrier = "string", dep_delay = "double" }``: column name -> Glue type) is an optional
key of a Glue ``source``, validated by :mod:`stacks.jobs` (:attr:`stacks.jobs.GlueSource.columns`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from athena_refresh.catalog import CATALOG_FILE, catalog_document
from athena_refresh.checks import ConfigError, format_problems
from athena_refresh.engine import QueryExecution, QueryResult, client_request_token
from athena_refresh.errors import ConfigurationError, QueryEngineError, ResultTypeError
from athena_refresh.settings import Settings
from slotlock import Slot
from stacks.defaults import read_text
from stacks.jobs import QUERY_FILE, GlueSource, JobDefinition, SampleSource, load_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tools.cli.selection import SelectionError, select, select_one

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
CDK_JSON: Final = REPO_ROOT / "cdk.json"
JOBS_DIR: Final = REPO_ROOT / "jobs"
#: Where the local engine reads tables: ``<DATA_DIR>/<table>/**/*.parquet`` (the sample's too: ``make data``).
DATA_DIR: Final = REPO_ROOT / ".cache" / "data"
DIALECT: Final = "trino"


class JobsError(Exception):
    """A problem the user must fix before the command can run: each line of ``problems`` is printed alone."""

    def __init__(self, problems: Sequence[str], status: int = 2) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)
        self.status = status


@dataclasses.dataclass(frozen=True)
class LoadedJobs:
    """The validated jobs and, per job name, its ``source.columns`` (name -> Glue type) when it declares them."""

    jobs: tuple[JobDefinition, ...]
    declared_columns: Mapping[str, Mapping[str, str]]
    root: Path

    def named(self, name: str) -> JobDefinition:
        for job in self.jobs:
            if job.job_name == name:
                return job
        raise JobsError([f"no job {name!r}; jobs: {', '.join(j.job_name for j in self.jobs) or 'none'}"])

    def selected(self, values: Sequence[str]) -> tuple[JobDefinition, ...]:
        """The jobs ``-s/--select`` names (:mod:`tools.cli.selection`; every job when it names none).

        :raises JobsError: a pattern matches no job (status 2)."""
        try:
            names = set(select([*values], [job.job_name for job in self.jobs]))
        except SelectionError as exc:
            raise JobsError(str(exc).splitlines()) from exc
        return tuple(job for job in self.jobs if job.job_name in names)

    def selected_one(self, values: Sequence[str]) -> JobDefinition:
        """The one job ``-s/--select`` names. :raises JobsError: it names none, several, or an unknown job."""
        try:
            return self.named(select_one([*values], [job.job_name for job in self.jobs]))
        except SelectionError as exc:
            raise JobsError(str(exc).splitlines()) from exc


def print_problems(problems: Sequence[str], err: TextIO) -> None:
    """Each problem on its own line, as synth prints them (:func:`athena_refresh.checks.format_problems`)."""
    err.write(format_problems(problems) + "\n")


def stack_settings(cdk_json: Path = CDK_JSON) -> StackSettings:
    """cdk.json's ``context.stack`` as app.py reads it. :raises ConfigError: as ``StackSettings.from_context``."""
    return StackSettings.from_context(load_context(cdk_json).get(STACK_KEY))


def load(jobs_dir: Path = JOBS_DIR, *, cdk_json: Path = CDK_JSON) -> LoadedJobs:
    """Every job under ``jobs_dir``, validated as synth validates them (:func:`stacks.jobs.load_jobs` with cdk.json's
    stack settings). :raises JobsError: every problem (status 2)."""
    jobs_dir = Path(jobs_dir).resolve()
    root = jobs_dir.parent
    try:
        jobs = load_jobs(jobs_dir, stack_settings(cdk_json), root=root)
    except ConfigError as exc:
        raise JobsError(exc.problems) from exc
    columns = {
        job.job_name: dict(job.source.columns)
        for job in jobs
        if isinstance(job.source, GlueSource) and job.source.columns
    }
    return LoadedJobs(jobs=jobs, declared_columns=columns, root=root)


# --- one slot's query on the local engine -------------------------------------------------------------------
class LocalQueryError(Exception):
    """The query failed on the local engine; the message is the engine's (its error message, else its state)."""


@dataclasses.dataclass(frozen=True)
class LocalRun:
    """One slot's query as the deployed function would run it, run on DuckDB: the parameters it was bound to,
    its execution (state, statistics: ``data_scanned_bytes`` as Athena bills them) and its rows."""

    slot_iso: str
    parameters: tuple[str, ...]
    execution: QueryExecution
    result: QueryResult
    #: Each column's whole Trino type (``decimal(23,1)``, ``array(varchar)``), which ColumnInfo.Type leaves out.
    trino_types: tuple[str, ...] = ()


def job_settings(job: JobDefinition, *, stand_in: str = "local-run") -> Settings:
    """The runtime's settings of ``job``, from a job catalog as the stack writes it (window, data year, parameter
    order, constants); ``stand_in`` names the tables the settings need (nothing is created).

    :raises JobsError: the runtime refuses the settings (one line naming the job's ``job.toml``)."""
    from stacks.runtime_asset import catalog_queries

    with tempfile.TemporaryDirectory(prefix="jobs-run-") as tmp:
        path = Path(tmp) / CATALOG_FILE
        path.write_text(json.dumps(catalog_document(catalog_queries([job]))), encoding="utf-8")
        env = job.config.wiring_environment(lock_table_name=stand_in, results_table_name=stand_in)
        try:
            return Settings.from_env(env, catalog_path=path)
        except ConfigurationError as exc:
            raise JobsError([f"{job_file(job, 'job.toml')}: {exc}"]) from exc


def run_query(
    job: JobDefinition, settings: Settings, slot: dt.datetime, *, data_dir: Path, stand_in: str = "local-run"
) -> LocalRun:
    """Run ``job``'s prepared query for ``slot`` on :class:`local.emulators.duckdb_engine.DuckDBQueryEngine` (a
    temporary state directory) with the parameters the runtime would pass (:meth:`Settings.execution_parameters`)
    and the client request token of the slot's first generation (``stand_in`` its deployment).

    :raises LocalQueryError: the query did not succeed, or its rows cannot be read."""
    from local.emulators.duckdb_engine import DuckDBQueryEngine

    parameters = settings.execution_parameters(slot)
    slot_iso = Slot(int(slot.timestamp())).iso
    token = client_request_token(job.job_name, slot_iso, 1, deployment_id=stand_in)
    with tempfile.TemporaryDirectory(prefix="jobs-run-") as tmp:
        try:
            with DuckDBQueryEngine(data_dir=data_dir, state_dir=Path(tmp)) as engine:
                query_id = engine.start_query(sql=settings.query_sql, parameters=parameters, client_request_token=token)
                execution = engine.get_query(query_id)
                if execution.state != "SUCCEEDED":
                    raise LocalQueryError((execution.error.error_message if execution.error else "") or execution.state)
                result = engine.get_results(query_id)
                trino_types = engine.column_types(query_id)
        except (QueryEngineError, ResultTypeError) as exc:
            raise LocalQueryError(str(exc)) from exc
    return LocalRun(slot_iso, tuple(parameters), execution, result, trino_types)


# --- where things are ----------------------------------------------------------------------------------------
def job_file(job: JobDefinition, name: str = QUERY_FILE) -> str:
    """``jobs/<job>/query.sql`` (the folder's parent named as load_jobs names it)."""
    return f"{job.folder.parent.name}/{job.folder.name}/{name}"


def identifier_line(sql: str, name: str) -> int | None:
    """The line of the first identifier ``name`` (any case, quoted or not) in ``sql``, from sqlglot's Trino
    tokens: never a word inside a string or a comment. ``None`` when it is not there."""
    for token in tokens(sql):
        if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER) and token.text.lower() == name.lower():
            return int(token.line)
    for token in tokens(sql):  # a keyword used as a name (e.g. ``year``, ``hour``)
        if token.token_type != TokenType.STRING and token.text.lower() == name.lower():
            return int(token.line)
    return None


def tokens(sql: str) -> list[Token]:
    try:
        return list(sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql))
    except TokenError:
        return []


def located(job: JobDefinition, line: int | None) -> str:
    """``jobs/<job>/query.sql:<line>`` (no line when unknown)."""
    return job_file(job) + (f":{line}" if line is not None else "")


def query_text(job: JobDefinition) -> str:
    """The job's ``query.sql`` (a byte order mark dropped). :raises FileEncodingError, OSError:."""
    return read_text(job.folder / QUERY_FILE)


# --- data and schemas ----------------------------------------------------------------------------------------
def has_parquet(table_dir: Path) -> bool:
    """Whether ``table_dir`` holds a Parquet file the local engine reads (names starting ``_`` or ``.`` are not)."""
    if not table_dir.is_dir():
        return False
    return any(
        not any(part.startswith(("_", ".")) for part in p.relative_to(table_dir).parts)
        for p in table_dir.rglob("*.parquet")
    )


def data_dir_for(job: JobDefinition, data: Path | None) -> Path:
    """The directory holding ``<table>/`` for ``job``: ``data`` (``--data``) when given, else ``.cache/data``.

    :raises JobsError: (status 2) no Parquet file there, one line saying how to get it.
    """
    table = job.source.table
    base = Path(data) if data is not None else DATA_DIR
    if has_parquet(base / table):
        return base
    if isinstance(job.source, SampleSource) and data is None:
        raise JobsError(
            [f"no sample data in {shown(base / table)}/: build it with `make data` (python -m sample_data.flights)"]
        )
    where = f"{shown(base / table)}/" if data is not None else f".cache/data/{table}/ (or DIR/{table}/ with --data DIR)"
    raise JobsError(
        [
            f"no Parquet files for table {table}: put them under {where}, Hive-partitioned like dt=2024-01-31/part-0.parquet"
        ]
    )


#: A Hive partition directory named for a day, any key: ``dt=2026-11-24``, ``day=2026-11-24``.
_DAY_PARTITION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(\d{4}-\d{2}-\d{2})")
#: Where the docs say how to give your own table's sample files.
OWN_FILES_DOC: Final = "docs/local.md#your-own-tables-sample-files"


def own_table_dir(job: JobDefinition, data: Path | None = None) -> Path | None:
    """Your own table's sample files: ``<data>/<table>/`` (default ``.cache/data/<table>/``) when ``job`` reads a Glue
    table and Parquet files are there (:func:`has_parquet`); ``None`` for a sample source or no files."""
    if not isinstance(job.source, GlueSource):
        return None
    table_dir = (Path(data) if data is not None else DATA_DIR) / job.source.table
    return table_dir if has_parquet(table_dir) else None


def no_own_files(job: JobDefinition, data: Path | None = None) -> str:
    """The one line saying a Glue-source job has no sample files to run on locally, and where they go."""
    table = job.source.table
    where = f"{shown(Path(data) / table)}/" if data is not None else f".cache/data/{table}/"
    return f"no Parquet files for table {table} under {where} ({OWN_FILES_DOC})"


def newest_day(table_dir: Path) -> dt.date | None:
    """The newest day a top-level partition directory of ``table_dir`` names (``dt=2026-11-24/``), ``None`` when
    none does."""
    days = []
    for child in table_dir.iterdir():
        match = _DAY_PARTITION.fullmatch(child.name)
        if child.is_dir() and match:
            try:
                days.append(dt.date.fromisoformat(match.group(1)))
            except ValueError:  # dt=2026-02-30
                continue
    return max(days, default=None)


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it, else as given."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def sample_schema(source: SampleSource) -> dict[str, str]:
    """The sample table's columns as the stack's Glue table declares them (name -> Glue type), partition key too."""
    from sample_data.flights import FLIGHTS_GLUE_COLUMNS, FLIGHTS_GLUE_PARTITION_KEYS

    return {name: glue_type for name, glue_type in (*FLIGHTS_GLUE_COLUMNS, *FLIGHTS_GLUE_PARTITION_KEYS)}


def parquet_schema(table_dir: Path) -> dict[str, str]:
    """The columns of the Parquet files under ``table_dir`` (Hive partition keys as ``varchar``), DuckDB types."""
    import duckdb

    pattern = str(table_dir / "**" / "*.parquet")
    with duckdb.connect() as con:
        rows = con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = true, hive_types_autocast = false, union_by_name = true)",
            [pattern],
        ).fetchall()
    return {str(row[0]): str(row[1]) for row in rows}


#: DuckDB type (as ``DESCRIBE`` prints it) -> the Glue type a table of such files declares, for the SQL check.
_GLUE_OF_DUCKDB = {
    "INTEGER": "int",
    "BIGINT": "bigint",
    "SMALLINT": "smallint",
    "TINYINT": "tinyint",
    "DOUBLE": "double",
    "FLOAT": "float",
    "REAL": "float",
    "VARCHAR": "string",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_MS": "timestamp",
    "TIMESTAMP_NS": "timestamp",
    "TIMESTAMP_S": "timestamp",
    "BLOB": "binary",
}


def glue_type_of(duckdb_type: str) -> str:
    """The Glue type of a Parquet column DuckDB reads as ``duckdb_type`` (``DECIMAL(10,2)`` -> ``decimal(10,2)``);
    the DuckDB text itself when there is none (the SQL check then leaves the column's type unknown)."""
    text = duckdb_type.strip().upper()
    if text.startswith("DECIMAL"):
        return text.lower().replace(" ", "")
    return _GLUE_OF_DUCKDB.get(text, duckdb_type)
