"""The deployed functions' paths, run with their real handlers on in-process moto under a :class:`CallRecorder`.

:class:`ConformanceWorld` stands the synthesized deployment (every stack) up on moto with the names it would have
(:class:`~tests.stacks.iam.template.ResolvedTemplate`): the lock and results tables, the bucket, the workgroup and
the job registry's parameters (what the operator's tools list the jobs from). Each function runs in *its own*
environment as the template sets it, with the job catalog of *its own* asset (a job function: its job's only; the
read side: the shared stack's combined one), as its own principal:

- every job's refresh function: a live slot whose query runs long enough for heartbeats (moto keeps it RUNNING
  for a few polls), result rows too large for an item (the S3 offload), and a winner that dies after starting
  its query (no release, as a killed environment) whose successor takes over after the lease and adopts the
  query; each winner under a permit of the capacity semaphore, and (:mod:`tests.stacks.iam.capacity`) a slot that
  waits for a permit, is given back to a one-time Scheduler schedule and committed by its re-invocation;
- the operator (``python -m tools.ops``: status, history, pause, resume, release, release --force, run, rerun,
  backfill; ``python -m tools.results``: jobs, latest, history): its ``lambda.Invoke`` runs the job's handler
  in-process as the function's principal (the manual path: run, rerun and backfill generations);
- the read API (every route, a result offloaded to S3: a presigned ``GetObject``) and the dashboard widget (a job's
  latest result, and the overview of every job).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import inspect
import io
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto.athena.models import QueryResults, athena_backends
from moto.moto_api import state_manager

from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CATALOG_FILE, load_job
from athena_refresh.results import create_results_table
from slotlock import create_lock_table
from slotlock.runner import SlotRunner
from slotlock.schedule import latest_firings
from tests.stacks.iam.permissions import ACCOUNT, AthenaWorld, TableLocation
from tests.stacks.iam.recorder import CallRecorder
from tests.stacks.iam.template import REGION, ResolvedTemplate

OPERATOR = "operator"
READ_API = "read-api"
WIDGET = "widget"
WATCHDOG = "watchdog"
WATCHDOG_HANDLER = "athena_refresh.watchdog_handler.lambda_handler"
API_HANDLER = "results_api.handler.api_handler"
WIDGET_HANDLER = "results_api.handler.widget_handler"
REFRESH_HANDLER = "athena_refresh.handler.lambda_handler"
#: Rows of about 1 KB each: 400 of them exceed the 300 KB kept inline in an item (``results.MAX_INLINE_BYTES``).
OFFLOAD_ROWS = 400


def refresh_principal(job: str) -> str:
    return f"refresh:{job}"


class Crash(BaseException):
    """A killed execution environment: raised from a checkpoint, past every ``except Exception``."""


@dataclass
class FakeContext:
    """The Lambda context members the handlers read."""

    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 256
    remaining_ms: int = 300_000

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class ManualClock:
    """The lock's clock (epoch ms): the system clock shifted so that it read ``at_ms`` when set (time still
    passes, so heartbeats fall due); ``at_ms = None``: the system clock."""

    offset_ms: int = 0

    @staticmethod
    def _system_ms() -> int:
        return time.time_ns() // 1_000_000

    def set(self, at_ms: int | None) -> None:
        self.offset_ms = 0 if at_ms is None else at_ms - self._system_ms()

    def __call__(self) -> int:
        return self._system_ms() + self.offset_ms

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead at once (a fake sleep: a wait of seconds costs none)."""
        self.offset_ms += int(seconds * 1000)


