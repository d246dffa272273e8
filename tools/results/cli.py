"""``python -m tools.results``: a deployment's committed results and slot history, from the terminal.

    python -m tools.results jobs|latest|slot|history [--job J] [--format table|json|csv] [--api [URL]] ...

Two ways to read, one model:

- **direct** (default): the tables, through :class:`results_api.reader.ResultsReader` (the read model the API
  serves); the deployment is resolved as ``python -m tools.ops`` resolves it (the shared stack's outputs, or
  ``--lock-table``/``--results-table``), the jobs and their schedules from the job registry
  (:mod:`tools.registry`, ``GetParametersByPath``). Rows offloaded to S3 are read from S3 (checksum verified).
- **``--api [URL]``**: the deployed read API (the stack's ``ReadApiUrl`` when no URL is given), every request
  signed with SigV4 (:mod:`tools.results.client`); a redirect to offloaded rows is followed without the
  signature.

``--local`` (or ``ATHENA_ONCE_LOCAL=1``): the local world of ``make serve`` instead of AWS, as ``tools.ops`` takes it
(its tables and registry directly; ``--api`` without URL is its read API); with no world running, one ``error:`` line
saying how to start one (exit 1); beside ``--endpoint-url`` or ``--profile``, a usage error (2).

Output: ``table`` (rich, default), ``json`` (the API's documents), ``csv`` (RFC 4180, as the API serves it): only
the data goes to stdout, every message to stderr. Exit status: 0 read; 1 refused (bad parameter, unknown job,
no such result, a malformed job registry entry: one ``error:`` line); 2 bad usage, or no AWS region or credentials, an unknown profile; 3 the
service failed or could not be reached. Every failure is one ``error:`` line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from athena_refresh.catalog import CatalogQuery, CatalogSchedule
from results_api.api import SLOT_COLUMNS
from results_api.errors import ResultsApiError
from results_api.freshness import latest_with_freshness
from results_api.reader import DEFAULT_PAGE_LIMIT, ResultsReader
from results_api.responses import result_document, to_csv
from results_api.views import JOB_COLUMNS, JobSummary
from slotlock.history import MAX_PAGE_LIMIT, STATUSES
from tools.aws_errors import AWS_ERRORS, CONFIGURATION_ERRORS, client, describe, error_line
from tools.cli.params import add_deployment_arguments, add_local_argument, add_profile_argument, positive_int
from tools.cli.program import prog
from tools.cli.render import console_for, print_json
from tools.ops.cli import (
    deployment_tables,
    job_registry_path,
    local_world_requested,
    read_registry,
    read_stack_outputs,
    use_local_world,
)
from tools.ops.operator import OpsError
from tools.registry import JobRegistryEntry
from tools.results.client import (
    DEFAULT_TIMEOUT_S,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    ApiClient,
    ReadError,
    problem_line,
    region_from_url,
)
from tools.results.render import render_history, render_jobs, render_result

FORMATS = ("table", "json", "csv")
#: ``--api`` without a URL: the stack's ``ReadApiUrl`` output.
FROM_STACK = "stack"
#: ``history --all`` reads at most this many pages, then says how to continue.
MAX_PAGES = 100

DESCRIPTION = (
    "A deployment's committed results and slot history: read from the tables (default; the tables from the shared"
    " stack's outputs or --lock-table/--results-table, the jobs from its job registry), or through the deployed"
    " read API with --api (SigV4)."
    " The deployment options go before or after the command; <command> --help has each command's."
)
EXIT_STATUSES = """exit status: 0 read; 1 refused (bad parameter, unknown job, no such result, forbidden): one "error:"
line on stderr; 2 bad usage, no AWS region or credentials, an unknown profile; 3 the service failed or could not
be reached (5xx, throttled, timeout, connection refused)."""
EXAMPLES = {
    "jobs": """examples:
  python -m tools.results jobs
  python -m tools.results jobs --format json --stack ScheduledAthenaRefresh
  python -m tools.results jobs --api https://abc123.execute-api.eu-west-1.amazonaws.com/""",
    "latest": """examples:
  python -m tools.results latest --job flights-dashboard
  python -m tools.results latest --job flights-dashboard --format csv > latest.csv
  python -m tools.results latest --job flights-dashboard --api --format json | jq .rows""",
    "slot": """examples:
  python -m tools.results slot --job flights-dashboard --slot 2026-11-22T00:30:00Z
  python -m tools.results slot --job flights-dashboard --slot 2026-11-22T00:30:00Z --generation 2 --format json
  python -m tools.results slot --job carrier-on-time --slot 2026-11-22T05:00:00Z --api --profile ops""",
    "history": """examples:
  python -m tools.results history --job flights-dashboard
  python -m tools.results history --job flights-dashboard --status FAILED --from 2026-11-01T00:00:00Z --all
  python -m tools.results history --job flights-dashboard --limit 100 --pages 3 --format csv > history.csv
  python -m tools.results history --job flights-dashboard --next-token <the token a previous page printed>""",
}


