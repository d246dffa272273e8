"""The read API of ``make serve`` on the demo's store: :class:`LocalReadApi` (see :mod:`local.serve.cli`).

The demo's store (``.demo/store``, :mod:`local.serve.store`) loaded into a moto server of its own (a child process on a
free loopback port, :mod:`local.emulators.atomic_moto`), the read side built as the stack deploys it
(``results_api.reader.ResultsReader`` over those tables and bucket, the resolver of ``results_api.api.create_app``)
and served on http://127.0.0.1:PORT through :mod:`local.serve.server`. :class:`local.serve.world.LocalWorld` extends
it into the local world.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from local.serve.store import STORE_DIR, import_store, read_manifest, store_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PORT = 8080
MOTO_START_TIMEOUT_S = 60.0


def _rel(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


class ServeError(RuntimeError):
    """A server of ``make serve`` cannot start; the message says which and why (one line)."""


class PortUnavailableError(ServeError):
    """The read API cannot listen on 127.0.0.1:``port`` (taken, or not allowed)."""

    def __init__(self, port: int, reason: OSError) -> None:
        super().__init__(f"cannot listen on 127.0.0.1:{port}: {reason.strerror or reason}")
        self.port = port


class MotoStartError(ServeError):
    """The moto server holding the store did not start, or failed while the store was loaded into it."""

    def __init__(self, reason: BaseException, log_path: Path) -> None:
        super().__init__(f"the local moto server failed: {reason} (see {_rel(log_path)})")
        self.log_path = log_path


class LocalReadApi:
    """The moto server holding the imported store, the reader and resolver over it, and the HTTP server.

    :meth:`start` raises :class:`StoreMissingError`/:class:`StoreError` (nothing to serve),
    :class:`PortUnavailableError` (the port) or :class:`MotoStartError`, having released whatever it had started;
    :meth:`close` is idempotent.
    """

    #: The moto server in a session of its own (:func:`local.emulators.atomic_moto.start_server_process`): a Ctrl-C
    #: does not stop it before :meth:`close` has read it (the local world exports the store then).
    moto_own_session = False

    def __init__(self, workdir: Path, *, port: int = DEFAULT_PORT, log: Callable[[str], None] | None = None) -> None:
        self.workdir = workdir
        self.store_dir = workdir / STORE_DIR
        self.port = port
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.manifest: dict[str, Any] = {}
        self.moto_endpoint: str | None = None
        self.server: Any = None
        self._moto: Any = None

    @property
    def base_url(self) -> str:
        return str(self.server.base_url)

    def start(self) -> Self:
        self.manifest = read_manifest(self.store_dir)  # before anything starts: a missing store costs nothing
        catalog = store_catalog(self.manifest)
        from local.serve.server import ReadApiServer, ReadApiService

        service = ReadApiService(app=None, jobs=sorted(catalog), widget=lambda job, now_ms: "", log=self.log)
        try:
            self.server = ReadApiServer(service, self.port)  # bind now: a taken port fails before moto starts
        except OSError as exc:
            raise PortUnavailableError(self.port, exc) from exc
        try:
            self._start_moto()
            dynamodb, s3 = self._client("dynamodb"), self._client("s3")
            manifest = self.manifest = import_store(self.store_dir, dynamodb, s3)
            from results_api.api import create_app
            from results_api.overview import VIEW
            from results_api.reader import ResultsReader
            from results_api.widget import render_widget, widget_response

            reader = ResultsReader(
                manifest["lock_table"],
                manifest["results_table"],
                catalog,
                dynamodb_client=dynamodb,
                s3_client=s3,
                clock_ms=self.clock_ms,
            )
            service.clock_ms = self.clock_ms
            service.app = create_app(reader)
            service.widget = lambda job, now_ms: render_widget(reader, job, now_ms=now_ms)
            # what the widget's Lambda (results_api.handler.widget_handler) answers to {"view": "overview"}
            service.overview = lambda now_ms: widget_response({"view": VIEW}, reader, now_ms=now_ms)
            self.server.start()
        except BaseException:
            self.close()
            raise
        return self

    def _start_moto(self) -> None:
        from local.emulators.atomic_moto import AtomicMotoError, start_server_process
        from local.emulators.deployment import aws_env

        log_path = self.workdir / "serve-moto.log"
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            log_path.unlink(missing_ok=True)
            self._moto, self.moto_endpoint = start_server_process(
                log_path=log_path, env=aws_env(), timeout_s=MOTO_START_TIMEOUT_S, own_session=self.moto_own_session
            )
        except (AtomicMotoError, OSError) as exc:  # OSError: TimeoutError, an unwritable workdir
            raise MotoStartError(exc, log_path) from exc

    def clock_ms(self) -> int:
        """The time the read API reads at (epoch ms): the wall clock here, the world's in :class:`LocalWorld`."""
        from slotlock import system_clock_ms

        return system_clock_ms()

    def _client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        from local.emulators.deployment import FAKE_CREDENTIALS

        options: dict[str, Any] = {"retries": {"mode": "standard", "max_attempts": 3}}
        if service == "s3":  # presigned URLs on http://127.0.0.1:<moto>/<bucket>/<key>, followable by any client
            options.update(s3={"addressing_style": "path"}, signature_version="s3v4")
        return boto3.client(
            service,
            endpoint_url=self.moto_endpoint,
            region_name=str(self.manifest["region"]),
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            config=Config(**options),
        )

    def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        moto, self._moto = self._moto, None
        if moto is not None:
            from local.emulators.atomic_moto import stop_server_process

            with contextlib.suppress(Exception):
                stop_server_process(moto)

    def extra_lines(self) -> list[str]:
        """More lines of the banner (the local world's); none for the read API alone."""
        return []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
