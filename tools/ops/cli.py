"""``python -m tools.ops``: status, history, pause, resume, release, run, rerun and backfill of a deployed stack.

    python -m tools.ops [--stack ScheduledAthenaRefresh] [--region R] <command> [options]   (--help on each)

The deployment comes from the shared stack's CloudFormation outputs (``LockTableName``, ``ResultsTableName``,
``JobRegistryPath``) and the jobs from its job registry (:mod:`tools.registry`: each job's function and schedule):
``GetParametersByPath`` of the registry for every job, of the job's own path for the one ``--job`` names. ``--lock-table`` and
``--results-table`` name the tables instead (the stack is then not read; the registry is ``/<--stack>/jobs/``),
``--function JOB=NAME`` overrides a job's function, and ``--endpoint-url`` points DynamoDB at DynamoDB Local. Every
change is audited with the caller's identity from STS ``GetCallerIdentity``.

``--local`` (or ``ATHENA_ONCE_LOCAL=1``) acts on the local world of ``make serve`` instead (:mod:`local.serve.world`:
its world file names the tables, the registry and the endpoints; every client, Lambda's included, goes to it with
its fake credentials, never to AWS); with no world running it refuses in one line saying how to start one.
``--local`` with ``--endpoint-url`` is a usage error (two worlds named).

Commands that change anything (pause, resume, release, run, rerun, backfill) take ``--dry-run`` (read, say what
would happen, write and invoke nothing) and ask for confirmation unless ``--yes`` (without a terminal they refuse
rather than guess). Exit status: 0 done, 1 refused or failed (nothing written unless it says so; also an
environment problem: no region, no credentials, an unknown profile, an endpoint that cannot be reached, an AWS
refusal such as AccessDenied; a job that is not in the registry, a malformed registry entry), 2 bad arguments,
4 (``status``) a job shown is failing (its last finished slot FAILED, or MISSED but not ``paused``), 130 interrupted (a backfill resumes when the same command runs again). A refusal is one line ``refused: ...`` on
stdout, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.prompt import Confirm

from slotlock import LeaseHeldError, SlotLockError
from slotlock.history import STATUSES
from tools.aws_errors import AWS_ERRORS, CONFIGURATION_ERRORS, client, describe, one_line
from tools.cli.exit_status import ExitStatus
from tools.cli.params import add_deployment_arguments, add_local_argument, slot_time
from tools.cli.program import prog
from tools.cli.render import console_for
from tools.cli.selection import (
    SELECT_HELP,
    SelectionError,
    add_select_argument,
    patterns,
    plain_name,
    select,
    select_one,
)
from tools.ops.operator import (
    BackfillSelection,
    Deployment,
    JobTarget,
    LambdaInvoker,
    Operator,
    OpsError,
    RunResult,
)
from tools.ops.render import render_history, render_results, render_status
from tools.registry import REGISTRY_PATH_OUTPUT, JobRegistryEntry, JobRegistryError, get_job, list_jobs, registry_path

DEFAULT_WAIT_S = 900.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog("python -m tools.ops"),
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawTextHelpFormatter,
    )
    add_deployment_arguments(parser)
    add_local_argument(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text)

    def changes(p: argparse.ArgumentParser) -> None:
        p.add_argument("--dry-run", action="store_true", help="say what would happen; write and invoke nothing")
        p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    def waits(p: argparse.ArgumentParser) -> None:
        p.add_argument("--wait-s", type=float, default=DEFAULT_WAIT_S, help="how long to wait for each outcome")

    p = command(
        "status",
        "per job: the holder, the manual run in progress, last finished slot, last success, pause, capacity wait",
    )
    add_select_argument(p, help=f"the jobs (default: every job); {SELECT_HELP}")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")

    p = command("history", "every generation of the job's slots, newest first (Query on the history index)")
    add_select_argument(p, required=True, one=True)
    p.add_argument("--since", type=slot_time, help="only slots at or after this time")
    p.add_argument("--limit", type=int, default=50, help="at most this many records (default 50)")
    p.add_argument("--status", choices=STATUSES, help="only records of this status")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    p = command(
        "pause",
        "pause the live schedule: each racer loses after its one acquisition request; one of them records MISSED paused",
    )
    add_select_argument(p, required=True, one=True)
    p.add_argument("--reason", required=True, help="why (audited on the lock item)")
    changes(p)

    p = command("resume", "resume the live schedule from the next slot after now")
    add_select_argument(p, required=True, one=True)
    changes(p)

    p = command("release", "release the lease; --force: even a live one (bumps the fencing token)")
    add_select_argument(p, required=True, one=True)
    p.add_argument("--reason", required=True, help="why (audited on the lock item)")
    p.add_argument("--force", action="store_true", help="release a live lease: its holder's writes are all rejected")
    p.add_argument("--manual", action="store_true", help="the manual runs' lease instead of the live schedule's")
    changes(p)

    p = command("run", "run the current slot like any racer, or (--slot) a new generation of a past slot")
    add_select_argument(p, required=True, one=True)
    p.add_argument("--slot", type=slot_time, help="a past slot: a new generation through the manual path")
    p.add_argument("--reason", default="operator run", help="why (audited)")
    changes(p)
    waits(p)

    p = command("rerun", "a new generation of a finished, failed or missed slot")
    add_select_argument(p, required=True, one=True)
    p.add_argument("--slot", type=slot_time, required=True)
    p.add_argument("--reason", required=True, help="why (audited on the generation's history item)")
    changes(p)
    waits(p)

    p = command("backfill", "the range's slots, one at a time, through the manual path (resumable)")
    add_select_argument(p, required=True, one=True)
    p.add_argument("--from", dest="start", type=slot_time, required=True, help="first slot time")
    p.add_argument("--to", dest="end", type=slot_time, required=True, help="last slot time")
    p.add_argument("--only", choices=("missed", "failed", "all"), default="missed", help="which slots (default missed)")
    p.add_argument("--reason", default="backfill", help="why (audited on each generation)")
    p.add_argument("--run-id", help="this backfill's id (default: derived from its arguments, so reruns resume)")
    changes(p)
    waits(p)
    return parser


# --- the deployment ----------------------------------------------------------------------------------------


def resolve_deployment(
    args: argparse.Namespace,
    cloudformation: Callable[[], Any] | None = None,
    ssm: Callable[[], Any] | None = None,
) -> Deployment:
    """The deployment: the tables from the flags or the shared stack's outputs, the jobs from its job registry
    (only ``args.job`` when the command names one: ``GetParametersByPath`` of its own path; else every job:
    ``GetParametersByPath`` of the registry).
    ``cloudformation``, ``ssm``: client factories (``None``: none to read with).

    :raises OpsError: a flag is malformed, the stack cannot be read or lacks an output, the job is not in the
        registry, or an entry is malformed.
    """
    functions: dict[str, str] = {}
    for spec in args.function:
        name, sep, function = spec.partition("=")
        if not sep or not name or not function:
            raise OpsError(f"--function {spec!r}: expected JOB=FUNCTION_NAME")
        functions[name] = function
    lock_table, results_table, outputs = deployment_tables(args, cloudformation)
    path = job_registry_path(args, outputs)
    if ssm is None:
        raise OpsError(f"no SSM client to read the job registry {path} with")
    entries, job = _selected_entries(args, ssm(), path)
    unknown = sorted(set(functions) - set(entries)) if job is None else []
    if unknown:
        raise OpsError(f"--function {unknown[0]}=...: no job {unknown[0]!r} in the job registry {path}")
    targets = {
        name: JobTarget(
            name=name,
            function_name=functions.get(name, entry.function_name),
            schedule_expression=entry.schedule_expression,
            schedule_timezone=entry.schedule_timezone,
        )
        for name, entry in entries.items()
    }
    return Deployment(lock_table, results_table, targets)


def deployment_tables(
    args: argparse.Namespace, cloudformation: Callable[[], Any] | None
) -> tuple[str, str, dict[str, str]]:
    """The lock and results tables (``--lock-table``/``--results-table``, else the stack's outputs) and the stack's
    outputs when they were read (``{}`` when the flags name both tables). Shared with ``tools.results``.

    :raises OpsError: the stack cannot be read, or lacks a table's output."""
    lock_table, results_table = args.lock_table, args.results_table
    outputs: dict[str, str] = {}
    if not (lock_table and results_table):
        outputs = read_stack_outputs(
            args, cloudformation, missing="name --lock-table and --results-table, or let --stack be read"
        )
        lock_table = lock_table or outputs.get("LockTableName")
        results_table = results_table or outputs.get("ResultsTableName")
        if not lock_table or not results_table:
            raise OpsError(f"stack {args.stack} has no LockTableName/ResultsTableName output")
    return lock_table, results_table, outputs


def _selected_entries(args: argparse.Namespace, ssm: Any, path: str) -> tuple[dict[str, JobRegistryEntry], str | None]:
    """The registry entries to read for ``-s/--select`` (:mod:`tools.cli.selection`), and the one plain name when the
    selection is one (its own path's listing: its own "no job" answer); any other selection reads every entry
    (``GetParametersByPath``) and :func:`selected_jobs` chooses."""
    single = plain_name(patterns(_select_values(args)))
    return read_registry(ssm, path, single), single


def _select_values(args: argparse.Namespace) -> list[str]:
    values = getattr(args, "select", None)
    if values is None:  # a namespace built without the option (``--job`` of old)
        values = [args.job] if getattr(args, "job", None) else []
    return list(values)


def selected_jobs(args: argparse.Namespace, deployment: Deployment) -> str | tuple[str, ...] | None:
    """The job the command acts on, from ``-s/--select`` against the deployment's jobs: one name; for ``status``
    also the names a selection of several chooses, or ``None`` (every job).

    :raises OpsError: a pattern matches no job; a one-job command's selection matches several."""
    wanted = patterns(_select_values(args))
    single = plain_name(wanted)
    if not wanted or single is not None:
        return single
    names = sorted(deployment.jobs)
    try:
        return select(wanted, names) if args.command == "status" else select_one(wanted, names)
    except SelectionError as exc:
        raise OpsError("; ".join(str(exc).splitlines())) from exc


def read_stack_outputs(
    args: argparse.Namespace, cloudformation: Callable[[], Any] | None, *, missing: str
) -> dict[str, str]:
    """The outputs of stack ``args.stack`` (``DescribeStacks``); ``missing``: the refusal when there is no
    CloudFormation client to read it with. :raises OpsError: the stack cannot be read."""
    if cloudformation is None:
        raise OpsError(missing)
    return _stack_outputs(cloudformation(), args.stack)


def job_registry_path(args: argparse.Namespace, outputs: dict[str, str]) -> str:
    """The job registry's path: the stack's ``JobRegistryPath`` output when its outputs were read, else the
    registry of stack ``args.stack`` by the naming rule (``/<stack>/jobs/``).

    :raises OpsError: the outputs were read and have no ``JobRegistryPath`` (a deployment from before the job
        registry, or not this project's shared stack)."""
    if not outputs:
        try:
            return registry_path(args.stack)
        except ValueError as exc:
            raise OpsError(f"--stack: {exc}") from exc
    path = outputs.get(REGISTRY_PATH_OUTPUT, "")
    if not path:
        raise OpsError(
            f"stack {args.stack} has no {REGISTRY_PATH_OUTPUT} output: it is not this project's shared stack, or"
            " it was deployed by a version before the job registry (deploy this version)"
        )
    return path


def read_registry(ssm: Any, path: str, job: str | None = None) -> dict[str, JobRegistryEntry]:
    """``job``'s entry (``None``: every job's) in the registry at ``path``, as one ``OpsError`` line when the
    registry cannot answer (a job that is not in it, a malformed entry)."""
    try:
        return {job: get_job(ssm, path, job)} if job is not None else list_jobs(ssm, path)
    except JobRegistryError as exc:
        raise OpsError(str(exc)) from exc


def _stack_outputs(client: Any, stack: str) -> dict[str, str]:
    try:
        (description,) = client.describe_stacks(StackName=stack)["Stacks"]
    except CONFIGURATION_ERRORS:
        raise  # no region, credentials or profile: each tool's main says what to set
    except Exception as exc:
        raise OpsError(f"cannot read stack {stack}: {exc}") from exc
    return {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}


# --- main --------------------------------------------------------------------------------------------------


def confirm(console: Console, args: argparse.Namespace, question: str, stdin: TextIO) -> bool:
    if getattr(args, "yes", False):
        return True
    if not stdin.isatty():
        raise OpsError(f"{question} -- refusing without a terminal; pass --yes (or --dry-run first)")
    return Confirm.ask(question, console=console)


def execute(args: argparse.Namespace, operator: Operator, console: Console, stdin: TextIO = sys.stdin) -> int:
    """Run the parsed command; returns the exit status (raises :class:`OpsError` for a refusal)."""
    job = selected_jobs(args, operator.deployment)
    if args.command == "status":
        failing = render_status(console, operator, job, args.json)
        return ExitStatus.JOB_FAILING if failing else ExitStatus.OK
    args.job = job
    if args.command == "history":
        render_history(console, operator, args)
        return 0
    if args.command in ("pause", "resume", "release"):
        kwargs: dict[str, Any] = {"dry_run": True}
        if args.command != "resume":
            kwargs["reason"] = args.reason
        if args.command == "release":
            kwargs |= {"force": args.force, "manual": args.manual}
        action = getattr(operator, args.command)
        planned = action(args.job, **kwargs)
        console.print(f"{args.job}: {planned.message}")
        if args.dry_run or planned.message.startswith(("already", "not paused", "no lease")):
            return 0
        if not confirm(console, args, f"{args.command} {args.job}?", stdin):
            return 1
        kwargs["dry_run"] = False
        done = action(args.job, **kwargs)
        console.print(f"{args.job}: {done.message} (audited as {operator.who})")
        return 0
    if args.command in ("run", "rerun"):
        if args.command == "run" and args.slot is None:
            slot = operator.current_slot(args.job)
            console.print(f"{args.job}: the current slot is {slot.iso} (live path: once per slot holds)")
            if args.dry_run or not confirm(console, args, f"run {args.job} slot {slot.iso} now?", stdin):
                return 0 if args.dry_run else 1
            result = operator.run_current(args.job, reason=args.reason, wait_s=args.wait_s)
        else:
            operator.run_slot(args.job, args.slot, kind=args.command, reason=args.reason, wait_s=0, dry_run=True)
            console.print(f"{args.job}: a new generation of slot {args.slot.iso} through the manual path")
            if args.dry_run or not confirm(console, args, f"{args.command} {args.job} slot {args.slot.iso}?", stdin):
                return 0 if args.dry_run else 1
            result = operator.run_slot(args.job, args.slot, kind=args.command, reason=args.reason, wait_s=args.wait_s)
        render_results(console, f"{args.command} of {args.job}", [result])
        return 0 if result.status == "SUCCEEDED" else 1
    if args.command == "backfill":
        only: BackfillSelection = args.only
        plan = operator.plan_backfill(args.job, args.start, args.end, only=only, run_id=args.run_id)
        console.print(
            f"{args.job}: backfill {plan.run_id}: {len(plan.selected)} slot(s) to run, {len(plan.done)} done"
            f" before, {len(plan.excluded)} not {only}"
        )
        if args.dry_run:
            for slot in plan.selected:
                console.print(f"  would run {slot.iso}")
            return 0
        if not plan.selected or not confirm(console, args, f"backfill {len(plan.selected)} slot(s)?", stdin):
            return 0 if not plan.selected else 1
        results: list[RunResult] = []
        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        )
        try:
            with progress:
                task = progress.add_task(f"backfill {args.job}", total=len(plan.selected))

                def advance(result: RunResult) -> None:
                    results.append(result)
                    progress.update(task, advance=1, description=f"{args.job} {result.slot.iso} {result.status}")

                operator.backfill(plan, reason=args.reason, wait_s=args.wait_s, on_result=advance)
        except KeyboardInterrupt:
            render_results(console, f"backfill {plan.run_id} (interrupted)", results)
            console.print("interrupted: run the same command again to resume")
            return 130
        render_results(console, f"backfill {plan.run_id}", results)
        return 0 if all(r.status == "SUCCEEDED" for r in results) else 1
    raise OpsError(f"unknown command {args.command}")  # pragma: no cover - argparse refuses it first


