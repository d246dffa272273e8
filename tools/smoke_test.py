"""Opt-in smoke test of a DEPLOYED stack: race the function for one slot, check exactly one committed result.

    python -m tools.smoke_test --stack-name ScheduledAthenaRefresh [--job NAME] [--region R] [--invocations N]
                               [--slot ISO]

Uses real AWS credentials from the environment, costs one Athena query, and refuses to run when the
environment variable ``CI`` is set (it is never part of ``make test`` or CI). Steps:

1. find the job's function, the lock table and the results table: the shared stack's CfnOutputs
   ``LockTableName``, ``ResultsTableName`` (for a missing one, ``DescribeStackResources`` by the logical-id
   prefix ``LockTable`` / ``ResultsTable`` and resource type) and ``JobRegistryPath``; the job's entry in that
   job registry (:mod:`tools.registry`: ``GetParametersByPath`` of the job's own path, or with no ``--job`` of
   the registry, which must list exactly one job) names its function, log group and number of racers (the default invocations).
   The function's ``JOB_NAME`` variable must be the entry's job;
2. pick a fresh slot: ``--slot``, or the current minute (a real slot newer than it would make it lose
   as superseded, so it is the newest possible); refuse a slot that already has a result;
3. invoke the function N times asynchronously (``InvocationType=Event``, what Scheduler does) with the
   Scheduler-shaped input ``{"scheduled_time", "execution_id", "racer", "job"}`` (``--sync``: invoke
   concurrently with ``RequestResponse`` instead and check each racer's outcome too);
4. wait (bounded, ``--timeout-s``) for the slot item to reach a final status, then check: status
   SUCCEEDED, one result item for the slot whose fencing token and query execution id are the slot
   item's, the lease released; with ``--sync`` exactly one racer ``succeeded`` and the others ``lost``;
5. print a summary; exit status 0 when every check passed, 1 when one failed, 2 when it refused to run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh import contract
from athena_refresh.results import ResultsStore
from slotlock import Slot, SlotLock, SlotLockError
from tools.aws_errors import client, error_line
from tools.cli.params import REGION_HELP, local_setting_refusal
from tools.cli.program import prog
from tools.registry import REGISTRY_PATH_OUTPUT, JobRegistryEntry, JobRegistryError, get_job, list_jobs

#: The shared stack's CfnOutputs naming the tables, and the logical-id prefix + resource type this tool falls
#: back to when one is missing.
OUTPUTS = {
    "LockTableName": ("LockTable", "AWS::DynamoDB::Table"),
    "ResultsTableName": ("ResultsTable", "AWS::DynamoDB::Table"),
}
#: The shared stack's deployment-wide on-failure queue (named when no racer ran).
FAILURE_QUEUE_OUTPUT = "FailureQueueUrl"
FINAL_STATUSES = ("SUCCEEDED", "FAILED", "MISSED")
DEFAULT_TIMEOUT_S = 360.0  # above the default Lambda timeout (300 s): the winner's whole run fits
DEFAULT_POLL_S = 3.0


class SmokeTestError(Exception):
    """The smoke test could not run (stack not found, an output is missing, the slot is not fresh)."""


@dataclass(frozen=True)
class StackTargets:
    """What the smoke test acts on, read from the deployed stack."""

    function_name: str
    lock_table: str
    results_table: str
    job_name: str
    racers: int
    log_group_name: str | None = None
    failure_queue_url: str | None = None


@dataclass
class SmokeReport:
    """The outcome of one smoke run; ``failures`` empty means it passed."""

    targets: StackTargets
    slot: str
    invocations: int
    elapsed_s: float = 0.0
    slot_status: str | None = None
    fencing_token: int | None = None
    query_execution_id: str | None = None
    row_count: int | None = None
    data_scanned_bytes: int | None = None
    outcomes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        t = self.targets
        out = [
            f"stack function {t.function_name}, job {t.job_name!r}, lock {t.lock_table}, results {t.results_table}",
            f"slot {self.slot}: {self.invocations} invocations, waited {self.elapsed_s:.1f} s",
            (
                f"slot status {self.slot_status}, fencing token {self.fencing_token},"
                f" query {self.query_execution_id}, rows {self.row_count}, scanned {self.data_scanned_bytes} bytes"
            ),
        ]
        if self.outcomes:
            out.append("racer outcomes: " + ", ".join(self.outcomes))
        out.extend(f"FAILED: {failure}" for failure in self.failures)
        out.append("PASSED" if self.passed else "SMOKE TEST FAILED")
        return out


def discover(
    cloudformation: Any, ssm: Any, lambda_client: Any, stack_name: str, job: str | None = None
) -> StackTargets:
    """Read the shared stack's outputs (falling back to its resources for a table), ``job``'s job registry entry,
    and the function's job name.

    ``job``: one of the registry's jobs; ``None`` when the registry lists exactly one.

    Raises
    ------
    SmokeTestError
        The stack does not exist or has no job registry, the job is not in the registry (or several are and
        none was named), an entry is malformed, a table cannot be found unambiguously, or the function serves
        another job.
    """
    try:
        [stack] = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        raise SmokeTestError(f"stack {stack_name!r}: {exc}") from exc
    found = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    path = found.get(REGISTRY_PATH_OUTPUT)
    if not path:
        raise SmokeTestError(
            f"stack {stack_name!r} has no output {REGISTRY_PATH_OUTPUT}: not this project's shared stack, or"
            " deployed by a version before the job registry"
        )
    entry = _registry_entry(ssm, path, stack_name, job)
    resources: list[dict[str, Any]] | None = None
    names: dict[str, str] = {}
    for output, (prefix, kind) in OUTPUTS.items():
        if output in found:
            names[output] = found[output]
            continue
        if resources is None:
            resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
        matches = [
            r["PhysicalResourceId"]
            for r in resources
            if r["LogicalResourceId"].startswith(prefix) and r["ResourceType"] == kind
        ]
        if len(matches) != 1:
            raise SmokeTestError(
                f"stack {stack_name!r} has no output {output} and {len(matches)} {kind} resources with logical id"
                f" prefix {prefix!r} (expected exactly one)"
            )
        names[output] = matches[0]
    configuration = lambda_client.get_function_configuration(FunctionName=entry.function_name)
    job_name = configuration.get("Environment", {}).get("Variables", {}).get(contract.ENV_JOB_NAME)
    if not job_name:
        raise SmokeTestError(f"function {entry.function_name} has no {contract.ENV_JOB_NAME} variable")
    if job_name != entry.job:
        raise SmokeTestError(
            f"the job registry's entry of {entry.job!r} names function {entry.function_name}, whose"
            f" {contract.ENV_JOB_NAME} is {job_name!r}"
        )
    return StackTargets(
        entry.function_name,
        names["LockTableName"],
        names["ResultsTableName"],
        job_name,
        entry.racers,
        log_group_name=entry.log_group_name,
        failure_queue_url=found.get(FAILURE_QUEUE_OUTPUT),
    )


def _registry_entry(ssm: Any, path: str, stack_name: str, job: str | None) -> JobRegistryEntry:
    """``job``'s entry in the registry at ``path`` (``None``: the registry's only job)."""
    try:
        if job is not None:
            return get_job(ssm, path, job)
        jobs = list_jobs(ssm, path)
    except JobRegistryError as exc:
        raise SmokeTestError(str(exc)) from exc
    if len(jobs) != 1:
        listed = ", ".join(jobs) or "(none)"
        raise SmokeTestError(f"stack {stack_name!r}'s job registry {path} has jobs {listed}: pass --job")
    return next(iter(jobs.values()))


def scheduler_input(slot: Slot, racer: int, job: str, execution_id: str) -> dict[str, Any]:
    """The input the stack's schedules send (``slotlock_cdk.FanoutSchedule``)."""
    return {"scheduled_time": slot.iso, "execution_id": execution_id, "racer": racer, "job": job}


