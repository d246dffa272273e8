"""``make serve`` (``python -m local.serve``): the read API over real HTTP on the demo's stored results.

Loads the snapshot the last ``make demo`` wrote (``.demo/store``, :mod:`local.serve.store`) into a moto server
of its own (a child process on a free loopback port, :mod:`local.emulators.atomic_moto`), builds the read
side as the stack deploys it (``results_api.reader.ResultsReader`` over those tables and bucket, the
resolver of ``results_api.api.create_app``) and serves it on http://127.0.0.1:PORT (default 8080) through
:mod:`local.serve.server`: each request becomes an API Gateway HTTP API payload-2.0 event. S3 is addressed
path-style, so the presigned URL of a ``302`` for offloaded rows points at the moto server and any client can
follow it.

**No SigV4 locally**: the deployed API requires IAM authorization on every route; this server checks no
signature and binds the loopback interface only. Ctrl-C (or SIGTERM) stops both servers.

    python -m local.serve [--port PORT] [--workdir .demo] [--read-only] [--schedule] [--jobs-dir jobs]

Unless ``--read-only``, it is also **the local world** the operator commands address with ``--local``
(:mod:`local.serve.world`): the job registry in the same moto server, each job's function on the fake Lambda
service behind Lambda's Invoke API, the world file ``<workdir>/world.json``; what operations write (a pause, a
rerun's generation, a backfill) is exported back to the store when it stops, so the next ``make serve`` keeps it.
``--schedule`` also fires every job's schedule live (its racers at each firing), as EventBridge Scheduler would.

Exit status: 0 after a clean stop; 1 when a server cannot start (the port is taken, the moto server does not
start or fails while the store is loaded); 2 when there is nothing to serve (no demo ran, or its store is corrupt
or of another format) or the arguments are bad (``--port``, ``$PORT``); 130 interrupted before it listened. Each
failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from local.serve.read_api import (
    DEFAULT_PORT,
    MOTO_START_TIMEOUT_S,
    REPO_ROOT,
    LocalReadApi,
    MotoStartError,
    PortUnavailableError,
    ServeError,
    _rel,
)
from local.serve.store import STORE_DIR, StoreError, StoreMissingError
from local.serve.world import LocalWorld
from tools.cli.program import prog

__all__ = [
    "DEFAULT_PORT",
    "MOTO_START_TIMEOUT_S",
    "REPO_ROOT",
    "LocalReadApi",
    "LocalWorld",
    "MotoStartError",
    "PortUnavailableError",
    "ServeError",
    "banner",
    "main",
    "parse_args",
]


def banner(api: LocalReadApi) -> list[str]:
    """What ``make serve`` prints once it listens: the store, the base URL, curl lines, the SigV4 caveat."""
    from local.demo.printer import read_api_lines

    manifest = api.manifest
    counts = manifest.get("counts", {})
    results = manifest.get("results", {})
    jobs = sorted(manifest["catalog"]["jobs"])
    job = "flights-dashboard" if "flights-dashboard" in jobs else jobs[0]
    other = next((name for name in jobs if name != job), job)
    slots = (results.get(job) or {}).get("slots") or [None]
    lines = [
        (
            f"serving the demo's results from {_rel(api.store_dir)} (written {manifest['created_at']}:"
            f" {counts.get('result_items', '?')} result items, {counts.get('lock_items', '?')} lock items,"
            f" {counts.get('objects', '?')} S3 objects; jobs {', '.join(jobs)})"
        ),
        (
            f"  the read API (results_api, API Gateway HTTP API payload 2.0) at {api.base_url}; S3 (moto) at"
            f" {api.moto_endpoint}"
        ),
        "  local only: no SigV4 and no IAM authorization here (the deployed API requires both); loopback only",
        "",
        *read_api_lines(api.base_url, job=job, slot=slots[0], history_job=other, serve_command=None),
        "",
        *api.extra_lines(),
        f"  index: {api.base_url}/   every job (the overview widget): {api.base_url}/widget/overview   Ctrl-C stops.",
    ]
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog("python -m local.serve"), description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"TCP port on 127.0.0.1 (default: $PORT, else {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=REPO_ROOT / ".demo", help="the demo's workdir (default: %(default)s)"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="serve the read API only: no job registry, no functions, no world for --local, nothing written back",
    )
    parser.add_argument(
        "--schedule",
        action="store_true",
        help="the local world fires every job's schedule live (its racers at each firing, as EventBridge Scheduler)",
    )
    parser.add_argument(
        "--jobs-dir",
        type=Path,
        default=REPO_ROOT / "jobs",
        help="the job folders whose functions the local world runs (default: %(default)s)",
    )
    return parser.parse_args(argv)


def _port(args: argparse.Namespace) -> int:
    port: int
    if args.port is not None:
        port = int(args.port)
    else:
        text = os.environ.get("PORT", "").strip() or str(DEFAULT_PORT)
        try:
            port = int(text)
        except ValueError:
            raise ValueError(f"PORT must be a TCP port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"the port must be from 0 to 65535, got {port}")
    return port


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir.resolve()
    store = workdir / STORE_DIR

    def err(text: str) -> None:  # the servers' log (a 500's traceback included)
        print(text, file=sys.stderr, flush=True)

    def fail(text: str, status: int) -> int:  # why it cannot serve: one line, whatever the message holds
        print(" ".join(text.split()), file=sys.stderr, flush=True)
        return status

    try:
        port = _port(args)
    except ValueError as exc:
        return fail(str(exc), 2)
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    api: LocalReadApi
    if args.read_only and args.schedule:
        return fail("--read-only serves no functions: it cannot --schedule them", 2)
    if args.read_only:
        api = LocalReadApi(workdir, port=port, log=err)
    else:
        api = LocalWorld(workdir, port=port, jobs_dir=args.jobs_dir.resolve(), live=args.schedule, log=err)
    try:
        try:
            api.start()
        except StoreMissingError:
            return fail(f"no demo results in {_rel(store)}: run `make demo` first, then `make serve`", 2)
        except StoreError as exc:
            return fail(
                f"cannot serve the demo's store in {_rel(store)}: {exc}; run `make demo` again to rewrite it", 2
            )
        except PortUnavailableError as exc:
            return fail(f"{exc}; choose another port: PORT=8081 make serve", 1)
        except ServeError as exc:
            return fail(str(exc), 1)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, request_stop)
        for line in banner(api):
            print(line, flush=True)
        while not stop.wait(0.5):
            pass
        print("\nstopping the read API and the moto server ...", flush=True)
        api.close()  # the world exports what operations wrote before its moto server stops
        return 0
    except KeyboardInterrupt:  # a Ctrl-C before the handlers were installed
        return 130
    finally:
        api.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
