"""Parent side of ``local.emulators.lambda_runtime``: one execution environment as a child process plus a reader thread.

Used by ``local.demo`` and ``local.chaos``. Each :class:`Worker` runs ``argv`` (a ``local.emulators.lambda_runtime``-style
worker) in its own session, writes invoke/shutdown messages to its stdin and puts every JSON line it prints
on a shared queue as ``(worker_id, message)``; ``(worker_id, None)`` means the process is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One execution environment: a ``local.emulators.lambda_runtime`` child process and its reader thread."""

    def __init__(
        self,
        worker_id: str,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        events: queue.Queue[tuple[str, dict[str, Any] | None]],
    ) -> None:
        self.id = worker_id
        self.log_path = log_path
        self.state = "starting"  # starting -> idle <-> busy (paused) -> dead
        self.invocation: Any = None  # the harness's record of the invocation it is serving
        self.served = 0
        self.last_used = 0.0
        self.init_ms: int | None = None
        self.started_at = time.monotonic()
        self.exit_code: int | None = None
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
        self._events = events
        self._reader = threading.Thread(target=self._read, name=f"reader-{worker_id}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                line = line.strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                self._events.put((self.id, message))
        except (OSError, ValueError):
            pass
        self._events.put((self.id, None))  # end of output: the process is gone

    @property
    def alive(self) -> bool:
        return self.state != "dead"

    def send(self, message: dict[str, Any]) -> bool:
        if self.proc.stdin is None or self.proc.poll() is not None:
            return False
        try:
            self.proc.stdin.write(json.dumps(message, separators=(",", ":")) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signum)

    def stop(self, timeout_s: float = 3.0) -> None:
        """Ask politely (end of stdin), then SIGKILL; resumes a paused process first. Bounded."""
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.send({"type": "shutdown"})
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=timeout_s)
        else:
            with contextlib.suppress(OSError, ValueError):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
        self.exit_code = self.proc.returncode
        self.state = "dead"


def pump(
    events: queue.Queue[tuple[str, dict[str, Any] | None]],
    timeout_s: float,
    handle: Callable[[str, dict[str, Any] | None], None],
) -> None:
    """Handle the workers' messages of at most ``timeout_s`` seconds: one wait, then whatever is queued."""
    try:
        worker_id, message = events.get(timeout=max(0.0, timeout_s))
    except queue.Empty:
        return
    handle(worker_id, message)
    while True:
        try:
            worker_id, message = events.get_nowait()
        except queue.Empty:
            return
        handle(worker_id, message)