class ConformanceWorld:
    """The deployment on moto (inside an active ``mock_aws``), its functions and the recorder.

    ``job_assets``: each job function's asset directory (job -> dir, its ``job_catalog.json`` holding that job only);
    ``read_asset``: the read side's (the shared stack's combined catalog).
    """

    def __init__(
        self,
        resolved: ResolvedTemplate,
        recorder: CallRecorder,
        *,
        job_assets: Mapping[str, Path],
        read_asset: Path,
    ) -> None:
        self.resolved = resolved
        self.recorder = recorder
        self.read_catalog_path = read_asset / CATALOG_FILE
        self.job_catalog_paths = {job: Path(folder) / CATALOG_FILE for job, folder in job_assets.items()}
        self.catalog: dict[str, Any] = {}  # job -> its entry, as its own function's asset holds it
        for job, path in self.job_catalog_paths.items():
            jobs = json.loads(path.read_text(encoding="utf-8"))["jobs"]
            assert list(jobs) == [job], f"{job}'s asset must hold its own catalog entry only, got {list(jobs)}"
            self.catalog[job] = jobs[job]
        functions = resolved.of_type("AWS::Lambda::Function")
        self.refresh_functions: dict[str, str] = {}  # job -> logical id
        self.watchdog_function = ""  # the freshness watchdog's logical id
        self.read_functions: dict[str, str] = {}  # principal -> logical id
        for logical_id, resource in functions.items():
            handler = resource["Properties"].get("Handler")
            env = resolved.function_environment(logical_id)
            if handler == REFRESH_HANDLER:
                self.refresh_functions[env[contract.ENV_JOB_NAME]] = logical_id
            elif handler == API_HANDLER:
                self.read_functions[READ_API] = logical_id
            elif handler == WIDGET_HANDLER:
                self.read_functions[WIDGET] = logical_id
            elif handler == WATCHDOG_HANDLER:
                self.watchdog_function = logical_id
        assert set(self.refresh_functions) == set(self.job_catalog_paths), (self.refresh_functions, job_assets)
        self.lock_clock = ManualClock()
        any_env = resolved.function_environment(next(iter(self.refresh_functions.values())))
        self.lock_table = any_env[contract.ENV_LOCK_TABLE_NAME]
        self.results_table = any_env[contract.ENV_RESULTS_TABLE_NAME]
        self.bucket = any_env[contract.ENV_RESULTS_BUCKET_NAME]
        self.athena = AthenaWorld(self._output_locations(), self._tables(), recorder.query_workgroups)

    # ---- the deployment's resources --------------------------------------------------------------------
    def _output_locations(self) -> dict[str, str]:
        found = {}
        for resource in self.resolved.of_type("AWS::Athena::WorkGroup").values():
            props = self.resolved.resolve(resource["Properties"])
            found[props["Name"]] = props["WorkGroupConfiguration"]["ResultConfiguration"]["OutputLocation"]
        return found

    def _tables(self) -> dict[str, TableLocation]:
        found = {}
        for resource in self.resolved.of_type("AWS::Glue::Table").values():
            props = self.resolved.resolve(resource["Properties"])
            table = props["TableInput"]
            parameters = table.get("Parameters", {})
            projected = str(parameters.get("projection.enabled", "false")).lower() == "true"
            found[f"{props['DatabaseName']}.{table['Name']}"] = TableLocation(
                database=props["DatabaseName"],
                table=table["Name"],
                location=table["StorageDescriptor"]["Location"],
                lists_partitions=bool(table.get("PartitionKeys")) and not projected,
            )
        return found

    def create(self) -> None:
        """The tables, the bucket, the workgroups and the job registry's parameters, named and valued as deployed
        (moto, our own set-up: not recorded)."""
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_lock_table(ddb, self.lock_table)
        create_results_table(ddb, self.results_table)
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=self.bucket)
        athena = boto3.client("athena", region_name=REGION)
        for name, output in self.athena.output_locations.items():
            athena.create_work_group(Name=name, Configuration={"ResultConfiguration": {"OutputLocation": output}})
        topic_arn = self.resolved.function_environment(self.watchdog_function)[contract.ENV_ALARM_TOPIC_ARN]
        boto3.client("sns", region_name=REGION).create_topic(Name=topic_arn.rsplit(":", 1)[1])
        ssm = boto3.client("ssm", region_name=REGION)
        for name, (type_, value) in self.resolved.parameters().items():
            ssm.put_parameter(Name=name, Type=type_, Value=value, Tier="Standard")

    def job_slots(self, job: str, count: int) -> list[str]:
        """The job's ``count`` latest schedule firings before now, oldest first (ISO 8601, UTC)."""
        schedule = self.catalog[job]["schedule"]
        until = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
        firings = latest_firings(schedule["expression"], schedule["timezone"], until, count)
        return [f.strftime("%Y-%m-%dT%H:%M:%SZ") for f in firings]

    def capacity_budget(self, job: str) -> CapacityBudget:
        """The deployment's capacity budget as the job's own catalog carries it (its ``capacity`` section)."""
        return load_job(job, self.job_catalog_paths[job])[1]

    # ---- running a function ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def environment(self, function_id: str, catalog_path: Path, **extra: str) -> Iterator[dict[str, str]]:
        """The process environment of ``function_id``'s execution environment, its asset's catalog at
        ``catalog_path`` (restored afterwards)."""
        env = self.resolved.function_environment(function_id)
        env.update(
            {
                contract.ENV_JOB_CATALOG_PATH: str(catalog_path),
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_LAMBDA_FUNCTION_NAME": self.resolved.name(function_id),
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_METRICS_DISABLED": "true",
                **extra,
            }
        )
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            yield env
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def invoke_refresh(
        self,
        job: str,
        event: dict[str, Any],
        scenario: str,
        *,
        crash_at: str | None = None,
        heartbeat_s: str | None = None,
        env: Mapping[str, str] | None = None,
        capacity_sleep_s: Callable[[float], None] | None = None,
    ) -> Any:
        """The job's real handler on ``event`` as its own principal; ``crash_at``: die at that checkpoint (no
        release, as a killed environment); ``heartbeat_s``: a shorter heartbeat interval and ``env`` other
        overrides of the function's environment (the runtime reads them from it); ``capacity_sleep_s``: the
        sleep between two polls for a capacity permit (a part of the runtime's deps; default ``time.sleep``)."""
        from athena_refresh.handler import make_handler
        from athena_refresh.service import Deps

        function_id = self.refresh_functions[job]
        extra = {contract.ENV_HEARTBEAT_INTERVAL_S: heartbeat_s} if heartbeat_s else {}
        extra.update(env or {})

        def listener(checkpoint: str, _lease: Any) -> None:
            if checkpoint == crash_at:
                raise Crash(checkpoint)

        context = FakeContext(self.resolved.name(function_id))
        environment = self.environment(function_id, self.job_catalog_paths[job], **extra)
        # A new execution environment per invocation: its deps (clients, lock, engine) built anew, on the lock clock.
        options: dict[str, Any] = {"clock_ms": self.lock_clock, "listener": listener}
        if capacity_sleep_s is not None:
            options["capacity_sleep_s"] = capacity_sleep_s
        lambda_handler = make_handler(lambda settings: Deps.from_settings(settings, **options))
        with environment, self.recorder.acting_as(refresh_principal(job), scenario):
            saved_release = SlotRunner._release_quietly
            if crash_at is not None:
                SlotRunner._release_quietly = lambda _self, _lease: None  # type: ignore[method-assign]
            try:
                return lambda_handler(event, context)
            except Crash:
                return {"outcome": "crashed"}
            finally:
                SlotRunner._release_quietly = saved_release  # type: ignore[method-assign]

    def invoke_watchdog(self, event: dict[str, Any], scenario: str, *, request_id: str | None = None) -> Any:
        """The freshness watchdog's real handler (its deployed deps, read from its environment and the shared stack's
        catalog) on ``event``, as its own principal, in a new execution environment; ``request_id``: the Lambda
        request id (a retry keeps it)."""
        from athena_refresh.watchdog_handler import deployed_deps, make_handler

        function_id = self.watchdog_function
        context = FakeContext(self.resolved.name(function_id))
        if request_id is not None:
            context.aws_request_id = request_id
        with self.environment(function_id, self.read_catalog_path), self.recorder.acting_as(WATCHDOG, scenario):
            return make_handler(deployed_deps)(event, context)

    def invoke_read(self, principal: str, event: dict[str, Any], scenario: str = "read") -> Any:
        from results_api import handler

        function_id = self.read_functions[principal]
        handler._reader = None
        handler._app = None
        entry = handler.api_handler if principal == READ_API else handler.widget_handler
        with self.environment(function_id, self.read_catalog_path), self.recorder.acting_as(principal, scenario):
            return entry(event, FakeContext(self.resolved.name(function_id)))

    # ---- Athena on moto -------------------------------------------------------------------------------
    @staticmethod
    def queue_results(rows: list[list[str]], columns: list[tuple[str, str]]) -> None:
        """The result set of the next query moto's Athena starts (header row first, as Athena's SELECT)."""
        header = [{"Data": [{"VarCharValue": name} for name, _ in columns]}]
        data = [{"Data": [{"VarCharValue": value} for value in row]} for row in rows]
        info = [{"Name": name, "Type": type_, "Label": name} for name, type_ in columns]
        athena_backends[ACCOUNT][REGION].query_results_queue.append(QueryResults(header + data, info))

    @staticmethod
    def keep_queries_running(polls: int) -> None:
        """Every query moto starts from now on stays RUNNING for ``polls`` polls of ``GetQueryExecution``."""
        state_manager.set_transition(
            model_name="athena::execution", transition={"progression": "manual", "times": polls}
        )

    @staticmethod
    def finish_queries_at_once() -> None:
        state_manager.unset_transition(model_name="athena::execution")