def run_smoke(
    targets: StackTargets,
    *,
    lambda_client: Any,
    dynamodb: Any,
    s3: Any = None,
    invocations: int | None = None,
    slot: Slot | None = None,
    sync: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = DEFAULT_POLL_S,
    clock_s: Callable[[], float] = time.time,
    sleep_s: Callable[[float], None] = time.sleep,
) -> SmokeReport:
    """Invoke the racers for one fresh slot and check the committed result (see the module docstring).

    Raises
    ------
    SmokeTestError
        The slot already has a result or a history item (not fresh).
    """
    slot = slot or Slot(int(clock_s()))
    count = invocations or targets.racers
    lock = SlotLock(targets.lock_table, targets.job_name, client=dynamodb)
    store = ResultsStore(targets.results_table, dynamodb_client=dynamodb, s3_client=s3)
    if store.get_result(targets.job_name, slot.iso) is not None:
        raise SmokeTestError(f"slot {slot.iso} already has a result: pass another --slot or retry in a minute")
    existing = lock.get_slot(slot)
    if existing is not None:
        raise SmokeTestError(
            f"slot {slot.iso} already has a history item (status {existing.get('status')}):"
            " not a fresh slot; pass another --slot or retry in a minute"
        )
    report = SmokeReport(targets, slot.iso, count)
    execution_id = f"smoke-{uuid.uuid4()}"
    payloads = [json.dumps(scheduler_input(slot, i, targets.job_name, execution_id)).encode() for i in range(count)]
    started = clock_s()
    if sync:
        with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
            responses = list(
                pool.map(
                    lambda payload: lambda_client.invoke(
                        FunctionName=targets.function_name, InvocationType="RequestResponse", Payload=payload
                    ),
                    payloads,
                )
            )
        for response in responses:
            body = json.loads(response["Payload"].read() or b"null")
            if response.get("FunctionError"):
                report.outcomes.append("error")
                report.failures.append(f"an invocation failed: {body}")
            else:
                report.outcomes.append(f"{body.get('status')}" + (f"/{body['reason']}" if body.get("reason") else ""))
        winners = [o for o in report.outcomes if o == "succeeded"]
        losers = [o for o in report.outcomes if o.startswith("lost/")]
        if len(winners) != 1 or len(losers) != count - 1:
            report.failures.append(f"expected 1 succeeded and {count - 1} lost, got {report.outcomes}")
    else:
        for payload in payloads:
            status = lambda_client.invoke(FunctionName=targets.function_name, InvocationType="Event", Payload=payload)[
                "StatusCode"
            ]
            if status != 202:
                report.failures.append(f"asynchronous invoke returned HTTP {status}, expected 202")
    item = _wait_for_final(lock, slot, started, timeout_s, poll_s, clock_s, sleep_s)
    report.elapsed_s = clock_s() - started
    _check(report, item, lock, store, targets, slot, timeout_s)
    return report


