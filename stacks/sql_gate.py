"""The SQL check every synth runs (so ``cdk deploy`` and ``make synth`` too): each job's ``query.sql`` as Athena
engine v3 would judge it (:func:`stacks.sql_check.check_job_sql`), before any construct exists.

A refusal stops the synth like every other job problem (``app.py``: one line each on stderr, exit status 2), in the
lines ``athena-once check`` prints: ``jobs/x/query.sql:LINE:COLUMN: ERROR_CLASS: message``
(:meth:`athena_sql.diagnostics.Diagnostic.located`). What the check could not judge is not a refusal and is not
printed here (``athena-once check`` lists it).

**Cache.** A job's result is stored under ``.cache/sql-check/<key>.json`` (outside ``cdk.out``: ``cdk synth``
rewrites that), ``key`` the SHA-256 of what decides it: the text of ``query.sql``, the table schema and the
parameters the check is given (:func:`stacks.sql_check.job_tables`, :func:`stacks.sql_check.job_parameters`) and
the analyzer's fingerprint (:func:`analyzer_fingerprint`: the bytes of every file of ``athena_sql/`` and of
``stacks/sql_check.py``, and sqlglot's version), so an edited query, schema, constant or analyzer is checked
again and an unchanged one is read back. An unreadable or malformed entry is checked again; a cache directory that
cannot be written only costs the speed (nothing fails). ``make clean`` removes it.

**Skipping.** ``cdk synth -c skip_sql_check=true`` (also ``cdk deploy``; :data:`SKIP_CONTEXT_KEY`) skips the check,
for SQL the offline check cannot judge; synth then says so in one ``warning:`` line. Any other value than
``true``/``false`` is a problem naming the key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from athena_refresh.checks import ConfigError
from athena_sql.diagnostics import CheckResult, Diagnostic
from stacks import REPO_ROOT
from stacks.jobs import QUERY_FILE, JobDefinition

__all__ = [
    "CACHE_DIR",
    "SKIPPED_WARNING",
    "SKIP_CONTEXT_KEY",
    "analyzer_fingerprint",
    "check_jobs_sql",
    "skip_requested",
]

#: The context flag that skips the check: ``cdk synth -c skip_sql_check=true``.
SKIP_CONTEXT_KEY: Final = "skip_sql_check"
SKIPPED_WARNING: Final = (
    f"the SQL check of every job was skipped (-c {SKIP_CONTEXT_KEY}=true): a query Athena refuses fails every slot"
    " after deploy (athena-once check judges it offline)"
)
#: Where the results are kept between synths (``make clean`` removes ``.cache``).
CACHE_DIR: Final = REPO_ROOT / ".cache" / "sql-check"
#: What the fingerprint hashes: the analyzer package and the job-level adapter.
_ANALYZER_DIR: Final = REPO_ROOT / "athena_sql"
_ADAPTER: Final = Path(__file__).resolve().parent / "sql_check.py"
_FORMAT: Final = 1  # of a cache entry; a change invalidates every entry

Check = Callable[[JobDefinition, Mapping[str, str] | None], CheckResult]


def skip_requested(value: Any) -> bool:
    """Whether the context value of :data:`SKIP_CONTEXT_KEY` asks to skip (``-c`` gives text: ``"true"``).

    :raises ConfigError: neither true nor false (``None``, unset, is false)."""
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() == "false"):
        return False
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True
    raise ConfigError([f"context {SKIP_CONTEXT_KEY}: must be true or false, got {value!r:.80}"])


@functools.cache
def analyzer_fingerprint() -> str:
    """SHA-256 (hex) of the analyzer: each file under ``athena_sql/`` (its relative path and bytes, ``__pycache__``
    left out), ``stacks/sql_check.py`` and sqlglot's version; computed once per process."""
    return fingerprint(_ANALYZER_DIR, _ADAPTER)


