"""Cold start of the real handler: import time, peak memory of one invocation, and the Lambda asset's size.

- **Import time**: ``python -X importtime -c "import athena_refresh.handler"`` in a fresh process with only
  the asset's packages (:func:`asset_root`: ``lambdas/`` plus the installed ``slotlock`` package, as the stack
  stages them; ``/var/task`` in Lambda) first on ``PYTHONPATH`` and the function's environment;
  the figure is the ``cumulative`` column of the ``athena_refresh.handler`` line, median of fresh processes.
- **Peak RSS of one invocation**: :mod:`bench.invoke_once` in a fresh process imports the handler and
  invokes it once against the atomic moto server (DynamoDB, Athena and its queued result rows), tracing
  on as in the stack. Reported against the function's configured memory (cdk.json ``lambda_memory_mb``) and
  against 128 MB, the smallest Lambda size. The Lambda runtime's own bootstrap is not included.
- **Asset size**: the files of :func:`asset_root` (the asset the stack stages, without its job catalog), minus the
  stack's ``ASSET_EXCLUDES``
  (read from ``stacks/constructs/refresh_function.py`` without importing aws_cdk), zipped with deflate.
  Powertools (public layer) and boto3 (the runtime's) are not in the asset.
"""

from __future__ import annotations

import ast
import atexit
import dataclasses
import datetime as dt
import fnmatch
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .backends import CREDENTIALS, REGION, Endpoint, make_session
from .invoke_once import RESULT_PREFIX
from .stats import spread

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"
#: The asset's packages (stacks.runtime_asset: lambdas/'s packages, then the installed slotlock package).
ASSET_PACKAGES = ("athena_refresh", "results_api")
FUNCTION_MODULE = REPO_ROOT / "stacks" / "constructs" / "refresh_function.py"
HANDLER_MODULE = "athena_refresh.handler"
SMALLEST_LAMBDA_MB = 128
LAMBDA_ZIP_LIMIT_BYTES = 50 * 1024 * 1024  # direct upload limit (zipped)
LAMBDA_UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024  # function + layers, unzipped
CHILD_TIMEOUT_S = 120.0
# A realistic answer for the job's query (cdk.json "sql"): header row, then one row per origin airport.
RESULT_COLUMNS = (
    ("origin", "varchar"),
    ("flights", "bigint"),
    ("delayed_departures", "bigint"),
    ("cancelled", "bigint"),
    ("avg_dep_delay_min", "double"),
    ("p90_arr_delay_min", "double"),
    ("worst_delay_dest", "varchar"),
)
#: The query of the bench's catalog entry, bound to the window's start and end (moto's Athena ignores the SQL).
BENCH_SQL = (
    "SELECT origin, count(*) AS flights FROM flights WHERE sched_dep_utc >= CAST(? AS timestamp)"
    " AND sched_dep_utc < CAST(? AS timestamp) GROUP BY origin ORDER BY origin"
)
RESULT_ROWS = (
    ("EWR", "358", "87", "4", "14.12", "52.0", "ORD"),
    ("JFK", "304", "61", "2", "11.56", "44.0", "LAX"),
    ("LGA", "281", "55", "7", "10.31", "39.0", "ATL"),
)


def job_config() -> Any:
    """The validated settings of the sample job the bench runs (``jobs/flights-dashboard``; ``stacks.jobs``
    reads TOML and SQL only, it does not import aws_cdk)."""
    from stacks.jobs import default_local_job, load_repo_jobs

    return default_local_job(load_repo_jobs(REPO_ROOT)[1]).config