def _wait_for_final(
    lock: SlotLock,
    slot: Slot,
    started: float,
    timeout_s: float,
    poll_s: float,
    clock_s: Callable[[], float],
    sleep_s: Callable[[float], None],
) -> dict[str, Any] | None:
    while True:
        item = lock.get_slot(slot)
        if item is not None and item.get("status") in FINAL_STATUSES:
            return item
        remaining = started + timeout_s - clock_s()
        if remaining <= 0:
            return item
        sleep_s(min(poll_s, remaining))


def _check(
    report: SmokeReport,
    item: dict[str, Any] | None,
    lock: SlotLock,
    store: ResultsStore,
    targets: StackTargets,
    slot: Slot,
    timeout_s: float,
) -> None:
    if item is None:
        logs = f" in log group {targets.log_group_name}" if targets.log_group_name else ""
        queue = f" {targets.failure_queue_url}" if targets.failure_queue_url else ""
        report.failures.append(
            f"no history item for slot {slot.iso} after {timeout_s:.0f} s: did any racer run?"
            f" (see the function's logs{logs} and the on-failure queue{queue})"
        )
        return
    report.slot_status = item.get("status")
    report.fencing_token = item.get("fencing_token")
    if report.slot_status != "SUCCEEDED":
        report.failures.append(
            f"slot status {report.slot_status} (reason {item.get('reason')},"
            f" error {item.get('error')}), expected SUCCEEDED"
        )
        return
    result = store.get_result(targets.job_name, slot.iso)
    if result is None:
        report.failures.append(f"slot {slot.iso} SUCCEEDED but the results table has no result for it")
        return
    report.query_execution_id = result.get("query_execution_id")
    report.row_count = result.get("row_count")
    report.data_scanned_bytes = (result.get("statistics") or {}).get("data_scanned_bytes")
    if result.get("fencing_token") != report.fencing_token:
        report.failures.append(f"result token {result.get('fencing_token')} != slot item token {report.fencing_token}")
    summary = item.get("summary") or {}
    if summary.get("query_execution_id") != report.query_execution_id:
        report.failures.append(
            f"result query {report.query_execution_id} != slot summary's {summary.get('query_execution_id')}"
        )
    if len(result.get("rows") or []) != report.row_count:
        report.failures.append(f"result holds {len(result.get('rows') or [])} rows, row_count says {report.row_count}")
    record = lock.get_lock()
    if record.owner_id is not None or record.last_finished_slot != slot:
        report.failures.append(f"lock not released on slot {slot.iso}: {record}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog("python -m tools.smoke_test"),
        description="Smoke-test a DEPLOYED stack with real credentials (one Athena query). Never run in CI.",
    )
    parser.add_argument("--stack-name", required=True)
    parser.add_argument(
        "--job", help="the job to race (one of the stack's job registry; optional when it lists one job)"
    )
    parser.add_argument("--region", help=REGION_HELP)
    parser.add_argument(
        "--invocations", type=int, help="racers to invoke (default: the job's racers, from its registry entry)"
    )
    parser.add_argument("--slot", help="scheduled time to race for, e.g. 2026-11-22T10:07:00Z (default: this minute)")
    parser.add_argument("--sync", action="store_true", help="invoke with RequestResponse and check every outcome")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S)
    args = parser.parse_args(argv)
    if args.invocations is not None and not 1 <= args.invocations <= 50:
        parser.error("--invocations must be from 1 to 50")
    if args.timeout_s <= 0:
        parser.error("--timeout-s must be positive")
    return args