def invoke_answer(world: ConformanceWorld) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``lambda.Invoke`` answered by running the function's real handler in-process (moto's Lambda needs
    Docker), as the function's principal, with the lock on the system clock (the operator's time)."""
    by_name = {world.resolved.name(fid): job for job, fid in world.refresh_functions.items()}

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        name = params["FunctionName"].rsplit(":", 1)[-1]
        event = json.loads(params.get("Payload") or b"{}")
        world.lock_clock.set(None)
        world.invoke_refresh(by_name[name], event, "invoked by the operator")
        return {"StatusCode": 202, "ResponseMetadata": {"RequestId": str(uuid.uuid4())}}

    return answer


def describe_stacks_answer(world: ConformanceWorld) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``cloudformation.DescribeStacks`` of the shared stack answered with its outputs, resolved (the tools read no
    other stack: the jobs are in the job registry)."""

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        assert params["StackName"] == world.resolved.stack_name, f"DescribeStacks of {params['StackName']}"
        outputs = [{"OutputKey": key, "OutputValue": value} for key, value in world.resolved.outputs().items()]
        return {"Stacks": [{"StackName": params["StackName"], "Outputs": outputs, "StackStatus": "UPDATE_COMPLETE"}]}

    return answer


def run_cli(main: Callable[..., int], argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` of ``tools.ops`` (one ``out``) or ``tools.results`` (``stdout``/``stderr``): status and text."""
    out, err = io.StringIO(), io.StringIO()
    if "stdout" in inspect.signature(main).parameters:
        code = main(argv, stdout=out, stderr=err)
    else:
        code = main(argv, out=out)
    return code, out.getvalue() + err.getvalue()
