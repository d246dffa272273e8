"""AWS's own DynamoDB Local, without Docker: fetched through npm, run with ``java``, one process per use.

moto is more lenient than DynamoDB (it accepts unused expression values and raises a Python error on
wrong-typed comparisons); DynamoDB Local validates requests like AWS. The jar is taken from the npm
package ``amplify-dynamodb-simulator`` (pinned below), which ships ``emulator/DynamoDBLocal.jar`` and
its native ``DynamoDBLocal_lib/``.

Usage::

    with DynamoDBLocal() as ddb_local:
        client = boto3.client("dynamodb", endpoint_url=ddb_local.endpoint_url, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")

Notes: it binds all interfaces (there is no host option), so the port is picked free on all of them;
without ``-sharedDb`` its data is separate per access key and region; and it deletes TTL-expired items
within seconds of real time on tables with TTL enabled.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import boto3
from botocore.config import Config

from local.emulators.processes import stop_process

#: The npm package that carries DynamoDB Local (1.25.1 in this version), pinned.
NPM_PACKAGE = "amplify-dynamodb-simulator"
NPM_VERSION = "2.9.30"
JAR_NAME = "DynamoDBLocal.jar"
LIB_DIR_NAME = "DynamoDBLocal_lib"

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "scheduled-athena-once" / "dynamodb-local"


class DynamoDBLocalError(RuntimeError):
    """DynamoDB Local could not be fetched or started."""


def java_available() -> bool:
    """True when a working ``java`` is on PATH (macOS has a stub ``java`` that only prints an error)."""
    java = shutil.which("java")
    if java is None:
        return False
    try:
        done = subprocess.run([java, "-version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _emulator_dir(cache_dir: Path) -> Path:
    return cache_dir / f"{NPM_PACKAGE}-{NPM_VERSION}" / "package" / "emulator"


def ensure_dynamodb_local(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """The directory holding ``DynamoDBLocal.jar`` and ``DynamoDBLocal_lib/``; fetched on first use.

    Idempotent: once extracted, returns at once without running npm. The first call runs
    ``npm pack amplify-dynamodb-simulator@<pinned>`` (about 57 MB) in a temporary directory inside
    ``cache_dir`` (outside the repository), extracts it there and moves it into place atomically.
    """
    cache_dir = Path(cache_dir)
    emulator = _emulator_dir(cache_dir)
    if (emulator / JAR_NAME).is_file():
        return emulator
    npm = shutil.which("npm")
    if npm is None:
        raise DynamoDBLocalError(f"npm is not on PATH: it is needed to fetch {NPM_PACKAGE}@{NPM_VERSION}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".fetch-") as tmp:
        work = Path(tmp)
        done = subprocess.run(
            [npm, "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--silent", "--no-audit", "--no-fund"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        tarballs = sorted(work.glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise DynamoDBLocalError(
                f"npm pack {NPM_PACKAGE}@{NPM_VERSION} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        staged = work / "extracted"
        with tarfile.open(tarballs[0]) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(staged, filter="data")
            else:  # pragma: no cover - Python without extraction filters
                tar.extractall(staged)
        if not (staged / "package" / "emulator" / JAR_NAME).is_file():
            raise DynamoDBLocalError(f"{NPM_PACKAGE}@{NPM_VERSION} has no package/emulator/{JAR_NAME}")
        target = emulator.parent.parent
        try:
            staged.rename(target)
        except OSError:
            if not (emulator / JAR_NAME).is_file():  # not a concurrent fetch that won the rename
                raise
    if not (emulator / JAR_NAME).is_file():
        raise DynamoDBLocalError(f"{emulator / JAR_NAME} is missing after extraction")
    return emulator


def _free_port() -> int:
    # DynamoDB Local binds every interface, so ask for a port that is free on all of them.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


class DynamoDBLocal:
    """One in-memory DynamoDB Local process; a context manager. ``endpoint_url`` once started."""

    def __init__(
        self,
        emulator_dir: Path | None = None,
        *,
        port: int | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        region: str = "us-east-1",
    ) -> None:
        self.emulator_dir = Path(emulator_dir) if emulator_dir is not None else None
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.region = region
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def endpoint_url(self) -> str:
        if self.process is None or self.port is None:
            raise DynamoDBLocalError("DynamoDB Local is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def client(self, **kwargs: Any) -> Any:
        """A DynamoDB client for this instance, with fake credentials (data is per key and region)."""
        params: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "region_name": self.region,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        params.update(kwargs)
        return boto3.session.Session().client("dynamodb", **params)

    def start(self) -> DynamoDBLocal:
        if self.process is not None:
            return self
        if not java_available():
            raise DynamoDBLocalError("no working `java` on PATH (install e.g. default-jre-headless)")
        emulator = self.emulator_dir or ensure_dynamodb_local()
        self.emulator_dir = emulator
        fixed_port = self.port is not None
        last_error = ""
        for _ in range(1 if fixed_port else 3):  # a picked port can be taken before java binds it
            if not fixed_port:
                self.port = _free_port()
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the java process; closed by stop()
            self.process = subprocess.Popen(
                [
                    "java",
                    f"-Djava.library.path={emulator / LIB_DIR_NAME}",
                    "-jar",
                    str(emulator / JAR_NAME),
                    "-inMemory",
                    "-port",
                    str(self.port),
                    "-disableTelemetry",
                ],
                cwd=emulator,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
            atexit.register(self.stop)
            try:
                self._wait_ready()
                return self
            except DynamoDBLocalError as error:
                last_error = str(error)
                self.stop()
        raise DynamoDBLocalError(last_error)

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def _wait_ready(self) -> None:
        assert self.process is not None
        probe = self.client(config=Config(connect_timeout=1, read_timeout=5, retries={"total_max_attempts": 1}))
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.process.poll() is not None:
                raise DynamoDBLocalError(
                    f"DynamoDB Local exited with {self.process.returncode} on port {self.port}: {self._log_tail()}"
                )
            try:
                probe.list_tables(Limit=1)
                return
            except Exception as error:
                if time.monotonic() >= deadline:
                    raise DynamoDBLocalError(
                        f"DynamoDB Local not ready after {self.startup_timeout_s:.0f} s ({error}): {self._log_tail()}"
                    ) from error
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the process by its PID: terminate, bounded wait, then kill. Idempotent."""
        process, self.process = self.process, None
        atexit.unregister(self.stop)
        if process is not None:
            stop_process(process, self.stop_timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> None:
    """``python -m local.emulators.dynamodb_local``: run one instance in the foreground until Ctrl-C."""
    with DynamoDBLocal() as ddb_local:
        print(
            f"DynamoDB Local {NPM_PACKAGE}@{NPM_VERSION} at {ddb_local.endpoint_url} (pid {ddb_local.pid}); Ctrl-C stops it"
        )
        try:
            while ddb_local.process is not None and ddb_local.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
