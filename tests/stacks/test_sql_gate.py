"""The SQL check every synth runs (stacks/sql_gate.py, app.py): refusals stop the synth in check's lines, results
are cached by what decides them, and ``-c skip_sql_check=true`` skips it."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh.checks import ConfigError
from athena_sql.diagnostics import CheckResult, Diagnostic, Unchecked
from stacks import sql_check, sql_gate
from stacks.jobs import JobDefinition, load_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tests.sample_jobs import CARRIERS, FLIGHTS, REPO_ROOT, stage_jobs

REFUSAL = Diagnostic(
    line=10,
    column=7,
    error_class="TYPE_MISMATCH",
    construct="sched_dep_utc >= :window_start",
    message="Cannot apply operator: timestamp(3) >= varchar(19); cast the parameter: CAST(:window_start AS timestamp)",
)


class CountingCheck:
    """A job check standing in for the analyzer: refuses the jobs named in ``refuse``, counts its calls per job."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.refuse = refuse
        self.calls: list[str] = []

    def __call__(self, job: JobDefinition, declared: Mapping[str, str] | None) -> CheckResult:
        self.calls.append(job.job_name)
        unchecked = (Unchecked(1, 1, "x", "not judged here"),)
        return CheckResult(refusals=(REFUSAL,) if job.job_name in self.refuse else (), unchecked=unchecked)


def settings() -> StackSettings:
    return StackSettings.from_context(load_context(REPO_ROOT / "cdk.json").get(STACK_KEY))


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    return stage_jobs(tmp_path, (CARRIERS, FLIGHTS))


def loaded(jobs_dir: Path) -> tuple[JobDefinition, ...]:
    return load_jobs(jobs_dir, settings(), root=jobs_dir.parent)


