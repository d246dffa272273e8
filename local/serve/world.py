"""The local world: ``make serve`` hosting what ``tools.ops`` and ``tools.results`` address with ``--local``.

:class:`LocalWorld` is :class:`local.serve.read_api.LocalReadApi` (the demo's store loaded into a moto server of its
own, the read API over HTTP) plus what an operator needs to practise before production:

- **the job registry**: one SSM String parameter per job of the store's catalog under ``/<stack>/jobs/``
  (:data:`WORLD_STACK`'s path, :func:`athena_refresh.registry.registry_path`), written as a job stack writes it
  (:func:`athena_refresh.registry.entry_value`) into the same moto server, so ``tools.registry`` reads it unchanged;
- **the functions**: each job's function (``athena-refresh-demo-<job>``, the demo's names) on the fake Lambda
  service behind Lambda's Invoke API (:mod:`local.serve.functions`), its environment what the stack sets
  (:meth:`local.emulators.deployment.LocalDeployment.function_env`: the job's own lease, heartbeat and slot age)
  pointed at the moto server; only jobs whose folder is under ``jobs/`` and whose data exists locally get one;
- **the world's clock** (:class:`local.emulators.clock.WorldClock`, ``<workdir>/world/clock.json``): the wall clock
  at start (or ``start_at_ms``), moved forward only (``athena-once local clock --advance-s``,
  :mod:`local.serve.clock_cli`); the schedules, the job functions' execution environments, the watchdog, the read
  API and ``--local`` all read it, so hours of schedules can be practised in seconds;
- **the freshness watchdog** (with ``live``, :mod:`local.serve.world_watchdog`): the deployed handler on the
  watchdog's schedule, notifying an SNS topic in the moto server (a queue subscribed to it, and the world's log),
  its metrics in the moto server's CloudWatch;
- **what operations write is kept**: the tables and the bucket are exported back to ``<workdir>/store`` when the
  world stops (:func:`local.serve.store.export_store`, atomically), so the next ``make serve`` starts where this
  one stopped (``make demo`` replaces it);
- **the world file** ``<workdir>/world.json`` (:data:`WORLD_FILE`): the endpoints, tables and registry path of the
  running world, written once it listens and removed when it stops. ``--local`` reads it (:func:`open_world`),
  and checks the world answers as itself (``GET <functions>/ping``: its world id) before it acts.

Loopback only, no SigV4, no IAM (see :mod:`local.serve.server`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local.serve.read_api import DEFAULT_PORT, REPO_ROOT, LocalReadApi, ServeError
from local.serve.store import StoreError, export_store
from tools.cli.params import LOCAL_ENV, local_setting

__all__ = [
    "LOCAL_ENV",
    "WORKDIR_ENV",
    "WORLD_FILE",
    "LocalWorld",
    "WorldError",
    "WorldInfo",
    "local_requested",
    "open_world",
]

WORLD_KIND = "athena-once-local-world"
WORLD_FORMAT = 1
WORLD_FILE = "world.json"
#: The shared stack whose registry the world writes (``tools.ops``' default ``--stack``).
WORLD_STACK = "ScheduledAthenaRefresh"
#: The workdir ``--local`` reads (the ``make serve`` default), unless ``$ATHENA_ONCE_LOCAL_WORKDIR`` names another.
WORKDIR_ENV = "ATHENA_ONCE_LOCAL_WORKDIR"
PING_TIMEOUT_S = 3.0
START_HINT = "start it with `make serve` (athena-once local serve) in another terminal, after `make demo`"


class WorldError(RuntimeError):
    """``--local``: no local world is running, or its world file is not one (one line saying how to start it)."""


@dataclass(frozen=True)
class WorldInfo:
    """A running world, as its world file describes it (every URL on 127.0.0.1)."""

    path: Path
    pid: int
    world_id: str
    region: str
    moto_endpoint: str
    functions_endpoint: str
    read_api: str
    lock_table: str
    results_table: str
    bucket: str | None
    stack: str
    registry_path: str
    #: The world's clock file (:class:`local.emulators.clock.WorldClock`); ``None`` in a world file without one.
    clock_file: str | None = None

    def clock_ms(self) -> int:
        """The world's time, epoch ms (the wall clock for a world file without a clock)."""
        from local.emulators.clock import WorldClock
        from slotlock import system_clock_ms

        return system_clock_ms() if self.clock_file is None else WorldClock(Path(self.clock_file)).now_ms()

    def session(self) -> Any:
        """A boto3 session with the world's fake credentials and region (never the environment's)."""
        import boto3

        from local.emulators.deployment import FAKE_CREDENTIALS

        return boto3.session.Session(
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            region_name=self.region,
        )

    def endpoint(self, service: str) -> str:
        """The endpoint of ``service``: Lambda's on the local functions, every other one on the moto server."""
        return self.functions_endpoint if service == "lambda" else self.moto_endpoint