def asset_excludes() -> tuple[str, ...]:
    """The stack's ``ASSET_EXCLUDES`` constant, read from its source."""
    tree = ast.parse(FUNCTION_MODULE.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ASSET_EXCLUDES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError(f"ASSET_EXCLUDES not found in {FUNCTION_MODULE}")


def _excluded(relative: str, patterns: tuple[str, ...]) -> bool:
    parts = relative.split("/")
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        # "**/x" matches x at any depth, as a file or as a directory on the way
        if any(fnmatch.fnmatch(part, bare) for part in parts) or fnmatch.fnmatch(relative, pattern):
            return True
    return False


@functools.cache
def asset_root() -> Path:
    """A directory laid out as the function's asset (``/var/task``): ``lambdas/``'s packages and the installed
    ``slotlock`` package (its ``.py`` files, subpackages included, and ``py.typed``, as ``slotlock_cdk.stage_slotlock``
    copies them; not
    imported from there, which would load aws_cdk into the bench). Removed when the process ends."""
    import slotlock

    root = Path(tempfile.mkdtemp(prefix="bench-asset-"))
    atexit.register(shutil.rmtree, root, True)
    for package in ASSET_PACKAGES:
        shutil.copytree(LAMBDAS_DIR / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    source = Path(slotlock.__file__).resolve().parent
    for path in [*source.rglob("*.py"), source / "py.typed"]:  # subpackages too (slotlock.ops), as staged
        if "__pycache__" in path.relative_to(source).parts:
            continue
        copied = root / "slotlock" / path.relative_to(source)
        copied.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copied)
    return root


def asset_size(root: Path | None = None) -> dict[str, Any]:
    """Files, bytes and deflated zip size of the Lambda asset (``root``, default :func:`asset_root`, minus the
    stack's excludes)."""
    root = root or asset_root()
    patterns = asset_excludes()
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and not _excluded(p.relative_to(root).as_posix(), patterns)
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in files:
            archive.write(path, path.relative_to(root).as_posix())
    raw = sum(p.stat().st_size for p in files)
    return {
        "root": "lambdas/ + slotlock" if root == asset_root() else str(root),
        "excludes": list(patterns),
        "files": len(files),
        "bytes": raw,
        "zip_bytes": len(buffer.getvalue()),
        "zip_share_of_limit": len(buffer.getvalue()) / LAMBDA_ZIP_LIMIT_BYTES,
    }


def lambda_environment(
    job: Any, *, endpoint_url: str | None, lock_table: str, results_table: str, job_name: str | None = None
) -> dict[str, str]:
    """The function's environment as the stack sets it, plus what the Lambda service sets, for a child."""
    from athena_refresh import contract
    from athena_refresh.catalog import CATALOG_FILE, CatalogQuery, write_catalog

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_", "_X_AMZN"))}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
            "AWS_SESSION_TOKEN": CREDENTIALS["aws_session_token"],
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "PYTHONPATH": os.pathsep.join([str(asset_root()), str(REPO_ROOT)]),
            "PYTHONDONTWRITEBYTECODE": "1",
            # What the Lambda service sets; LAMBDA_TASK_ROOT makes Powertools' Tracer run (tracing is ACTIVE).
            "LAMBDA_TASK_ROOT": str(asset_root()),
            "AWS_LAMBDA_FUNCTION_NAME": "athena-refresh-bench",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(job.lambda_memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "_X_AMZN_TRACE_ID": f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=1",
            "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:2000",  # UDP to loopback; nothing listens, segments are dropped
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        }
    )
    # What the stack sets (stacks/constructs/refresh_function.py), from the same builder, and the job catalog it
    # bundles: the job's spec (its SQL the bench's, renamed per cold start), read and validated by the cold start.
    name = job_name or job.job_name
    spec = dataclasses.replace(job, job_name=name, sql=BENCH_SQL)
    env.update(spec.wiring_environment(lock_table_name=lock_table, results_table_name=results_table))
    catalog_dir = Path(tempfile.mkdtemp(prefix="bench-catalog-"))
    atexit.register(shutil.rmtree, catalog_dir, True)
    query = CatalogQuery(BENCH_SQL, spec=spec)
    env[contract.ENV_JOB_CATALOG_PATH] = str(write_catalog(catalog_dir / CATALOG_FILE, {name: query}))
    if endpoint_url:
        env["AWS_ENDPOINT_URL"] = endpoint_url
    return env


def _cumulative_us(stderr: str, module: str) -> int | None:
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        fields = [f.strip() for f in line[len("import time:") :].split("|")]
        if len(fields) == 3 and fields[2] == module and fields[1].isdigit():
            return int(fields[1])
    return None


def _heaviest_packages(stderr: str, count: int = 6) -> list[tuple[str, float]]:
    """The packages (names without a dot) with the largest cumulative import time, in ms, wherever nested."""
    rows: dict[str, float] = {}
    for line in stderr.splitlines():
        fields = line[len("import time:") :].split("|") if line.startswith("import time:") else []
        if len(fields) == 3 and fields[1].strip().isdigit():
            name = fields[2].strip()
            if "." not in name and name not in (HANDLER_MODULE.split(".")[0], "site", "encodings"):
                rows[name] = max(rows.get(name, 0.0), int(fields[1]) / 1000)
    return sorted(rows.items(), key=lambda r: -r[1])[:count]


