"""One local "deployment" of the stack for a run of ``local.demo`` or ``local.chaos``: no AWS account.

What ``cdk deploy`` creates, stood up on this machine: a DynamoDB endpoint (AWS DynamoDB Local, or the
atomic moto server of :mod:`local.emulators.atomic_moto`, which also serves S3), the lock table
(:func:`slotlock.create_lock_table`), the results table (:func:`athena_refresh.results.create_results_table`),
optionally the results bucket (moto only), the job catalog (:func:`athena_refresh.catalog.write_catalog`, as the
stack writes it: the jobs' specs and the capacity budget), and the function's environment: what the stack sets
(:meth:`athena_refresh.jobspec.JobSpec.wiring_environment`) plus what the Lambda service sets, pointed at the
local endpoint. At the end, :meth:`LocalDeployment.final_state` reads the stores back through the runtime's
own readers (``slotlock.SlotLock``, ``athena_refresh.results.ResultsStore``) for the checker
(:class:`local.scenario.checker.FinalState`), and :meth:`LocalDeployment.expected_rows` recomputes what the job's query gives
for each slot on DuckDB.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CATALOG_FILE, write_catalog
from athena_refresh.engine import client_request_token
from athena_refresh.results import ResultsStore, create_results_table
from athena_refresh.settings import Settings
from athena_refresh.stored import LIVE_GENERATION
from local.scenario.checker import FinalState
from slotlock import Slot, SlotLock, create_lock_table
from stacks.jobs import JobDefinition
from stacks.runtime_asset import catalog_queries

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("dynamodb-local", "atomic-moto")
REGION = "us-east-1"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


class LocalDeploymentError(RuntimeError):
    """The local deployment could not be stood up (a bucket without moto, an unknown backend)."""


def aws_env() -> dict[str, str]:
    """This process's environment without any real AWS setting, with fake credentials and the region."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(FAKE_CREDENTIALS, AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION)
    return env