# --- arguments ---------------------------------------------------------------------------------------------


def _page_limit(text: str) -> int:
    value = positive_int(text)
    if value > MAX_PAGE_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is above {MAX_PAGE_LIMIT}")
    return value


def _session_arguments(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    add_deployment_arguments(parser, functions=False, defaults=defaults)
    add_profile_argument(parser, defaults=defaults)
    add_local_argument(parser, defaults=defaults)


#: The read commands name one job, by its exact name (the read API answers one job per request).
ONE_JOB = "the job, by name (-s/--select and --job are the same option)"


def build_parser() -> argparse.ArgumentParser:
    """The parser; the deployment options are taken before or after the command."""
    parser = argparse.ArgumentParser(
        prog=prog("python -m tools.results"),
        description=DESCRIPTION,
        epilog="examples:\n"
        + "\n".join(line for text in EXAMPLES.values() for line in text.splitlines()[1:])
        + "\n\n"
        + EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _session_arguments(parser, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _session_arguments(common, defaults=False)
    common.add_argument(
        "--api",
        nargs="?",
        const=FROM_STACK,
        metavar="URL",
        help="read through the deployed read API (SigV4-signed) instead of the tables; without URL: the"
        " stack's ReadApiUrl output",
    )
    common.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    common.add_argument(
        "--timeout-s",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"HTTP timeout (--api; default {DEFAULT_TIMEOUT_S:g})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=text,
            description=text,
            parents=[common],
            epilog=f"{EXAMPLES[name]}\n\n{EXIT_STATUSES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    command("jobs", "every job: schedule, lease (held or free), pause, latest result, last success")
    command("latest", "the job's newest committed result").add_argument(
        "-s", "--select", "--job", dest="job", metavar="JOB", required=True, help=ONE_JOB
    )
    p = command("slot", "one slot's result (default: its newest committed generation)")
    p.add_argument("-s", "--select", "--job", dest="job", metavar="JOB", required=True, help=ONE_JOB)
    p.add_argument("--slot", required=True, help="the slot, ISO 8601 (2026-11-22T00:30:00Z)")
    p.add_argument("--generation", type=positive_int, help="the generation (1: the live run; default: the newest)")
    p = command("history", "every generation of the job's slots, newest first, page by page")
    p.add_argument("-s", "--select", "--job", dest="job", metavar="JOB", required=True, help=ONE_JOB)
    p.add_argument("--from", dest="since", metavar="ISO", help="earliest slot, ISO 8601")
    p.add_argument("--to", dest="until", metavar="ISO", help="latest slot, ISO 8601")
    p.add_argument("--status", choices=STATUSES, help="only generations of this status")
    p.add_argument(
        "--limit",
        type=_page_limit,
        default=DEFAULT_PAGE_LIMIT,
        help=f"history items read per page, 1..{MAX_PAGE_LIMIT} (default {DEFAULT_PAGE_LIMIT}; a --status filter"
        " applies after it, so a page may be short)",
    )
    pages = p.add_mutually_exclusive_group()
    pages.add_argument("--pages", type=positive_int, default=1, help="read this many pages (default 1)")
    pages.add_argument("--all", action="store_true", help=f"read every page (at most {MAX_PAGES})")
    p.add_argument("--next-token", help="continue after the page that gave this token")
    return parser


# --- where the results come from ---------------------------------------------------------------------------


class DirectSource:
    """The reads straight from the tables through ``reader``; always JSON documents except ``jobs`` CSV."""

    def __init__(self, reader: ResultsReader) -> None:
        self.reader = reader

    def _call(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except ResultsApiError as exc:
            parameter = getattr(exc, "parameter", None)
            status = EXIT_UNAVAILABLE if exc.status >= 500 else EXIT_REFUSED
            raise ReadError(problem_line(None, exc.message, parameter), status) from exc

    def jobs(self, *, csv: bool = False) -> Any:
        summaries: list[JobSummary] = self._call(self.reader.jobs)
        if csv:
            return to_csv(JOB_COLUMNS, [summary.csv_row() for summary in summaries])
        return {"jobs": [summary.as_dict() for summary in summaries]}

    def result(self, job: str, slot: str | None = None, generation: int | None = None, *, csv: bool = False) -> Any:
        def read() -> dict[str, Any]:
            # latest says how fresh it is, as the read API's latest does (issue 35, the same one request); a slot's
            # result does not
            if slot is None:
                stored, freshness = latest_with_freshness(self.reader, job)
                return result_document(stored, self.reader.rows(stored), freshness)
            stored = self.reader.result(job, slot, generation)
            return result_document(stored, self.reader.rows(stored), None)

        return self._call(read)

    def slots(
        self,
        job: str,
        *,
        since: str | None = None,
        until: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        csv: bool = False,
    ) -> tuple[Any, str | None]:
        view = self._call(
            lambda: self.reader.history(
                job,
                since=since,
                until=until,
                status=status,
                limit=DEFAULT_PAGE_LIMIT if limit is None else limit,
                next_token=next_token,
            )
        )
        page = {
            "job": job,
            "slots": view.entries,
            "next_token": view.next_token,
            "limit": view.limit,
            "filters": view.filters,
        }
        return page, view.next_token


#: The reads, from the tables (:class:`DirectSource`) or the API (:class:`tools.results.client.ApiClient`), with one
#: interface: JSON documents as the API answers them, or CSV text where the API answers ``Accept: text/csv`` with it.
Source = DirectSource | ApiClient


def open_source(args: argparse.Namespace, session: Any, endpoint: Callable[[str], str | None] | None = None) -> Source:
    """The API client (``--api``) or the direct reader, with the deployment resolved as ``tools.ops`` does.
    ``endpoint``: each service's endpoint (``None``: AWS's, DynamoDB's ``--endpoint-url``); the local world's under
    ``--local``, where ``--api`` without URL is the world's read API."""
    if endpoint is None:

        def endpoint(service: str) -> str | None:
            return args.endpoint_url if service == "dynamodb" else None

    def cloudformation() -> Any:
        return client(session, "cloudformation", endpoint_url=endpoint("cloudformation"))

    if args.api is not None:
        url = args.api
        world = getattr(args, "world", None)
        if url == FROM_STACK and world is not None:
            url = world.read_api
        if url == FROM_STACK:
            url = read_stack_outputs(args, cloudformation, missing="pass --api URL").get("ReadApiUrl", "")
            if not url:
                raise ReadError(f"stack {args.stack} has no ReadApiUrl output; pass --api URL", EXIT_REFUSED)
        region = args.region or region_from_url(url) or session.region_name
        if not region:
            raise ReadError("no AWS region for signing: pass --region", EXIT_USAGE)
        credentials = session.get_credentials()
        if credentials is None:
            raise ReadError("no AWS credentials to sign with (set AWS_PROFILE or pass --profile)", EXIT_USAGE)
        return ApiClient(url, credentials=credentials, region=region, timeout_s=args.timeout_s)

    lock_table, results_table, outputs = deployment_tables(args, cloudformation)  # as tools.ops resolves them
    if session.get_credentials() is None:  # else every table read fails later as "could not read" (exit 3)
        from botocore.exceptions import NoCredentialsError

        raise NoCredentialsError()
    ssm = client(session, "ssm", endpoint_url=endpoint("ssm"))
    catalog = registry_catalog(read_registry(ssm, job_registry_path(args, outputs)))
    s3_options: dict[str, Any] = {"signature_version": "s3v4"}
    if endpoint("s3") is not None:  # a local endpoint: path-style, as the local world's read API addresses it
        s3_options["s3"] = {"addressing_style": "path"}
    reader = ResultsReader(
        lock_table,
        results_table,
        catalog,
        dynamodb_client=client(session, "dynamodb", endpoint_url=endpoint("dynamodb")),
        s3_client=client(session, "s3", endpoint_url=endpoint("s3"), **s3_options),
        clock_ms=world.clock_ms if (world := getattr(args, "world", None)) is not None else None,
    )
    return DirectSource(reader)


def registry_catalog(entries: dict[str, JobRegistryEntry]) -> dict[str, CatalogQuery]:
    """The reader's catalog of the registry's jobs: the reader serves these jobs and uses each one's schedule only
    (the next slot, ``jobs``' schedule column); the query itself stays in the function's asset."""
    return {
        name: CatalogQuery(
            sql="",
            parameters=(),
            schedule=CatalogSchedule(entry.schedule_expression, entry.schedule_timezone, entry.racers),
        )
        for name, entry in entries.items()
    }


def run(args: argparse.Namespace, source: Source, out: TextIO, err: TextIO, now_s: float | None = None) -> int:
    """Read and print what ``args`` asks for; returns the exit status (raises :class:`ReadError`)."""
    now_s = time.time() if now_s is None else now_s
    csv = args.format == "csv"
    if args.command == "jobs":
        document = source.jobs(csv=csv)
        if isinstance(document, str):
            out.write(document)
        elif args.format == "json":
            print_json(out, document)
        else:
            render_jobs(_console(out), document, now_s)
        return 0
    if args.command in ("latest", "slot"):
        slot = args.slot if args.command == "slot" else None
        generation = args.generation if args.command == "slot" else None
        result = source.result(args.job, slot, generation, csv=csv)
        if isinstance(result, str):
            out.write(result)
        elif csv:
            out.write(to_csv([str(c["name"]) for c in result.get("columns", [])], result.get("rows", [])))
        elif args.format == "json":
            print_json(out, result)
        else:
            render_result(_console(out), result, now_s)
        return 0
    return _history(args, source, out, err)


def _history(args: argparse.Namespace, source: Source, out: TextIO, err: TextIO) -> int:
    csv = args.format == "csv"
    wanted = MAX_PAGES if args.all else args.pages
    token: str | None = args.next_token
    entries: list[dict[str, Any]] = []
    texts: list[str] = []
    first: dict[str, Any] | None = None
    read = 0
    while read < wanted:
        page, token = source.slots(
            args.job,
            since=args.since,
            until=args.until,
            status=args.status,
            limit=args.limit,
            next_token=token,
            csv=csv,
        )
        read += 1
        if isinstance(page, str):  # the API's CSV: the header row once
            texts.append(page if not texts else page.split("\r\n", 1)[1] if "\r\n" in page else "")
        else:
            first = first or page
            entries.extend(page.get("slots", []))
        if token is None:
            break
    if texts:
        out.write("".join(texts))
    elif csv:
        out.write(to_csv(SLOT_COLUMNS, entries))
    elif args.format == "json":
        document = dict(first or {"job": args.job, "limit": args.limit, "filters": {}})
        document["slots"], document["next_token"] = entries, token
        print_json(out, document)
    else:
        render_history(_console(out), args.job, entries)
    if token is not None:
        if args.all:
            err.write(f"stopped after {MAX_PAGES} pages (the --all cap); continue with --next-token {token}\n")
        else:
            err.write(f"more history: continue with --next-token {token} (or --pages N, --all)\n")
    return 0


def _console(out: TextIO) -> Any:
    # Off a terminal nothing wraps or truncates (a pager, a file): the table is as wide as its data.
    return console_for(out, width=100_000, soft_wrap=True)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    session: Any = None,
) -> int:
    """The command line; returns the exit status (argparse's usage errors included: 2)."""
    import boto3

    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, argparse printed it)
        return exc.code if isinstance(exc.code, int) else 0
    try:
        parser = build_parser()
        local = local_world_requested(parser, args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        endpoint = None
        if local:
            if args.profile:
                error_line(err, "--local and --profile name two worlds: give one (the local world has its own)")
                return EXIT_USAGE
            session, endpoint = use_local_world(args)
        elif session is None:
            session = boto3.session.Session(profile_name=args.profile, region_name=args.region)
        source = open_source(args, session, endpoint)
        return run(args, source, out, err)
    except ReadError as exc:
        error_line(err, exc.message)
        return exc.exit_status
    except OpsError as exc:
        error_line(err, exc)
        return EXIT_REFUSED
    except CONFIGURATION_ERRORS as exc:  # no region, no credentials, an unknown profile (tools.aws_errors)
        error_line(err, describe(exc, profile_option="--profile"))
        return EXIT_USAGE
    except AWS_ERRORS as exc:  # the endpoint, the network, an AWS refusal
        error_line(err, describe(exc))
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