def local_requested(flag: bool) -> bool:
    """``--local`` given, or :data:`tools.cli.params.LOCAL_ENV` set to 1/true/yes."""
    return flag or local_setting()


def default_workdir() -> Path:
    """``$ATHENA_ONCE_LOCAL_WORKDIR``, else the repository's ``.demo`` (where ``make serve`` runs)."""
    text = os.environ.get(WORKDIR_ENV, "").strip()
    return Path(text) if text else REPO_ROOT / ".demo"


def open_world(workdir: Path | None = None) -> WorldInfo:
    """The running world of ``workdir`` (default :func:`default_workdir`), checked to answer as itself.

    :raises WorldError: no world file, not one of this format, or the world does not answer (stopped, killed).
    """
    path = (workdir or default_workdir()) / WORLD_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorldError(f"no local world is running (no {path}): {START_HINT}") from None
    except (OSError, ValueError) as exc:
        raise WorldError(f"{path} cannot be read ({exc}): {START_HINT}") from exc
    if not isinstance(document, dict) or document.get("kind") != WORLD_KIND or document.get("format") != WORLD_FORMAT:
        raise WorldError(f"{path} is not a world file of this version: {START_HINT}")
    try:
        optional = {"clock_file"}
        required = {k: document[k] for k in WorldInfo.__dataclass_fields__ if k not in optional | {"path"}}
        info = WorldInfo(path=path, **required, **{k: document.get(k) for k in optional})
    except (KeyError, TypeError) as exc:
        raise WorldError(f"{path} lacks {exc}: {START_HINT}") from exc
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
        with opener.open(f"{info.functions_endpoint}/ping", timeout=PING_TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError) as exc:
        raise WorldError(
            f"the local world of {path} does not answer at {info.functions_endpoint} ({exc}): it has stopped;"
            f" {START_HINT}"
        ) from exc
    if not isinstance(answer, dict) or answer.get("world_id") != info.world_id:
        raise WorldError(f"{info.functions_endpoint} is not the world {path} describes: {START_HINT}")
    return info