class LocalDeployment:
    """The tables (and bucket) of one run of one or more jobs on a local endpoint; :meth:`close` is idempotent.

    ``backend``: one of :data:`BACKENDS`; ``dynamodb_endpoint`` reuses a running DynamoDB Local instead of
    starting one. ``results_bucket``: also create the results bucket (needs ``atomic-moto``). ``capacity``: the
    deployment's Athena capacity budget, written into its job catalog as the stack writes it (``None``: none, the
    budget off).
    """

    def __init__(
        self,
        jobs: JobDefinition | Sequence[JobDefinition],
        *,
        backend: str,
        workdir: Path,
        lock_table: str,
        results_table: str,
        results_bucket: str | None = None,
        dynamodb_endpoint: str | None = None,
        capacity: CapacityBudget | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise LocalDeploymentError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if results_bucket is not None and backend != "atomic-moto":
            raise LocalDeploymentError("a results bucket needs the atomic-moto backend (it serves S3)")
        self.jobs = (jobs,) if isinstance(jobs, JobDefinition) else tuple(jobs)
        self.definition = self.jobs[0]  # the default job of the methods below
        self.job = self.definition.config
        self.catalog_path = workdir / CATALOG_FILE
        self.backend = backend
        self.workdir = workdir
        self.lock_table = lock_table
        self.results_table = results_table
        self.results_bucket = results_bucket
        self.capacity = capacity
        self.endpoint: str | None = dynamodb_endpoint if backend == "dynamodb-local" else None
        self._reused = self.endpoint is not None
        self._ddb_local: Any = None
        self._moto_proc: Any = None

    # ---- set-up ------------------------------------------------------------------------------------
    def start(self) -> str:
        """Start the backend (unless reused), create the tables and bucket; returns the endpoint URL."""
        if self.endpoint is None:
            if self.backend == "dynamodb-local":
                from local.emulators.dynamodb_local import DynamoDBLocal, ensure_dynamodb_local

                self._ddb_local = DynamoDBLocal(ensure_dynamodb_local()).start()
                self.endpoint = str(self._ddb_local.endpoint_url)
            else:
                from local.emulators.atomic_moto import start_server_process

                log_path = self.workdir / "moto.log"
                log_path.unlink(missing_ok=True)
                self._moto_proc, endpoint = start_server_process(log_path=log_path, env=aws_env(), timeout_s=60)
                self.endpoint = str(endpoint)
        # The job catalog the stack bundles in the asset (athena_refresh.catalog), for these jobs and the budget.
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_catalog(self.catalog_path, catalog_queries(self.jobs), capacity=self.capacity)
        ddb = self.client("dynamodb")
        create_lock_table(ddb, self.lock_table)
        create_results_table(ddb, self.results_table)
        if self.results_bucket is not None:
            self.client("s3").create_bucket(Bucket=self.results_bucket)
        return self.endpoint

    @property
    def server_pid(self) -> int | None:
        """The moto server's or DynamoDB Local's process id (``None`` when reused or not started)."""
        if self._moto_proc is not None:
            return int(self._moto_proc.pid)
        pid = getattr(self._ddb_local, "pid", None)
        return None if pid is None else int(pid)

    def client(self, service: str) -> Any:
        """A boto3 client of ``service`` on the local endpoint (standard retry mode, 5 attempts)."""
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            config=Config(retries={"mode": "standard", "max_attempts": 5}),
        )

    def function_env(
        self,
        *,
        function_name: str,
        lease_duration_s: float | None,
        heartbeat_interval_s: float | None,
        max_slot_age_s: float | None,
        log_level: str | None = None,
        job: JobDefinition | None = None,
    ) -> dict[str, str]:
        """The environment of one execution environment of the function.

        What the Lambda service sets (function name, memory, version, log group), what the stack sets
        (``JobSpec.wiring_environment``) with this run's tables and its short lease and widened slot age (each
        ``None``: the job's own, as deployed), and the endpoint: every client on the moto server (it serves S3 too), or DynamoDB's alone on
        DynamoDB Local. ``job``: one of the deployment's jobs (default: the first).
        """
        config = (job or self.definition).config
        env = aws_env()
        endpoint_variable = "AWS_ENDPOINT_URL" if self.backend == "atomic-moto" else "AWS_ENDPOINT_URL_DYNAMODB"
        env.update(
            {
                endpoint_variable: str(self.endpoint),
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "lambdas")]),
                "PYTHONUNBUFFERED": "1",
                "AWS_LAMBDA_FUNCTION_NAME": function_name,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(config.lambda_memory_mb),
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function_name}",
                "POWERTOOLS_TRACE_DISABLED": "true",
            }
        )
        if log_level is not None:
            env["POWERTOOLS_LOG_LEVEL"] = log_level
        env[contract.ENV_JOB_CATALOG_PATH] = str(self.catalog_path)
        env.update(
            config.wiring_environment(
                lock_table_name=self.lock_table,
                results_table_name=self.results_table,
                results_bucket_name=self.results_bucket,
                lease_duration_s=lease_duration_s,
                heartbeat_interval_s=heartbeat_interval_s,
                max_slot_age_s=max_slot_age_s,
            )
        )
        return env

    # ---- read back ---------------------------------------------------------------------------------
    def final_state(self, job_name: str | None = None) -> FinalState:
        """Every slot item of the job (planned or not: a near-future slot shows too) and of every manual
        generation (``slot#<job>#<slot>#g<n>``), every result (generation 1 by slot, the others by (slot,
        generation)), LATEST. Strongly consistent reads.

        ``job_name``: one of the deployment's jobs (default: the first).
        """
        job_name = job_name or self.job.job_name
        ddb = self.client("dynamodb")
        s3 = self.client("s3") if self.results_bucket is not None else None
        lock = SlotLock(self.lock_table, job_name, client=ddb)
        store = ResultsStore(self.results_table, bucket_name=self.results_bucket, dynamodb_client=ddb, s3_client=s3)
        state = FinalState()
        prefix = lock.slot_key(Slot(0)).rsplit("#", 1)[0] + "#"
        pages = ddb.get_paginator("scan").paginate(
            TableName=self.lock_table, ConsistentRead=True, ProjectionExpression="pk"
        )
        for page in pages:
            for key in page["Items"]:
                pk = key["pk"]["S"]
                if not pk.startswith(prefix):
                    continue
                slot_iso, _, suffix = pk[len(prefix) :].partition("#g")
                generation = int(suffix) if suffix.isdigit() else LIVE_GENERATION
                item = lock.for_generation(generation).get_slot(Slot.parse(slot_iso))
                if item is None:
                    continue
                if generation == LIVE_GENERATION:
                    state.slot_items[slot_iso] = item
                else:
                    state.generation_items[(slot_iso, generation)] = item
        for item in store.list_results(job_name):  # rows come inline unless offloaded to S3
            slot_iso = str(item.get("slot_time") or item["slot"])
            generation = int(item.get("generation") or LIVE_GENERATION)
            if "rows_s3_uri" in item:
                item = store.get_result(job_name, slot_iso, generation) or item
            if generation == LIVE_GENERATION:
                state.results[slot_iso] = item
            else:
                state.generation_results[(slot_iso, generation)] = item
        state.latest = store.get_latest(job_name)
        return state

    def expected_rows(self, env: dict[str, str], slots: list[str], *, data_dir: Path) -> dict[str, Any]:
        """The rows the job's query gives for each slot, computed afresh (DuckDB, no simulated duration).

        ``env``: the function's environment (:meth:`function_env`), read as the runtime reads it.
        """
        from local.emulators.duckdb_engine import DuckDBQueryEngine

        settings = Settings.from_env(env)
        expected: dict[str, Any] = {}
        state_dir = self.workdir / "expected" / settings.job_name
        shutil.rmtree(state_dir, ignore_errors=True)  # a previous run's executions (same tokens, other SQL)
        with DuckDBQueryEngine(data_dir=data_dir, state_dir=state_dir) as engine:
            for slot_iso in slots:
                parameters = settings.execution_parameters(Slot.parse(slot_iso).datetime)
                qid = engine.start_query(
                    sql=settings.query_sql,
                    parameters=parameters,
                    client_request_token=client_request_token(
                        "local-expected", slot_iso, 1, deployment_id=self.lock_table
                    ),
                )
                expected[slot_iso] = json.loads(json.dumps(engine.get_results(qid).rows))
        return expected

    # ---- teardown ----------------------------------------------------------------------------------
    def close(self) -> None:
        if self._ddb_local is not None:
            with contextlib.suppress(Exception):
                self._ddb_local.stop()
            self._ddb_local = None
        if self._moto_proc is not None:
            from local.emulators.atomic_moto import stop_server_process

            with contextlib.suppress(Exception):
                stop_server_process(self._moto_proc)
            self._moto_proc = None
