"""The demo's fixed plan: the last K slots of each job (every folder under jobs/, or the ``--job`` ones),
interleaved, N racers, a kill and a pause.

:func:`fault_plan` puts a SIGKILL of the winner right after it started its query a third of the way in, and a
SIGSTOP of the winner just before its commit two thirds in (:data:`FAULT_CHECKPOINT`); the module docstring of
:mod:`local.demo.runner` says what each shows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SLOTS = 8
DEFAULT_RACERS = 6  # the six instances of the original problem
DEFAULT_LEASE_S = 4.0  # short, so takeovers happen within seconds (the sample jobs use 45 s and 50 s)
DEFAULT_QUERY_MS = 1500  # how long each query appears QUEUED/RUNNING, like an Athena query
DEFAULT_TIMEOUT_S = 60  # the demo's Lambda timeout (the jobs use their lambda_timeout_s)


KILL, PAUSE = "kill", "pause"
FAULT_CHECKPOINT = {KILL: "query_started", PAUSE: "before_commit"}


@dataclass(frozen=True)
class DemoOptions:
    slots: int = DEFAULT_SLOTS
    racers: int = DEFAULT_RACERS
    lease_s: float = DEFAULT_LEASE_S
    faults: bool = True
    report: Path = REPO_ROOT / "demo-report.json"
    workdir: Path = REPO_ROOT / ".demo"
    query_ms: int = DEFAULT_QUERY_MS
    timeout_s: int = DEFAULT_TIMEOUT_S
    seed: int = 13
    jobs: tuple[str, ...] = ()  # the jobs to run (--job, repeatable); empty: every job folder
    jobs_dir: Path = REPO_ROOT / "jobs"

    @property
    def heartbeat_s(self) -> float:
        """A quarter of the lease (1 s for the default 4 s lease): well below half, as the lock requires."""
        return round(self.lease_s / 4, 3)


def fault_plan(slots: int, enabled: bool = True) -> dict[int, str]:
    """Slot index (within a job) -> fault: a kill a third of the way in, a pause two thirds in (one slot: kill
    only). The demo gives the kill to its first job and the pause to its last."""
    if not enabled or slots < 1:
        return {}
    plan = {slots // 3: KILL}
    pause_at = (2 * slots) // 3
    if pause_at not in plan:
        plan[pause_at] = PAUSE
    return plan


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
