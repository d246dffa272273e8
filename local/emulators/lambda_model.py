"""What the fake Lambda service (:mod:`local.emulators.lambda_service`) and its drivers (``local.demo``,
``local.chaos``, ``local.capacity``) share: the async-invocation constants, the outcome causes, a delivery
(:class:`Delivery`), the function as the service runs it (:class:`FunctionConfig`), the driver's hooks
(:class:`ServiceHooks`) and the command line of one execution environment (:func:`environment_argv`).

Every name here is importable from :mod:`local.emulators.lambda_service` too, where the drivers import them.
"""

from __future__ import annotations

import sys
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from local.emulators.lambda_pool import Worker

MAX_ASYNC_RETRIES = 2  # Lambda async invocation: two retries, then the on-failure destination
TIMEOUT_GRACE_S = 5.0
#: Why an invocation ends without a result: the handler raised, or its environment was killed by a fault,
#: stopped at the timeout, or died on its own.
ERROR, KILLED, TIMEOUT, DIED = "error", "killed", "timeout", "died"
#: A checkpoint fault's actions (the worker protocol's ``fault`` instruction): SIGKILL, or SIGSTOP until SIGCONT.
KILL, PAUSE = "kill", "pause"


class LambdaServiceError(RuntimeError):
    """The fake service itself failed (environments would not start, a wait ran past its bound)."""


@dataclass
class Delivery:
    """One invocation of one event (a retry is a new Delivery with the same request id).

    ``kind``: the driver's label (``race``, ``retry``, ``late``, ...); ``fault``, ``storm``, ``forced``: the
    instructions the worker receives with the event (see ``local.chaos.worker``); times are
    ``time.monotonic()`` seconds.
    """

    request_id: str
    slot: str
    round: int
    racer: int
    event: dict[str, Any]
    kind: str
    attempt: int = 1
    fault: dict[str, str] | None = None
    storm: dict[str, Any] | None = None
    forced: list[dict[str, Any]] = field(default_factory=list)
    due: float = 0.0
    worker_id: str | None = None
    done: bool = False
    paused: bool = False
    resume_policy: str | None = None
    paused_at: float = 0.0
    fault_fired: str | None = None  # the action of the checkpoint fault the worker applied (kill / pause)
    status: str | None = None  # the outcome's status, error:<type> or crashed:<cause>
    reason: str | None = None
    token: int | None = None
    outcome: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cold: bool | None = None
    delivered_at: float | None = None
    finished_at: float | None = None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    retry_of: Delivery | None = field(default=None, repr=False)

    def invoke_message(self, timeout_ms: int) -> dict[str, Any]:
        """The ``invoke`` line of the worker protocol (``local.emulators.lambda_runtime``)."""
        return {
            "type": "invoke",
            "request_id": self.request_id,
            "event": self.event,
            "timeout_ms": timeout_ms,
            "fault": self.fault,
            "storm": self.storm,
            "forced": self.forced,
        }

    def retried(self, *, kind: str, due: float) -> Delivery:
        """Lambda's async retry of this invocation (``kind``, due at ``due``): the same request id, slot, racer and
        event (and a subclass's own fields), the next attempt, ``retry_of`` this one; every instruction (fault, storm,
        forced writes: a retry carries none) and every observation back to its default."""
        identity = {"request_id", "slot", "round", "racer", "event", "kind", "attempt", "due", "paused_at", "retry_of"}
        reset = {
            f.name: f.default if f.default_factory is MISSING else f.default_factory()
            for f in fields(Delivery)
            if f.name not in identity
        }
        return replace(self, **reset, kind=kind, attempt=self.attempt + 1, due=due, retry_of=self)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-shaped summary for reports."""
        outcome = self.outcome or {}
        return {
            "request_id": self.request_id,
            "racer": self.racer,
            "kind": self.kind,
            "attempt": self.attempt,
            "worker": self.worker_id,
            "cold_start": self.cold,
            "fault": self.fault,
            "status": self.status,
            "reason": self.reason,
            "fencing_token": outcome.get("fencing_token"),
            "takeover": outcome.get("takeover"),
            "reentered": outcome.get("reentered"),
            "queries_started": outcome.get("queries_started"),
            "checkpoints": [c.get("checkpoint") for c in self.checkpoints],
            "duration_s": None
            if self.finished_at is None or self.delivered_at is None
            else round(self.finished_at - self.delivered_at, 3),
            "error": self.error,
        }


class ServiceHooks:
    """What a driver adds to the service; every method is optional (the defaults do nothing)."""

    def retry_delay_s(self, delivery: Delivery, cause: str) -> float:
        """How long Lambda waits before retrying ``delivery`` that ended with ``cause`` (ERROR, KILLED, ...)."""
        return 0.2

    def on_checkpoint(self, delivery: Delivery, message: dict[str, Any]) -> None:
        """A protocol checkpoint the holder reported (``acquired``, ``query_started``, ...)."""

    def on_fault(self, delivery: Delivery, worker: Worker, message: dict[str, Any]) -> None:
        """The worker applied ``delivery.fault`` (killed or stopped itself); a stopped one is already paused."""

    def on_finished(self, delivery: Delivery) -> None:
        """``delivery`` ended (result, error or crash); its retry, if any, is already scheduled."""

    def notice(self, text: str) -> None:
        """A lifecycle event worth telling a human (a scale-out, a replaced environment, a retry, a timeout)."""

    def on_message(self, delivery: Delivery, message: dict[str, Any]) -> None:
        """A message of a type the service does not know, sent by the environment serving ``delivery`` (a
        harness's own worker reports: ``local.capacity`` sends its permit writes, query starts and deferrals)."""


@dataclass(frozen=True)
class FunctionConfig:
    """The function as the service runs it: ``worker_argv(worker_id, seq)`` builds an environment's command."""

    name: str
    env: dict[str, str]
    worker_argv: Callable[[str, int], list[str]]
    logs_dir: Path
    timeout_s: float
    min_environments: int
    max_environments: int


def environment_argv(
    module: str,
    *,
    worker_id: str,
    log_file: Path,
    data_dir: Path,
    state_dir: Path,
    function_name: str,
    memory_mb: int,
    timeout_s: float,
    simulated_duration_ms: int | None = None,
    region: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command of one execution environment: ``python -m module`` with the worker protocol's options
    (``local.emulators.lambda_runtime``; ``local.chaos.worker`` and ``local.capacity.worker`` add theirs in
    ``extra``, appended last). ``timeout_s`` (seconds) is passed as ``--timeout-ms``; ``simulated_duration_ms``
    (how long each query appears running, ms) and ``region`` only when given. Paths are passed as ``str``."""
    argv = [
        sys.executable,
        "-m",
        module,
        "--worker-id",
        worker_id,
        "--log-file",
        str(log_file),
        "--data-dir",
        str(data_dir),
        "--state-dir",
        str(state_dir),
    ]
    if simulated_duration_ms is not None:
        argv += ["--simulated-duration-ms", str(simulated_duration_ms)]
    argv += ["--function-name", function_name, "--memory-mb", str(memory_mb), "--timeout-ms", str(timeout_s * 1000)]
    if region is not None:
        argv += ["--region", region]
    return argv + list(extra)


__all__ = [
    "DIED",
    "ERROR",
    "KILL",
    "KILLED",
    "MAX_ASYNC_RETRIES",
    "PAUSE",
    "TIMEOUT",
    "TIMEOUT_GRACE_S",
    "Delivery",
    "FunctionConfig",
    "LambdaServiceError",
    "ServiceHooks",
    "environment_argv",
]