class LocalWorld(LocalReadApi):
    """The read API, the job registry, the functions and the world file; :meth:`close` exports the store back.

    ``jobs_dir``: the job folders whose functions the world runs (default ``jobs/``); ``keep``: export what
    operations wrote back to the store on :meth:`close` (``False``: the store stays as it was); ``live``: fire
    every job's schedule as EventBridge Scheduler does (:class:`local.serve.functions.FunctionHost`), so a paused
    job's next slot is recorded MISSED ``paused`` by its racers, and run the freshness watchdog on its own schedule;
    ``start_at_ms``: the world's clock starts there (epoch ms; default the wall clock).

    :meth:`start` raises what :meth:`LocalReadApi.start` raises, and :class:`ServeError` when the registry cannot
    be written or the Invoke API cannot listen.
    """

    moto_own_session = True  # a Ctrl-C reaches this process only: the store is exported before moto stops

    def __init__(
        self,
        workdir: Path,
        *,
        port: int = DEFAULT_PORT,
        jobs_dir: Path | None = None,
        keep: bool = True,
        live: bool = False,
        log: Any = None,
        start_at_ms: int | None = None,
    ) -> None:
        from local.emulators.clock import WorldClock

        super().__init__(workdir, port=port, log=log)
        self.clock = WorldClock(self.workdir / "world" / "clock.json")
        self.start_at_ms = start_at_ms
        self.watchdog: Any = None
        self.jobs_dir = jobs_dir or REPO_ROOT / "jobs"
        self.keep = keep
        self.live = live
        self.world_id = uuid.uuid4().hex
        self.functions: Any = None
        self.invoke: Any = None
        self.left_out: dict[str, str] = {}
        self.data_dir: Path | None = None
        self._loaded = False

    def clock_ms(self) -> int:
        """The world's time (epoch ms): what the read API's freshness, the overview and the widget read at."""
        return self.clock.now_ms()

    @property
    def world_path(self) -> Path:
        return self.workdir / WORLD_FILE

    def start(self) -> LocalWorld:
        if self.store_dir.exists():  # before the read API, which reads at the world's time too
            self.clock.reset(self.start_at_ms)
        super().start()
        self._loaded = True
        try:
            from local.serve.world_setup import build_functions, write_registry

            write_registry(self._client("ssm"), self.manifest, WORLD_STACK)
            self.functions, self.left_out = build_functions(self)
            if self.live:
                from local.serve.world_watchdog import FUNCTION_NAME, WorldWatchdog

                self.watchdog = WorldWatchdog(self, self.clock.now_ms, stack=WORLD_STACK)
                self.watchdog.setup()
                self.functions.functions[FUNCTION_NAME] = self.watchdog.function()
            from local.serve.functions import InvokeServer

            try:
                self.invoke = InvokeServer(self.functions, identity={"kind": WORLD_KIND, "world_id": self.world_id})
            except OSError as exc:
                raise ServeError(f"the local functions cannot listen on 127.0.0.1: {exc}") from exc
            self.functions.start()
            self.invoke.start()
            self._write_world_file()
        except BaseException:
            self.close()
            raise
        return self

    def _write_world_file(self) -> None:
        from athena_refresh.registry import registry_path

        document = {
            "kind": WORLD_KIND,
            "format": WORLD_FORMAT,
            "started_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "world_id": self.world_id,
            "pid": os.getpid(),
            "region": str(self.manifest["region"]),
            "moto_endpoint": self.moto_endpoint,
            "functions_endpoint": self.invoke.url,
            "read_api": self.base_url,
            "lock_table": self.manifest["lock_table"],
            "results_table": self.manifest["results_table"],
            "bucket": self.manifest.get("bucket"),
            "stack": WORLD_STACK,
            "registry_path": registry_path(WORLD_STACK),
            "clock_file": str(self.clock.path),
            "alarm_topic_arn": self.watchdog.topic_arn if self.watchdog else None,
            "notifications_queue_url": self.watchdog.queue_url if self.watchdog else None,
        }
        tmp = self.world_path.with_name(f".{WORLD_FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.world_path)

    def extra_lines(self) -> list[str]:
        """The banner's lines about the world: the registry, the functions, what is left out, how to operate."""
        functions = (
            sorted(f.job for f in self.functions.functions.values() if f.inline is None) if self.functions else []
        )
        registry = (
            f"  the local world (world file {self.world_path}): the job registry {WORLD_STACK}'s /jobs/ in the moto"
            f" server, {len(functions)} job function(s) behind Lambda's Invoke API at {self.invoke.url}"
        )
        operate = (
            "  operate on it: athena-once ops --local status | pause -s JOB --reason R | run -s JOB | rerun ... |"
            " backfill ...   (or ATHENA_ONCE_LOCAL=1)"
        )
        read = "  read it: athena-once results --local latest -s JOB   (what operations write is kept when this stops)"
        if self.live and self.functions is not None:
            registry += "; the live schedule fires every job (racers per firing, as EventBridge Scheduler)"
        lines = ["", registry]
        if self.watchdog is not None:
            from local.serve.world_watchdog import FUNCTION_NAME

            watchdog = self.functions.functions.get(FUNCTION_NAME)
            lines.append(
                f"  the freshness watchdog: {watchdog.schedule_expression if watchdog else '?'} on the world's clock"
                f" ({self.clock.path}); notifications to {self.watchdog.topic_arn} (queue {self.watchdog.queue_url})"
                " and here"
            )
        lines += [f"    {name}: no local function: {why}" for name, why in sorted(self.left_out.items())]
        lines += [operate, read]
        return lines

    def save(self) -> dict[str, Any]:
        """Export the tables and the bucket back to the store (what operations wrote); returns the manifest.

        :raises StoreError: the export failed (the previous store stays whole)."""
        manifest = self.manifest
        return export_store(
            self._client("dynamodb"),
            self._client("s3"),
            self.store_dir,
            lock_table=manifest["lock_table"],
            results_table=manifest["results_table"],
            bucket=manifest.get("bucket"),
            catalog=manifest["catalog"],
            region=str(manifest["region"]),
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            document = json.loads(self.world_path.read_text(encoding="utf-8"))
            if document.get("world_id") == self.world_id:  # never another world's file
                self.world_path.unlink()
        invoke, self.invoke = self.invoke, None
        if invoke is not None:
            invoke.close()
        functions, self.functions = self.functions, None
        if functions is not None:
            functions.close()
        loaded, self._loaded = self._loaded, False
        if loaded and self.keep and self.moto_endpoint is not None:
            try:
                manifest = self.save()
                counts = manifest["counts"]
                self.log(
                    f"kept what operations wrote: {self.store_dir} ({counts['lock_items']} lock items,"
                    f" {counts['result_items']} result items, {counts['objects']} objects)"
                )
            except StoreError as exc:
                print(f"could not keep what operations wrote: {exc}", file=sys.stderr, flush=True)
        super().close()
