"""What every bench scenario shares: the slots it uses (one fresh minute per cycle or race, in the past), the
barrier and readiness timeouts of its child processes, the no-op job, the run's tables, and the racer processes
(:func:`run_racers`: spawned, released together by one barrier, each reporting its records or its traceback).
"""

from __future__ import annotations

import multiprocessing
import traceback
import uuid
from typing import TYPE_CHECKING, Any

from local.emulators.processes import gather
from slotlock import Slot

from .backends import make_client

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .backends import Endpoint
    from .contenders import Contender

#: Slots are minutes from here on, one fresh slot per cycle or race.
BASE_SLOT_EPOCH_S = Slot.parse("2024-01-01T00:00:00Z").epoch_s  # past: slotlock refuses future slots
BARRIER_FIRST_TIMEOUT_S = 180.0  # covers spawning and importing in every racer (32 processes on 2 cores)
BARRIER_TIMEOUT_S = 60.0
HOLDER_READY_TIMEOUT_S = 120.0


def slot_at(index: int) -> Slot:
    return Slot(BASE_SLOT_EPOCH_S + 60 * index)


def noop() -> None:
    """The job: nothing, so the figures are the locking alone."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:10]


def create_tables(endpoint: Endpoint, run_id: str, contenders: Sequence[type[Contender]]) -> None:
    client = make_client(endpoint)
    for contender in contenders:
        contender.create_tables(client, run_id)


def run_racers(
    body: Callable[..., None], args: tuple[Any, ...], *, racers: int, timeout_s: float, name: str, what: str
) -> list[tuple[int, list[Any], None]]:
    """Run ``body(*args, index, barrier, records)`` in ``racers`` spawned processes (``name-<index>``) sharing one
    barrier of ``racers`` parties; each appends its records to ``records``. Returns every racer's report
    ``(index, records, None)``, in arrival order, within ``timeout_s`` (:func:`local.emulators.processes.gather`).

    :raises RuntimeError: a racer raised (``"<what> failed:"`` and each racer's traceback), or died.
    :raises TimeoutError: the reports did not all arrive in time.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(racers), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(body, args, index, barrier, results), name=f"{name}-{index}")
        for index in range(racers)
    ]
    reports = gather(procs, results, timeout_s)
    errors = [f"racer {index}: {error}" for index, _, error in reports if error]
    if errors:
        raise RuntimeError(f"{what} failed:\n" + "\n".join(errors))
    return reports


def _racer(body: Callable[..., None], args: tuple[Any, ...], index: int, barrier: Any, results: Any) -> None:
    """One racer process: ``body``'s records, or its traceback (and the barrier aborted, freeing the others)."""
    records: list[Any] = []
    try:
        body(*args, index, barrier, records)
        results.put((index, records, None))
    except BaseException:  # noqa: BLE001 - report instead of dying silently; free the others from the barrier
        barrier.abort()
        results.put((index, records, traceback.format_exc()))
