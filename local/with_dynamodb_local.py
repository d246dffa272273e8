"""Run one command against a fresh AWS DynamoDB Local: ``python -m local.with_dynamodb_local [--cwd DIR] -- CMD ...``.

What ``make example`` runs the example's tests with. It starts one in-memory DynamoDB Local
(:class:`local.emulators.dynamodb_local.DynamoDBLocal`: a free port, a bounded start-up), runs ``CMD`` with
``AWS_ENDPOINT_URL_DYNAMODB`` set to it (boto3 and botocore honour the variable themselves: no code in the command
knows about the emulator), a fixed region and fake credentials (no profile, no session token: nothing can reach
AWS), waits at most ``--timeout`` seconds, and exits with the command's exit code.

DynamoDB Local is always stopped, by its PID, with a bounded wait (terminate, then kill): on success, on failure,
on the timeout, on Ctrl-C and on SIGTERM. The command runs in a session of its own, so on the timeout or a signal
its whole process group (e.g. pytest and the racer processes it spawned) is stopped the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from local.emulators.dynamodb_local import DynamoDBLocal

REGION = "us-east-1"
#: Fake credentials: DynamoDB Local accepts any, and keeps data per access key and region.
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
#: Variables that could point boto3 at a real account or another endpoint: removed from the command's environment.
REMOVED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL")
DEFAULT_TIMEOUT_S = 900.0
STOP_TIMEOUT_S = 10.0


class Terminated(Exception):
    """SIGTERM arrived: unwind (stopping the command and DynamoDB Local) and exit 143."""


def command_environment(endpoint_url: str, region: str = REGION) -> dict[str, str]:
    """This process's environment for the command: the endpoint, the region, fake credentials, nothing of AWS else."""
    env = {name: value for name, value in os.environ.items() if name not in REMOVED}
    env.update(FAKE_CREDENTIALS)
    env.update(
        {
            "AWS_ENDPOINT_URL_DYNAMODB": endpoint_url,
            "AWS_DEFAULT_REGION": region,
            "AWS_REGION": region,
            # no ~/.aws/config profile or credential process can add anything
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    return env


def stop_group(process: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the command's process group (its id is the command's PID): SIGTERM, bounded wait, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run(command: Sequence[str], *, cwd: str | None, timeout_s: float, region: str = REGION) -> int:
    """Start DynamoDB Local, run ``command`` against it, stop both; the command's exit code (124 on the timeout)."""
    with DynamoDBLocal(region=region) as ddb_local:
        print(f"DynamoDB Local at {ddb_local.endpoint_url} (pid {ddb_local.pid}) for: {' '.join(command)}", flush=True)
        started = time.monotonic()
        process = subprocess.Popen(
            list(command), cwd=cwd, env=command_environment(ddb_local.endpoint_url, region), start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            print(f"timed out after {timeout_s:.0f} s: stopping {command[0]}", file=sys.stderr, flush=True)
            code = 124
        finally:
            if process.poll() is None:
                stop_group(process)
        print(f"exit {code} after {time.monotonic() - started:.1f} s; stopping DynamoDB Local", flush=True)
        return code


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.with_dynamodb_local", description=__doc__.split("\n")[0])
    parser.add_argument("--cwd", help="directory to run the command in")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds (default %(default)s)")
    parser.add_argument("--region", default=REGION)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG ...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return run(command, cwd=args.cwd, timeout_s=args.timeout, region=args.region)
    except Terminated:
        return 143
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
