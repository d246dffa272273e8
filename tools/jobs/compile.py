"""Print what StartQueryExecution receives for one job and one slot: the statement with ``?`` and its parameters.

    athena-once compile -s flights-dashboard --slot 2026-11-24T20:30Z
    athena-once compile -s flights-dashboard --slot 2026-11-24T20:30Z --format json
    make compile JOB=flights-dashboard SLOT=2026-11-24T20:30Z

Nothing runs and nothing is sent: the request is built by the deployed code itself. The job's settings are read as
the function reads them (:func:`tools.jobs.common.job_settings`: a job catalog built like the bundled one, read by
:meth:`athena_refresh.settings.Settings.from_env`); the ordered ``ExecutionParameters`` are
:meth:`~athena_refresh.settings.Settings.execution_parameters` of the slot (window, ``data_year`` mapping,
constants), and the request is :meth:`athena_refresh.engine.athena.AthenaQueryEngine.start_request` of the engine
the function builds (:func:`athena_refresh.service.athena_engine`): ``QueryString`` (query.sql with each
``:name`` replaced by ``?``, exactly as synth prepared it), ``WorkGroup``, ``QueryExecutionContext``
(``Database``, ``Catalog``), ``ExecutionParameters`` (left out when the query has none, as the function leaves it
out) and ``ResultReuseConfiguration`` when the job turns result reuse on. ``ClientRequestToken`` is not shown: it
depends on the deployment (its lock table's name), the slot's generation and the attempt.

Then, marked as such, the statement with each ``?`` replaced by its parameter's text (the placeholders found with
sqlglot's Trino tokenizer: a ``?`` inside a string or a comment stays), for pasting into the Athena console. It is
NOT what the function sends: Athena binds ExecutionParameters itself
(https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements-querying-using-execution-parameters.html);
substituting the same text gives the same statement.

The slot and the job are chosen as ``run`` chooses them (``-s/--select`` one job; ``--slot`` ISO 8601, UTC unless
it has an offset; default the job's latest schedule firing at or before now).

Output: ``--format table`` (the default: a summary line, the request's fields, the parameters as a table, the
``QueryString``, then the console statement) or ``json`` (one object: ``job``, ``slot``, ``window``, ``request``,
``parameters`` [{position, name, value}], ``console`` {note, sql}). Exit status: 0 printed; 2 bad arguments (an
unknown job, a selection of several, a slot that is not ISO 8601) or an invalid job folder, one line each.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from sqlglot.tokens import TokenType

from athena_refresh.engine import client_request_token
from athena_refresh.settings import Settings
from athena_refresh.stored import result_sort_key
from slotlock import Slot
from stacks.jobs import JobDefinition
from tools.cli.exit_status import ExitStatus
from tools.cli.selection import add_select_argument
from tools.jobs import common, run

FORMATS = ("table", "json")
STAND_IN = "local-compile"  # the table names the settings need (nothing is created, nothing is sent)
#: The mark on the statement with its parameters inlined (it is not the request).
CONSOLE_NOTE = "for the Athena console, parameters inlined \u2014 not what the function sends"
TOKEN_NOTE = "ClientRequestToken: not shown (it depends on the deployment, the slot's generation and the attempt)"
EXIT_OK, EXIT_USAGE = ExitStatus.OK, ExitStatus.USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_select_argument(parser, required=True, one=True)
    run.add_slot_argument(parser)
    parser.add_argument("--format", choices=FORMATS, default="table", help="how to print it (default: table)")
    parser.add_argument("--jobs-dir", type=Path, default=common.JOBS_DIR, help=argparse.SUPPRESS)


def execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        loaded = common.load(args.jobs_dir)
        job = loaded.selected_one(args.select)
        slot = run.parse_slot(args.slot) if args.slot else run.latest_slot(job, dt.datetime.now(dt.UTC))
        settings = common.job_settings(job, stand_in=STAND_IN)
        document = compiled(job, settings, slot)
    except common.JobsError as exc:
        common.print_problems(exc.problems, err)
        return exc.status
    from tools.cli import render

    if args.format == "json":
        render.print_json(out, document, ensure_ascii=True)
    else:
        print_compiled(document, out)
    return EXIT_OK


def start_request(settings: Settings, slot: dt.datetime) -> dict[str, Any]:
    """The StartQueryExecution request of ``slot``'s first attempt, as the function builds it (its engine's
    :meth:`~athena_refresh.engine.athena.AthenaQueryEngine.start_request`, the settings' parameters), without
    ``ClientRequestToken`` (:data:`TOKEN_NOTE`). Keys as the API names them."""
    from athena_refresh.service import athena_engine  # the deployed engine's construction (no client is created)

    engine = athena_engine(settings)
    slot_iso = Slot(int(slot.timestamp())).iso
    token = client_request_token(
        settings.job_name, result_sort_key(slot_iso), 1, deployment_id=settings.lock_table_name
    )
    request = engine.start_request(
        sql=settings.query_sql, parameters=settings.execution_parameters(slot), client_request_token=token
    )
    return {key: value for key, value in request.items() if key != "ClientRequestToken"}


def inline_parameters(sql: str, parameters: Sequence[str]) -> str:
    """``sql`` with its ``?`` placeholders (sqlglot's Trino tokens: never one inside a string or a comment) replaced,
    in order, by ``parameters``' texts, the rest of the text as written.

    :raises JobsError: the placeholders and the parameters differ in number (a broken catalog: not expected)."""
    places = [token for token in common.tokens(sql) if token.token_type == TokenType.PLACEHOLDER]
    if len(places) != len(parameters):
        raise common.JobsError(
            [f"the statement has {len(places)} placeholder(s) for {len(parameters)} parameter(s): cannot inline them"]
        )
    pieces: list[str] = []
    position = 0
    for token, value in zip(places, parameters, strict=True):
        pieces += [sql[position : token.start], value]
        position = token.end + 1
    return "".join([*pieces, sql[position:]])


def compiled(job: JobDefinition, settings: Settings, slot: dt.datetime) -> dict[str, Any]:
    """The JSON document: ``job``, ``slot`` (ISO, UTC), ``window`` ([start, end), naive UTC text), ``request`` (the
    StartQueryExecution fields the function sends but the token), ``request_not_shown``, ``parameters`` (position
    from 1, the name bound, the literal text) and ``console`` (:data:`CONSOLE_NOTE` and the inlined statement)."""
    request = start_request(settings, slot)
    values = list(request.get("ExecutionParameters", []))
    start, end = settings.window(slot)
    return {
        "job": job.job_name,
        "slot": Slot(int(slot.timestamp())).iso,
        "window": [f"{start:%Y-%m-%d %H:%M:%S}", f"{end:%Y-%m-%d %H:%M:%S}"],
        "request": request,
        "request_not_shown": TOKEN_NOTE,
        "parameters": [
            {"position": index, "name": name, "value": value}
            for index, (name, value) in enumerate(zip(settings.query_parameters, values, strict=True), start=1)
        ],
        "console": {"note": CONSOLE_NOTE, "sql": inline_parameters(request["QueryString"], values)},
    }


def print_compiled(document: dict[str, Any], out: TextIO) -> None:
    """The table format: what :func:`compiled` holds, for a reader."""
    from tools.cli import render

    request = document["request"]
    start, end = document["window"]
    context = request["QueryExecutionContext"]
    out.write(f"{document['job']}, slot {document['slot']} (window {start} .. {end} UTC)\n\n")
    out.write("StartQueryExecution, as the function sends it:\n")
    out.write(f"  WorkGroup: {request['WorkGroup']}\n")
    out.write(f"  QueryExecutionContext: Database={context['Database']}, Catalog={context['Catalog']}\n")
    reuse = request.get("ResultReuseConfiguration")
    if reuse:
        age = reuse["ResultReuseByAgeConfiguration"]["MaxAgeInMinutes"]
        out.write(f"  ResultReuseConfiguration: enabled, MaxAgeInMinutes={age}\n")
    out.write(f"  {TOKEN_NOTE}\n")
    if document["parameters"]:
        out.write("  ExecutionParameters, in order:\n")
        rows = ([p["position"], p["name"], p["value"]] for p in document["parameters"])
        render.console_for(out, width=200).print(render.table(["?", "name", "value"], rows, right={"?"}))
    else:
        out.write("  ExecutionParameters: none (left out of the request)\n")
    out.write("  QueryString:\n\n")
    out.write(request["QueryString"].rstrip("\n") + "\n\n")
    out.write(f"-- {document['console']['note']}:\n")
    out.write(document["console"]["sql"].rstrip("\n") + "\n")
