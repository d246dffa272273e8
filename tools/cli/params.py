"""The parameters several commands share (dbt's shared params): declared once, with one help text, one type and
one default each, so ``--region`` or ``--lock-table`` means the same in ``ops``, ``results`` and ``ops fence-bump``.

- the deployment (:func:`add_deployment_arguments`): ``--stack``, ``--region``, ``--lock-table``,
  ``--results-table``, ``--function JOB=NAME``, ``--endpoint-url`` (and :func:`add_profile_argument`); the local
  world instead of AWS (:func:`add_local_argument`): ``--local``;
- argument types: :func:`positive_int`, :func:`non_negative_float`, :func:`slot_time`;
- :class:`OneLineParser`: a usage error as one ``error:`` line, exit status 2.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any, NoReturn

from slotlock import InvalidEventError, Slot
from tools.cli.exit_status import ExitStatus

#: The shared stack of a deployment (app.py): its outputs name the tables, the job registry and the read API.
DEFAULT_STACK = "ScheduledAthenaRefresh"
REGION_HELP = "AWS region (default: the environment's)"
ENDPOINT_HELP = "DynamoDB endpoint (e.g. DynamoDB Local)"


class OneLineParser(argparse.ArgumentParser):
    """Usage errors on one line, ``error: <problem> (<prog> --help)``, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitStatus.USAGE, f"error: {message} ({self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def slot_time(text: str) -> Slot:
    """A slot's time, ISO 8601 (UTC unless it says otherwise)."""
    try:
        return Slot.parse(text if ("Z" in text or "+" in text[10:]) else f"{text}Z", field="time")
    except InvalidEventError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an ISO 8601 time such as 2026-11-22T00:30:00Z") from exc


def add_deployment_arguments(parser: argparse.ArgumentParser, *, functions: bool = True, defaults: bool = True) -> None:
    """The options that name a deployment: ``--stack``, ``--region``, ``--lock-table``, ``--results-table``,
    (``functions``) ``--function`` and ``--endpoint-url``. ``defaults=False`` leaves an option out of the namespace
    unless given (for a subcommand's copy of options that the main parser also takes)."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--stack",
        default=default(DEFAULT_STACK),
        help=f"the deployment's shared stack (default {DEFAULT_STACK}); its job registry lists the jobs",
    )
    parser.add_argument("--region", default=default(None), help=REGION_HELP)
    parser.add_argument("--lock-table", default=default(None), help="the lock table (instead of the stack's output)")
    parser.add_argument(
        "--results-table", default=default(None), help="the results table (instead of the stack's output)"
    )
    if functions:
        parser.add_argument(
            "--function",
            action="append",
            default=default([]),
            metavar="JOB=NAME",
            help="a job's function (instead of its job registry entry's)",
        )
    parser.add_argument("--endpoint-url", default=default(None), help=ENDPOINT_HELP)


#: Set to 1 (or true/yes), it is ``--local`` on every command that takes the option.
LOCAL_ENV = "ATHENA_ONCE_LOCAL"


def local_setting() -> bool:
    """:data:`LOCAL_ENV` is set to 1/true/yes."""
    return os.environ.get(LOCAL_ENV, "").strip().lower() in ("1", "true", "yes")


def local_setting_refusal(command: str) -> str | None:
    """For a command that only acts on AWS (``ops fence-bump``, ``ops smoke-test``): the one-line refusal while
    :data:`LOCAL_ENV` says the operator means the local world (``None``: not set)."""
    if not local_setting():
        return None
    return f"{LOCAL_ENV} is set (the local world), but {command} acts on AWS only: unset {LOCAL_ENV} to act on AWS"


#: ``--local``'s help: the world it addresses and the environment setting that stands for it.
LOCAL_HELP = (
    "act on the local world (`make serve`: the demo's store, its job registry and local functions) instead of AWS;"
    " ATHENA_ONCE_LOCAL=1 does the same, ATHENA_ONCE_LOCAL_WORKDIR names its workdir (default .demo)"
)


def add_local_argument(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--local``: the local world of ``make serve`` (:mod:`local.serve.world`) instead of AWS. Only the commands
    that resolve every endpoint from it take the option (never one that would reach AWS with part of it)."""
    parser.add_argument(
        "--local", action="store_true", default=False if defaults else argparse.SUPPRESS, help=LOCAL_HELP
    )


def add_profile_argument(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--profile``: the AWS profile whose credentials are used."""
    parser.add_argument(
        "--profile",
        default=None if defaults else argparse.SUPPRESS,
        help="AWS profile of the credentials (default: the environment's)",
    )
