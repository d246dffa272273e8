"""Shared helper for tests that race real OS processes."""

from __future__ import annotations

import time
from typing import Any, Sequence


def gather(procs: Sequence[Any], results: Any, timeout_s: float) -> list[Any]:
    """Start ``procs``, read one message per process from the ``results`` queue, and join them.

    Everything is bounded by ``timeout_s`` (a ``queue.Empty`` propagates when a process never reports);
    whatever happens, processes still alive are terminated, then killed, and the queue is closed.
    """
    messages: list[Any] = []
    try:
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout_s
        for _ in procs:
            messages.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
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
    return messages