def fingerprint(analyzer_dir: Path, adapter: Path) -> str:
    """:func:`analyzer_fingerprint` of the package ``analyzer_dir`` and the adapter module ``adapter``."""
    import sqlglot

    digest = hashlib.sha256(f"format {_FORMAT}\nsqlglot {sqlglot.__version__}\n".encode())
    files = sorted(p for p in analyzer_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    named = [(f"{analyzer_dir.name}/{p.relative_to(analyzer_dir).as_posix()}", p) for p in files]
    for name, path in [*named, (adapter.name, adapter)]:
        digest.update(f"{name}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cache_key(job: JobDefinition, sql: str) -> str:
    """SHA-256 (hex) of ``sql``, the schema and parameters the check gives the analyzer, and the analyzer's
    fingerprint."""
    from stacks.sql_check import job_parameters, job_tables

    decided_by = {
        "sql": sql,
        "tables": job_tables(job, None),
        "parameters": job_parameters(job),
        "analyzer": analyzer_fingerprint(),
    }
    return hashlib.sha256(json.dumps(decided_by, sort_keys=True).encode()).hexdigest()


def check_jobs_sql(
    jobs: Sequence[JobDefinition], *, cache_dir: Path | None = CACHE_DIR, check: Check | None = None
) -> list[str]:
    """Every refusal of every job, in job then text order, one line each (``jobs/x/query.sql:L:C: CLASS: message``);
    empty: nothing refused. A check that raises (a defect: the analyzer never raises for the user's SQL) is one line
    naming the file and the skip flag, not a traceback, and is not cached. ``cache_dir`` ``None``: no cache. ``check``: the job check (default
    :func:`stacks.sql_check.check_job_sql`; tests inject one)."""
    problems: list[str] = []
    for job in jobs:
        path = job.folder / QUERY_FILE
        sql = path.read_text(encoding="utf-8")  # load_jobs read it already
        shown = f"{job.folder.parent.name}/{job.folder.name}/{QUERY_FILE}"
        try:
            refusals = _cached_refusals(job, sql, cache_dir, check)
        except Exception as exc:  # noqa: BLE001 - a defect of the check, not of the SQL: one line and the way around
            problems.append(
                f"{shown}: the SQL check itself failed ({type(exc).__name__}: {str(exc).strip()[:200]}): a defect"
                f" of the check, please report it; -c {SKIP_CONTEXT_KEY}=true synthesizes without it meanwhile"
            )
            continue
        problems.extend(refusal.located(shown) for refusal in refusals)
    return problems


def _cached_refusals(
    job: JobDefinition, sql: str, cache_dir: Path | None, check: Check | None
) -> tuple[Diagnostic, ...]:
    entry = cache_dir / f"{cache_key(job, sql)}.json" if cache_dir is not None else None
    if entry is not None:
        cached = _read(entry)
        if cached is not None:
            return cached
    if check is None:
        from stacks.sql_check import check_job_sql

        check = check_job_sql
    refusals = check(job, None).refusals
    if entry is not None:
        _write(entry, refusals)
    return refusals


def _read(entry: Path) -> tuple[Diagnostic, ...] | None:
    """The refusals stored in ``entry``; ``None`` when it is missing, unreadable or not an entry of this format."""
    try:
        document = json.loads(entry.read_text(encoding="utf-8"))
        if document["format"] != _FORMAT:
            return None
        return tuple(
            Diagnostic(
                line=int(item["line"]),
                column=int(item["column"]),
                error_class=str(item["error_class"]),
                construct=str(item["construct"]),
                message=str(item["message"]),
            )
            for item in document["refusals"]
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None


def _write(entry: Path, refusals: Sequence[Diagnostic]) -> None:
    """Store ``refusals`` in ``entry`` atomically (a temporary file renamed: concurrent synths never read half an
    entry); a failure to write is ignored (the next synth checks again)."""
    document = {
        "format": _FORMAT,
        "refusals": [
            {
                "line": r.line,
                "column": r.column,
                "error_class": r.error_class,
                "construct": r.construct,
                "message": r.message,
            }
            for r in refusals
        ],
    }
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(document, handle)
            os.replace(tmp, entry)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return
