"""Fence bump: raise a job's fencing counter above every token stored with its results.

Run it after a DynamoDB point-in-time restore (or any restore or import) of the **lock table**: the
restored lock item's counter can be below tokens already stored with results: new winners would get tokens
that earlier acquisitions already used, and a commit of the (slot, generation) that LATEST names is refused
(the pointer compares tokens within one slot and generation). The manual lock item (``manual#<job>``) keeps
its own counter and is not bumped by this tool. See
docs/operations.md, "Operations: fence bump after a point-in-time restore".

    python -m tools.fence_bump --lock-table T --results-table R --job J [--dry-run] [--margin N]

Reads the highest ``fencing_token`` stored in the results table for the job (the LATEST pointer and
every slot's result item: one paginated Query that projects only the key and the token), then raises
the lock item's counter to ``highest + margin`` with one conditional UpdateItem that never lowers it
(:func:`slotlock.bump_fencing_token`). Idempotent: a second run reports "already above" and writes
nothing. Prints the counter before and after. Exit status 0 on success (bumped or already above), 1 on
an error (nothing written), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh.stored import LATEST
from slotlock import LeaseHeldError, SlotLock, SlotLockError, bump_fencing_token
from tools.aws_errors import client, error_line
from tools.cli.params import ENDPOINT_HELP, REGION_HELP, local_setting_refusal
from tools.cli.program import prog

#: Default headroom above the highest stored token. Tokens only need to be higher, never dense, and
#: DynamoDB numbers have 38 digits: a wide margin also covers tokens issued after the restore point that
#: were never stored (a holder that crashed before its commit) and costs nothing.
DEFAULT_MARGIN = 1000


@dataclass(frozen=True)
class StoredTokens:
    """Fencing tokens found in the results table for one job.

    ``highest``: the maximum over the LATEST pointer and every result item (0 when none);
    ``latest_token``/``latest_slot``: the LATEST pointer's (``None`` when absent); ``result_items``:
    how many slot result items were read.
    """

    highest: int
    latest_token: int | None
    latest_slot: str | None
    result_items: int


def stored_tokens(dynamodb: Any, results_table: str, job: str) -> StoredTokens:
    """Read every fencing token stored with ``job``'s results (strongly consistent, paginated).

    Raises botocore's ``ClientError``/``BotoCoreError`` as they come (the CLI reports them).
    """
    highest, items = 0, 0
    latest_token: int | None = None
    latest_slot: str | None = None
    kwargs: dict[str, Any] = {
        "TableName": results_table,
        "KeyConditionExpression": "#job = :job",
        "ProjectionExpression": "#slot, #token, #latest_slot",
        "ExpressionAttributeNames": {
            "#job": "job",
            "#slot": "slot",
            "#token": "fencing_token",
            "#latest_slot": "latest_slot",
        },
        "ExpressionAttributeValues": {":job": {"S": job}},
        "ConsistentRead": True,
    }
    while True:
        page = dynamodb.query(**kwargs)
        for item in page.get("Items", []):
            token = int(item["fencing_token"]["N"]) if "N" in item.get("fencing_token", {}) else 0
            highest = max(highest, token)
            if item["slot"]["S"] == LATEST:
                latest_token, latest_slot = token, item.get("latest_slot", {}).get("S")
            else:
                items += 1
        if "LastEvaluatedKey" not in page:
            return StoredTokens(highest, latest_token, latest_slot, items)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog("python -m tools.fence_bump"),
        description="Raise a job's fencing counter above every token stored with its results "
        "(run after a point-in-time restore of the lock table).",
    )
    parser.add_argument("--lock-table", required=True, help="the lock table (as restored)")
    parser.add_argument("--results-table", required=True, help="the results table")
    parser.add_argument("--job", required=True, help="the job name (JOB_NAME of the function)")
    parser.add_argument(
        "--margin",
        type=int,
        default=DEFAULT_MARGIN,
        help=f"headroom above the highest stored token (default {DEFAULT_MARGIN}, >= 0)",
    )
    parser.add_argument("--dry-run", action="store_true", help="read and report only; write nothing")
    parser.add_argument("--force", action="store_true", help="bump even while a lease is live (fences its holder out)")
    parser.add_argument("--region", help=REGION_HELP)
    parser.add_argument("--endpoint-url", help=ENDPOINT_HELP)
    args = parser.parse_args(argv)
    if args.margin < 0:
        parser.error(f"--margin must be >= 0, got {args.margin}")
    return args


def main(
    argv: Sequence[str] | None = None, *, dynamodb: Any = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the CLI; ``dynamodb`` (a boto3 client) is injected by tests. Returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = parse_args(argv)
    refusal = local_setting_refusal("ops fence-bump") if dynamodb is None else None
    if refusal is not None:
        error_line(err, refusal, "refused")
        return 1
    if dynamodb is None:
        dynamodb = client(boto3.session.Session(region_name=args.region), "dynamodb", endpoint_url=args.endpoint_url)
    try:
        stored = stored_tokens(dynamodb, args.results_table, args.job)
        lock = SlotLock(args.lock_table, args.job, client=dynamodb)
        target = stored.highest + args.margin
        latest = (
            f"LATEST pointer token {stored.latest_token} (slot {stored.latest_slot})"
            if stored.latest_token is not None
            else "no LATEST pointer"
        )
        print(
            f"job {args.job!r}: highest fencing token stored with results: {stored.highest}"
            f" ({latest}; {stored.result_items} result items in {args.results_table})",
            file=out,
        )
        if target < 1:
            print("nothing stored and no margin: nothing to fence", file=out)
            return 0
        bump = bump_fencing_token(lock, target, dry_run=args.dry_run, force=args.force)
    except LeaseHeldError as exc:
        error_line(err, f"{exc}. Stop the schedules or wait for the lease to expire, or pass --force.", "refused")
        return 1
    except (SlotLockError, ClientError, BotoCoreError) as exc:
        error_line(err, exc)
        return 1
    before = "none" if bump.before is None else str(bump.before)
    if bump.dry_run and bump.before != bump.after:
        print(
            f"dry run: lock {args.lock_table} fencing token {before} -> would be {bump.after}"
            f" (target {stored.highest} + margin {args.margin}); nothing written",
            file=out,
        )
    elif bump.bumped:
        print(
            f"bumped: lock {args.lock_table} fencing token {before} -> {bump.after}"
            f" (target {stored.highest} + margin {args.margin}); next acquisition gets {bump.next_token}",
            file=out,
        )
    else:
        print(
            f"already above: lock {args.lock_table} fencing token {before} >= target {target};"
            f" nothing written; next acquisition gets {bump.next_token}",
            file=out,
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