def refuse(console: Console, text: str) -> int:
    """Print ``refused: <text>`` as one line (never wrapped, never read as markup); returns exit status 1."""
    console.print(f"refused: {one_line(text, limit=2000)}", markup=False, highlight=False, emoji=False, soft_wrap=True)
    return 1


def run_command(args: argparse.Namespace, operator: Operator, console: Console, stdin: TextIO = sys.stdin) -> int:
    """:func:`execute`, a refusal or a lock error printed as one line with exit status 1."""
    try:
        return execute(args, operator, console, stdin)
    except LeaseHeldError as exc:
        return refuse(console, f"{exc} (pass --force to release it anyway)")
    except (OpsError, SlotLockError) as exc:
        return refuse(console, str(exc))


def local_world_requested(parser: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """``--local`` or ``$ATHENA_ONCE_LOCAL``; a usage error (exit 2) beside ``--endpoint-url`` (two worlds named).
    Shared with ``tools.results``."""
    from local.serve.world import local_requested

    local = local_requested(bool(getattr(args, "local", False)))
    if local and args.endpoint_url:
        parser.error("--local and --endpoint-url name two worlds: give one (--local uses the local world's endpoints)")
    return local


def use_local_world(args: argparse.Namespace) -> tuple[Any, Callable[[str], str | None]]:
    """The running local world's session (fake credentials) and endpoints, its tables and stack set on ``args``
    (unless the flags name other tables). Shared with ``tools.results``.

    :raises OpsError: no local world is running (the line says how to start one)."""
    from local.serve.world import WorldError, open_world

    try:
        world = open_world()
    except WorldError as exc:
        raise OpsError(str(exc)) from exc
    args.lock_table = args.lock_table or world.lock_table
    args.results_table = args.results_table or world.results_table
    args.stack = world.stack
    args.world = world
    return world.session(), world.endpoint


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """The command line; returns the exit status (argparse's usage errors exit 2 on their own).

    An environment problem (no region or credentials, an unknown profile, an endpoint that cannot be reached, an
    AWS refusal) is one ``refused:`` line and exit status 1, whenever it surfaces: botocore resolves the region
    and credentials lazily, at the first client or request (see :mod:`tools.aws_errors` for why botocore's
    errors are caught as a whole and nothing else is)."""
    import boto3

    parser = build_parser()
    args = parser.parse_args(argv)
    console = console_for(out or sys.stdout)
    local = local_world_requested(parser, args)
    try:
        if local:
            session, endpoint = use_local_world(args)
        else:
            session = boto3.session.Session(region_name=args.region)

            def endpoint(service: str) -> str | None:
                return args.endpoint_url if service == "dynamodb" else None

        deployment = resolve_deployment(
            args,
            lambda: client(session, "cloudformation", endpoint_url=endpoint("cloudformation")),
            lambda: client(session, "ssm", endpoint_url=endpoint("ssm")),
        )
        operator = Operator(
            deployment,
            dynamodb=client(session, "dynamodb", endpoint_url=endpoint("dynamodb")),
            invoker=LambdaInvoker(client(session, "lambda", endpoint_url=endpoint("lambda"))),
            identity=lambda: str(client(session, "sts", endpoint_url=endpoint("sts")).get_caller_identity()["Arn"]),
            **({"clock_ms": args.world.clock_ms} if local else {}),  # the local world's time: its schedules' own
        )
        return run_command(args, operator, console)
    except OpsError as exc:
        return refuse(console, str(exc))
    except AWS_ERRORS as exc:
        return refuse(console, describe(exc))
    except KeyboardInterrupt:
        console.print("interrupted", markup=False, highlight=False)
        return 130