def import_time(job: Any, repetitions: int, python: str = sys.executable) -> dict[str, Any]:
    """Median and spread of the handler module's cumulative import time over fresh processes."""
    env = lambda_environment(job, endpoint_url=None, lock_table="locks", results_table="results")
    env["PYTHONPATH"] = str(asset_root())  # the asset first, as /var/task
    samples_ms, walls_s, top = [], [], []
    for _ in range(repetitions):
        started = time.perf_counter()
        done = subprocess.run(
            [python, "-X", "importtime", "-c", f"import {HANDLER_MODULE}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        walls_s.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"importing {HANDLER_MODULE} failed: {done.stderr[-2000:]}")
        cumulative = _cumulative_us(done.stderr, HANDLER_MODULE)
        if cumulative is None:
            raise RuntimeError(f"no importtime line for {HANDLER_MODULE}")
        samples_ms.append(cumulative / 1000)
        top = _heaviest_packages(done.stderr)
    return {"handler_import_ms": spread(samples_ms), "process_wall_s": spread(walls_s), "heaviest_packages_ms": top}


def _post_result(endpoint_url: str) -> None:
    header = {"Data": [{"VarCharValue": name} for name, _ in RESULT_COLUMNS]}
    rows = [{"Data": [{"VarCharValue": v} for v in row]} for row in RESULT_ROWS]
    body = {
        "account_id": "123456789012",
        "region": REGION,
        "results": [
            {
                "rows": [header, *rows],
                "column_info": [
                    {"Name": name, "Label": name, "Type": kind, "Nullable": "UNKNOWN", "CaseSensitive": True}
                    for name, kind in RESULT_COLUMNS
                ],
            }
        ],
    }
    request = urllib.request.Request(
        f"{endpoint_url}/moto-api/static/athena/query-results",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def _interpreter_baseline_kb(python: str) -> int:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across execve, so a child would report its parent's peak.
    code = "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=True)
    return int(done.stdout.strip())


def invocation_memory(endpoint: Endpoint, job: Any, repetitions: int, python: str = sys.executable) -> dict[str, Any]:
    """Peak RSS (and import/invoke time) of one real invocation per fresh process, against moto."""
    session = make_session()
    ddb = session.client("dynamodb", endpoint_url=endpoint.url)
    athena = session.client("athena", endpoint_url=endpoint.url)
    suffix = uuid.uuid4().hex[:8]
    lock_table, results_table = f"cold-locks-{suffix}", f"cold-results-{suffix}"
    from athena_refresh.results import create_results_table  # the measured import happens in a fresh child
    from slotlock import create_lock_table

    create_lock_table(ddb, lock_table)
    create_results_table(ddb, results_table)
    try:
        athena.create_work_group(Name=job.workgroup)
    except athena.exceptions.InvalidRequestException:
        pass  # exists already on this server
    slot = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    samples: list[dict[str, Any]] = []
    for rep in range(repetitions):
        _post_result(endpoint.url)
        env = lambda_environment(
            job,
            endpoint_url=endpoint.url,
            lock_table=lock_table,
            results_table=results_table,
            job_name=f"cold-{suffix}-{rep}",
        )
        done = subprocess.run(
            [python, "-m", "bench.invoke_once", "--slot", slot, "--memory-mb", str(job.lambda_memory_mb)],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"invoke_once failed ({done.returncode}): {done.stderr[-2000:]}{done.stdout[-1000:]}")
        result = json.loads(lines[-1][len(RESULT_PREFIX) :])
        if result["status"] != "succeeded":
            raise RuntimeError(f"the invocation did not succeed: {result}")
        samples.append(result)
    peak_mb = [s["peak_rss_kb"] / 1024 for s in samples]
    return {
        "repetitions": samples,
        "peak_rss_mb": spread(peak_mb),
        "rss_after_import_mb": spread([s["rss_after_import_kb"] / 1024 for s in samples]),
        "import_s": spread([s["import_s"] for s in samples]),
        "invoke_s": spread([s["invoke_s"] for s in samples]),
        "interpreter_only_mb": _interpreter_baseline_kb(python) / 1024,
        "configured_memory_mb": job.lambda_memory_mb,
        "fits_configured": max(peak_mb) <= job.lambda_memory_mb,
        "fits_128_mb": max(peak_mb) <= SMALLEST_LAMBDA_MB,
    }


def cold_start(endpoint: Endpoint, repetitions: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """All cold-start figures; ``endpoint`` must be the atomic moto server (it serves Athena too)."""
    job = job_config()
    say(f"  import time of {HANDLER_MODULE} (-X importtime) x {repetitions} ...")
    imports = import_time(job, repetitions)
    say(f"  peak RSS of one invocation in a fresh process x {repetitions} ...")
    memory = invocation_memory(endpoint, job, repetitions)
    return {"import": imports, "memory": memory, "asset": asset_size()}