def main(
    argv: Sequence[str] | None = None,
    *,
    session: Any = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    **run_options: Any,
) -> int:
    """The CLI. ``session`` (a boto3 Session) and ``run_options`` (clock, sleep) are injected by tests."""
    out, err = out or sys.stdout, err or sys.stderr
    args = parse_args(argv)
    refusal = local_setting_refusal("ops smoke-test")
    if refusal is not None:
        print(f"refusing to run: {refusal}", file=err)
        return 2
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        print(
            "refusing to run: CI is set. This smoke test uses real AWS credentials and is run by hand only.", file=err
        )
        return 2
    try:
        slot = Slot.parse(args.slot, field="--slot") if args.slot else None
        session = session or boto3.session.Session(region_name=args.region)
        cloudformation = client(session, "cloudformation")
        lambda_client = client(session, "lambda", read_timeout=900)
        ssm = client(session, "ssm")
        targets = discover(cloudformation, ssm, lambda_client, args.stack_name, args.job)
        report = run_smoke(
            targets,
            lambda_client=lambda_client,
            dynamodb=client(session, "dynamodb"),
            s3=client(session, "s3"),
            invocations=args.invocations,
            slot=slot,
            sync=args.sync,
            timeout_s=args.timeout_s,
            **run_options,
        )
    except (SmokeTestError, SlotLockError, ClientError, BotoCoreError) as exc:
        error_line(err, exc, "smoke test could not run")
        return 1
    for line in report.lines():
        print(line, file=out)
    return 0 if report.passed else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