# --- synth stops on a refusal --------------------------------------------------------------------------------
def test_synth_stops_on_a_refusal_with_the_lines_check_prints(
    jobs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an analyzer that refuses flights-dashboard's query
    check = CountingCheck(refuse=(FLIGHTS,))
    monkeypatch.setattr(sql_check, "check_job_sql", check)
    err = io.StringIO()
    # WHEN synth runs
    status = app.main(jobs_dir=jobs_dir, err=err, sql_check_cache=tmp_path / "cache")
    # THEN it exits as for any job problem, one line per refusal: path:line:column: CLASS: message
    assert status == app.EXIT_INVALID_CONFIG
    assert err.getvalue() == f"{REFUSAL.located(f'jobs/{FLIGHTS}/query.sql')}\n"
    assert err.getvalue().startswith("jobs/flights-dashboard/query.sql:10:7: TYPE_MISMATCH: Cannot apply operator")
    assert sorted(check.calls) == [CARRIERS, FLIGHTS]  # every job is checked


def test_build_app_raises_config_error_naming_every_refusal(jobs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_check, "check_job_sql", CountingCheck(refuse=(CARRIERS, FLIGHTS)))
    with pytest.raises(ConfigError) as raised:
        app.build_app(jobs_dir=jobs_dir, sql_check_cache=None)
    assert [line.split(":", 1)[0] for line in raised.value.problems] == [
        f"jobs/{CARRIERS}/query.sql",
        f"jobs/{FLIGHTS}/query.sql",
    ]


def test_skip_flag_skips_the_check_and_synth_goes_on(jobs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check = CountingCheck(refuse=(FLIGHTS,))
    monkeypatch.setattr(sql_check, "check_job_sql", check)
    context = {**load_context(REPO_ROOT / "cdk.json"), sql_gate.SKIP_CONTEXT_KEY: "true"}  # what -c gives: text
    _, deployment = app.build_app(context=context, jobs_dir=jobs_dir, sql_check_cache=None)
    assert check.calls == [] and {job.job_name for job in deployment.definitions} == {CARRIERS, FLIGHTS}


def test_main_warns_in_one_line_when_the_check_is_skipped(
    jobs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warning, and the synth goes on (exit 0): the stack is built with the flag, its synthesis stubbed here."""
    built = app.build_app
    context = {**load_context(REPO_ROOT / "cdk.json"), sql_gate.SKIP_CONTEXT_KEY: True}

    class Synthesized:
        def synth(self) -> object:
            return type("Assembly", (), {"directory": str(tmp_path), "stacks": []})()

    def build(**kw: Any) -> tuple[Synthesized, Any]:
        return Synthesized(), built(context=context, **kw)[1]

    monkeypatch.setattr(sql_check, "check_job_sql", CountingCheck(refuse=(FLIGHTS,)))
    monkeypatch.setattr(app, "build_app", build)
    err = io.StringIO()
    assert app.main(jobs_dir=jobs_dir, err=err, sql_check_cache=None) == 0
    # the skip warning, then the per-job metrics notice (issue 35: the sample jobs do not opt in)
    skipped, notice = err.getvalue().splitlines()
    assert skipped == f"warning: {sql_gate.SKIPPED_WARNING}"
    assert notice.startswith("note: 2 of 2 jobs do not opt in to their own metrics"), notice
    assert "-c skip_sql_check=true" in sql_gate.SKIPPED_WARNING


@pytest.mark.parametrize(
    ("value", "skip"), [(None, False), (False, False), ("false", False), (True, True), ("true", True), (" TRUE ", True)]
)
def test_skip_flag_values(value: object, skip: bool) -> None:
    assert sql_gate.skip_requested(value) is skip


def test_a_bad_skip_flag_is_one_problem_naming_the_key(jobs_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        sql_gate.skip_requested("yes")
    assert raised.value.problems == ("context skip_sql_check: must be true or false, got 'yes'",)
    context = {**load_context(REPO_ROOT / "cdk.json"), sql_gate.SKIP_CONTEXT_KEY: "1"}
    with pytest.raises(ConfigError, match="skip_sql_check"):
        app.build_app(context=context, jobs_dir=jobs_dir, sql_check_cache=None)


def test_a_check_that_raises_is_one_line_naming_the_file_and_the_skip_flag(jobs_dir: Path, tmp_path: Path) -> None:
    def broken(job: JobDefinition, declared: Mapping[str, str] | None) -> CheckResult:
        raise RecursionError("maximum recursion depth exceeded")

    problems = sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=tmp_path / "cache", check=broken)
    assert problems == [
        f"jobs/{name}/query.sql: the SQL check itself failed (RecursionError: maximum recursion depth exceeded): a"
        " defect of the check, please report it; -c skip_sql_check=true synthesizes without it meanwhile"
        for name in (CARRIERS, FLIGHTS)
    ]
    assert not list((tmp_path / "cache").glob("*.json"))  # nothing cached


# --- the cache -----------------------------------------------------------------------------------------------
def test_results_are_cached_by_query_schema_parameters_and_analyzer(
    jobs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    check = CountingCheck(refuse=(FLIGHTS,))
    expected = [REFUSAL.located(f"jobs/{FLIGHTS}/query.sql")]
    # GIVEN a first synth: both jobs checked, results stored
    assert sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=cache, check=check) == expected
    assert sorted(check.calls) == [CARRIERS, FLIGHTS] and len(list(cache.glob("*.json"))) == 2
    # WHEN nothing changed THEN nothing is checked again, and the refusal is read back the same
    check.calls.clear()
    assert sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=cache, check=check) == expected
    assert check.calls == []
    # WHEN a query changes THEN that job alone is checked again
    query = jobs_dir / CARRIERS / "query.sql"
    query.write_text(query.read_text(encoding="utf-8") + "-- edited\n", encoding="utf-8")
    sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=cache, check=check)
    assert check.calls == [CARRIERS]
    # WHEN a constant (a parameter the check is given) changes THEN that job is checked again
    check.calls.clear()
    job_toml = jobs_dir / CARRIERS / "job.toml"
    text = job_toml.read_text(encoding="utf-8")
    assert "on_time_delay_min = " in text
    job_toml.write_text(text.replace('on_time_delay_min = "15"', 'on_time_delay_min = "16"'), encoding="utf-8")
    sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=cache, check=check)
    assert check.calls == [CARRIERS]
    # WHEN the analyzer changes THEN every job is checked again
    check.calls.clear()
    monkeypatch.setattr(sql_gate, "analyzer_fingerprint", lambda: "another analyzer")
    sql_gate.check_jobs_sql(loaded(jobs_dir), cache_dir=cache, check=check)
    assert sorted(check.calls) == [CARRIERS, FLIGHTS]


def test_the_key_changes_with_the_schema(jobs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (job, _) = loaded(jobs_dir)
    sql = (job.folder / "query.sql").read_text(encoding="utf-8")
    before = sql_gate.cache_key(job, sql)
    tables = sql_check.job_tables(job, None)
    monkeypatch.setattr(sql_check, "job_tables", lambda *_: {"flights": {**tables["flights"], "extra": "bigint"}})
    assert sql_gate.cache_key(job, sql) != before


def test_a_broken_entry_is_checked_again_and_an_unwritable_cache_costs_only_speed(
    jobs_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    check = CountingCheck(refuse=(FLIGHTS,))
    jobs = loaded(jobs_dir)
    sql_gate.check_jobs_sql(jobs, cache_dir=cache, check=check)
    for entry in cache.glob("*.json"):
        entry.write_text('{"format": 1, "refusals": [{"line": "x"}]}', encoding="utf-8")
    check.calls.clear()
    assert sql_gate.check_jobs_sql(jobs, cache_dir=cache, check=check) == [REFUSAL.located(f"jobs/{FLIGHTS}/query.sql")]
    assert sorted(check.calls) == [CARRIERS, FLIGHTS]
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory", encoding="utf-8")
    assert sql_gate.check_jobs_sql(jobs, cache_dir=blocked, check=check) == [
        REFUSAL.located(f"jobs/{FLIGHTS}/query.sql")
    ]
    assert not list(tmp_path.glob("**/.entry-*"))  # no temporary file left behind


def test_the_fingerprint_changes_with_any_file_of_the_analyzer_or_the_adapter(tmp_path: Path) -> None:
    package = tmp_path / "athena_sql"
    shutil.copytree(REPO_ROOT / "athena_sql", package, ignore=shutil.ignore_patterns("__pycache__"))
    adapter = tmp_path / "sql_check.py"
    shutil.copy2(sql_gate._ADAPTER, adapter)
    first = sql_gate.fingerprint(package, adapter)
    assert first == sql_gate.analyzer_fingerprint()  # the same bytes: the same fingerprint as the real one
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert sql_gate.fingerprint(package, adapter) == first  # bytecode is not the analyzer
    toml = next(package.glob("*.toml"))
    toml.write_text(toml.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    second = sql_gate.fingerprint(package, adapter)
    assert second != first
    adapter.write_text(adapter.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert sql_gate.fingerprint(package, adapter) not in (first, second)


# --- with the real analyzer ----------------------------------------------------------------------------------
def refused_job(jobs_dir: Path) -> Path:
    """carrier-on-time with two constructs Athena refuses on line 9: ``::`` and ILIKE."""
    query = jobs_dir / CARRIERS / "query.sql"
    sql = query.read_text(encoding="utf-8")
    old = "WHERE sched_dep_utc >= CAST(:window_start AS timestamp)"
    assert old in sql
    query.write_text(
        sql.replace(old, "WHERE sched_dep_utc::date >= CAST(:window_start AS date) AND carrier ILIKE 'a%'"),
        encoding="utf-8",
    )
    return query


def test_synth_refuses_what_athena_refuses_in_the_lines_check_prints(jobs_dir: Path, tmp_path: Path) -> None:
    from tools.jobs import check, cli

    refused_job(jobs_dir)
    err = io.StringIO()
    assert app.main(jobs_dir=jobs_dir, err=err, sql_check_cache=tmp_path / "cache") == app.EXIT_INVALID_CONFIG
    lines = err.getvalue().splitlines()
    assert [line.split(": ")[:2] for line in lines] == [
        [f"jobs/{CARRIERS}/query.sql:9:20", "SYNTAX_ERROR"],
        [f"jobs/{CARRIERS}/query.sql:9:70", "SYNTAX_ERROR"],
    ]
    args = cli.build_parser({"check": check}).parse_args(["check", "--jobs-dir", str(jobs_dir)])
    out, check_err = io.StringIO(), io.StringIO()
    check.execute(args, out, check_err)
    printed = (out.getvalue() + check_err.getvalue()).splitlines()
    assert all(line in printed for line in lines)  # the same lines athena-once check prints
    # AND the cached result says the same on the next synth
    err = io.StringIO()
    assert app.main(jobs_dir=jobs_dir, err=err, sql_check_cache=tmp_path / "cache") == app.EXIT_INVALID_CONFIG
    assert err.getvalue().splitlines() == lines


def test_the_fixture_and_repository_jobs_pass_the_check() -> None:
    from tests.sample_jobs import FIXTURE_JOBS_DIR, REPO_JOBS_DIR

    for directory in (FIXTURE_JOBS_DIR, REPO_JOBS_DIR):
        assert sql_gate.check_jobs_sql(loaded(directory), cache_dir=None) == []


@pytest.mark.slow
def test_cdk_context_flag_skips_the_check_in_a_real_synth(jobs_dir: Path, tmp_path: Path) -> None:
    """``-c skip_sql_check=true`` reaches the app as the CDK CLI passes context (CDK_CONTEXT_JSON, text values)."""
    refused_job(jobs_dir)
    code = (
        f"import sys, pathlib, app; sys.exit(app.main(jobs_dir=pathlib.Path({str(jobs_dir)!r}), sql_check_cache=None))"
    )
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps({sql_gate.SKIP_CONTEXT_KEY: "true"}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"warning: {sql_gate.SKIPPED_WARNING}" in done.stderr.splitlines()
    assert (tmp_path / "cdk.out" / "manifest.json").is_file()
