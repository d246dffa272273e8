"""Start a set of OS processes, collect one report from each, and always clean up (tests and bench)."""

from __future__ import annotations

import queue
import subprocess
import time
from collections.abc import Sequence
from typing import Any


def gather(procs: Sequence[Any], results: Any, timeout_s: float) -> list[Any]:
    """Start ``procs``, read one report per process from the ``results`` queue, and join them.

    Bounded by ``timeout_s``: raises ``RuntimeError`` as soon as a process has died without reporting and
    ``TimeoutError`` when the reports do not all arrive in time. Whatever happens, processes still alive
    are terminated, then killed, and the queue is closed.
    """
    reports: list[Any] = []
    try:
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout_s
        while len(reports) < len(procs):
            try:
                reports.append(results.get(timeout=0.5))
                continue
            except queue.Empty:
                pass
            dead = [p.name for p in procs if p.exitcode is not None and p.exitcode != 0]
            if dead:
                raise RuntimeError(f"child processes died without reporting: {', '.join(dead)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(reports)} of {len(procs)} processes reported within {timeout_s:.0f} s")
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        results.close()
    return reports


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 5.0) -> int:
    """Stop a child by its PID: SIGTERM, wait up to ``timeout_s``, then SIGKILL. Safe to call twice.

    Returns the exit code (negative signal number if it was killed).
    """
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)
    return int(proc.returncode)
